// What makes the shared GPU plugin (plugins/devices/gpu/) the hip plugin:
// its names, the UNAVAILABLE message, HIP's device properties, and the
// kernels that stand in for the libraries Debian does not package
// (hipBLAS, MIOpen): a tiled MatMul and direct softmax kernels. There are
// no convolutions.
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "gpu/kernel_framework.h"
#include "gpu/vendor.h"

namespace weft::gpu {

void RegisterTiledMatMulKernels(KernelRegistry& r);
void RegisterSoftmaxKernels(KernelRegistry& r);

namespace {

// HIP versions are major * 10^7 + minor * 10^5 + patch.
std::string HipVersion(int version) {
  return std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100) + "." +
         std::to_string(version % 100000);
}

bool Exists(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0;
}

constexpr const char* kDisableHint = "or disable the plugin with [plugins] disable = [\"hip\"]";

}  // namespace

const VendorInfo& Vendor() {
  static const VendorInfo info{"hip",
                               "HIP",
                               "HIP",
                               "hip",
                               "AMD",
                               WEFT_HIP_PLUGIN_VERSION,
                               "AMD GPUs through the HIP runtime (ROCm): own kernels, no convolutions"};
  return info;
}

std::string UnavailableMessage(rt::Error error) {
  std::string message = "no usable HIP device: hipGetDeviceCount ";
  message += error == rt::kSuccess ? std::string("found no devices") : "failed: " + RuntimeErrorText(error);
  message += ". ";
  if (!Exists("/dev/kfd")) {
    message +=
        "/dev/kfd does not exist: the amdgpu kernel driver is not loaded, or this process (a container?) was "
        "not given the device; install the GPU's driver, ";
  } else {
    const char* visible = std::getenv("HIP_VISIBLE_DEVICES");
    message += "ROCm found no GPU it supports";
    if (visible != nullptr) message += std::string(" with HIP_VISIBLE_DEVICES='") + visible + "'";
    message += "; check the GPU with rocminfo (this plugin's kernels are built for " WEFT_HIP_ARCHITECTURES "), ";
  }
  return message + kDisableHint;
}

std::string DriverText() {
  int driver = 0, runtime = 0;
  (void)rt::DriverGetVersion(&driver);
  (void)rt::RuntimeGetVersion(&runtime);
  return "HIP driver " + (driver > 0 ? HipVersion(driver) : std::string("unknown")) + ", runtime " +
         (runtime > 0 ? HipVersion(runtime) : std::string("unknown"));
}

std::vector<std::pair<std::string, std::string>> VendorProperties(const rt::DeviceProp& prop) {
  return {{"architecture", prop.gcnArchName},
          {"pci bus id", std::to_string(prop.pciDomainID) + ":" + std::to_string(prop.pciBusID) + ":" +
                             std::to_string(prop.pciDeviceID)},
          {"memory bus", std::to_string(prop.memoryBusWidth) + " bits"}};
}

void RegisterVendorKernels(KernelRegistry& r) {
  RegisterTiledMatMulKernels(r);
  RegisterSoftmaxKernels(r);
}

// HIP kernels need no library handles.
struct StreamLibraries {};

void DestroyStreamLibraries(StreamLibraries* libraries) { delete libraries; }

}  // namespace weft::gpu
