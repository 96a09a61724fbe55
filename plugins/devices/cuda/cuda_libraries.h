// cuBLAS and cuDNN for the cuda plugin's kernels: one handle of each per
// stream (a stream is never used by two threads at once, so neither is its
// handle), bound to the stream when first asked for, and errors turned
// into weft::sdk::Error with the library's own words.
#ifndef WEFT_PLUGINS_DEVICES_CUDA_CUDA_LIBRARIES_H_
#define WEFT_PLUGINS_DEVICES_CUDA_CUDA_LIBRARIES_H_

#include <cublas_v2.h>
#include <cudnn.h>

#include "gpu/gpu_device.h"
#include "gpu/kernel_framework.h"

namespace weft::gpu {

// The stream's handles, made on first use.
cublasHandle_t BlasHandle(Stream& stream);
cudnnHandle_t DnnHandle(Stream& stream);

// Throw INTERNAL ("<what>: CUBLAS_STATUS_...: <text>") unless OK.
void CheckBlas(cublasStatus_t status, const char* what);
void CheckDnn(cudnnStatus_t status, const char* what);

void RegisterBlasKernels(KernelRegistry& r);
void RegisterDnnKernels(KernelRegistry& r);

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_CUDA_CUDA_LIBRARIES_H_
