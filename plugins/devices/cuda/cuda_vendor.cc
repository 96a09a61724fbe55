// What makes the shared GPU plugin (plugins/devices/gpu/) the cuda plugin:
// CUDA's device properties, the cuBLAS/cuDNN handles of a stream and the
// kernels built on them (its names and the UNAVAILABLE message are in
// cuda_probe.cc, which the front plugin shares).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cuda_libraries.h"
#include "cuda_probe.h"
#include "gpu/vendor.h"
#include "weft/sdk/status.h"

namespace weft::gpu {

std::string DriverText() {
  int driver = 0;
  (void)rt::DriverGetVersion(&driver);
  return "CUDA driver " + (driver > 0 ? CudaVersion(driver) : std::string("unknown")) + ", runtime " +
         RuntimeVersion() + ", cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." + std::to_string(CUBLAS_VER_MINOR) +
         ", cuDNN " + std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR);
}

std::vector<std::pair<std::string, std::string>> VendorProperties(const rt::DeviceProp& prop) {
  char pci[32];
  std::snprintf(pci, sizeof pci, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  return {{"compute capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"pci bus id", pci},
          {"memory bus", std::to_string(prop.memoryBusWidth) + " bits"},
          {"l2 cache", std::to_string(prop.l2CacheSize >> 10) + " KiB"}};
}

void RegisterVendorKernels(KernelRegistry& r) {
  RegisterBlasKernels(r);
  RegisterDnnKernels(r);
}

// --- Per-stream library handles ------------------------------------------------------

struct StreamLibraries {
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;
};

void DestroyStreamLibraries(StreamLibraries* libraries) {
  if (libraries->blas != nullptr) (void)cublasDestroy(libraries->blas);
  if (libraries->dnn != nullptr) (void)cudnnDestroy(libraries->dnn);
  delete libraries;
}

namespace {
StreamLibraries& LibrariesOf(Stream& stream) {
  if (stream.libraries == nullptr) stream.libraries = new StreamLibraries();
  return *stream.libraries;
}
}  // namespace

void CheckBlas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const weft_code_t code = status == CUBLAS_STATUS_ALLOC_FAILED ? WEFT_RESOURCE_EXHAUSTED : WEFT_INTERNAL;
  throw sdk::Error(code, std::string(what) + ": " + cublasGetStatusName(status) + ": " + cublasGetStatusString(status));
}

void CheckDnn(cudnnStatus_t status, const char* what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const weft_code_t code = status == CUDNN_STATUS_ALLOC_FAILED ? WEFT_RESOURCE_EXHAUSTED : WEFT_INTERNAL;
  throw sdk::Error(code, std::string(what) + ": " + cudnnGetErrorString(status));
}

cublasHandle_t BlasHandle(Stream& stream) {
  StreamLibraries& libs = LibrariesOf(stream);
  if (libs.blas == nullptr) {
    cublasHandle_t handle = nullptr;
    CheckBlas(cublasCreate(&handle), "cublasCreate");
    const cublasStatus_t bound = cublasSetStream(handle, stream.stream);
    if (bound != CUBLAS_STATUS_SUCCESS) {
      (void)cublasDestroy(handle);
      CheckBlas(bound, "cublasSetStream");
    }
    libs.blas = handle;
  }
  return libs.blas;
}

cudnnHandle_t DnnHandle(Stream& stream) {
  StreamLibraries& libs = LibrariesOf(stream);
  if (libs.dnn == nullptr) {
    cudnnHandle_t handle = nullptr;
    CheckDnn(cudnnCreate(&handle), "cudnnCreate");
    const cudnnStatus_t bound = cudnnSetStream(handle, stream.stream);
    if (bound != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroy(handle);
      CheckDnn(bound, "cudnnSetStream");
    }
    libs.dnn = handle;
  }
  return libs.dnn;
}

}  // namespace weft::gpu
