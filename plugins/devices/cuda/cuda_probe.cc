// The cuda plugin's names and its UNAVAILABLE message, from the CUDA
// runtime alone: shared by the front (gpu_front.cc, which must not load
// cuBLAS or cuDNN) and the implementation.
#include "cuda_probe.h"

#include <cstdlib>
#include <string>

#include <cuda_runtime_api.h>

#include "gpu/vendor.h"

namespace weft::gpu {
std::string CudaVersion(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string RuntimeVersion() {
  int version = 0;
  if (rt::RuntimeGetVersion(&version) != rt::kSuccess || version <= 0) return CudaVersion(CUDART_VERSION);
  return CudaVersion(version);
}

namespace {

constexpr const char* kDisableHint = "or disable the plugin with [plugins] disable = [\"cuda\"]";

}  // namespace

const VendorInfo& Vendor() {
  static const VendorInfo info{"cuda",
                               "CUDA",
                               "CUDA",
                               "cuda",
                               "NVIDIA",
                               WEFT_CUDA_PLUGIN_VERSION,
                               "NVIDIA GPUs through the CUDA runtime: cuBLAS, cuDNN and own kernels"};
  return info;
}

std::string UnavailableMessage(rt::Error error) {
  const std::string runtime = RuntimeVersion();
  if (error == rt::kSuccess) {
    return "no usable CUDA device: cudaGetDeviceCount found no devices; check the GPU with nvidia-smi, " +
           std::string(kDisableHint);
  }
  std::string message = "no usable CUDA device: cudaGetDeviceCount failed: " + RuntimeErrorText(error) + ". ";
  int driver = 0;
  (void)rt::DriverGetVersion(&driver);
  if (driver <= 0) {
    message +=
        "No NVIDIA driver was found (libcuda.so.1 is not installed or not on the library path); this "
        "plugin's CUDA " +
        runtime + " runtime needs a driver for CUDA " + runtime +
        " or newer. Install the "
        "NVIDIA driver, " +
        kDisableHint;
  } else if (error == cudaErrorInsufficientDriver) {
    message += "The installed NVIDIA driver supports CUDA " + CudaVersion(driver) +
               ", older than this plugin's "
               "CUDA " +
               runtime + " runtime. Update the driver, " + kDisableHint;
  } else if (error == cudaErrorNoDevice) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    message += "The driver (CUDA " + CudaVersion(driver) + ") sees no GPU";
    if (visible != nullptr) message += std::string(" with CUDA_VISIBLE_DEVICES='") + visible + "'";
    message += "; check that one is installed and visible to this process (nvidia-smi), " + std::string(kDisableHint);
  } else {
    message +=
        "Check the GPU and its driver (CUDA " + CudaVersion(driver) + ") with nvidia-smi, " + std::string(kDisableHint);
  }
  return message;
}

}  // namespace weft::gpu
