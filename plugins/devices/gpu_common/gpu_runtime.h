// One spelling for the CUDA and HIP runtimes, so that the cuda and hip
// device plugins share their host code (gpu_device.cc, gpu_plugin.cc): a
// plugin's build defines WEFT_GPU_CUDA or WEFT_GPU_HIP, and the code says
// gpuMalloc, gpuStream_t, ... which become cudaMalloc or hipMalloc.
//
// Plain C++ (no device code): the host sources are compiled by the
// project's C++ compiler with the runtime's API header only.
#ifndef WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_RUNTIME_H_
#define WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_RUNTIME_H_

#if defined(WEFT_GPU_CUDA) == defined(WEFT_GPU_HIP)
#error "define exactly one of WEFT_GPU_CUDA and WEFT_GPU_HIP"
#endif

#if defined(WEFT_GPU_CUDA)
#include <cuda_runtime_api.h>

#define WEFT_GPU_TYPE "CUDA"
#define WEFT_GPU_RUNTIME "CUDA"
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
using gpuDeviceProp_t = cudaDeviceProp;
#define gpuSuccess cudaSuccess
#define gpuErrorNotReady cudaErrorNotReady
#define gpuGetErrorName cudaGetErrorName
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuSetDevice cudaSetDevice
#define gpuDriverGetVersion cudaDriverGetVersion
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemGetInfo cudaMemGetInfo
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEventCreateWithFlags cudaEventCreateWithFlags
#define gpuEventDisableTiming cudaEventDisableTiming
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventQuery cudaEventQuery
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuMemcpyPeerAsync cudaMemcpyPeerAsync
#define gpuMemsetAsync cudaMemsetAsync
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer

#else  // WEFT_GPU_HIP
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>

#define WEFT_GPU_TYPE "HIP"
#define WEFT_GPU_RUNTIME "HIP"
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
using gpuDeviceProp_t = hipDeviceProp_t;
#define gpuSuccess hipSuccess
#define gpuErrorNotReady hipErrorNotReady
#define gpuGetErrorName hipGetErrorName
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuSetDevice hipSetDevice
#define gpuDriverGetVersion hipDriverGetVersion
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemGetInfo hipMemGetInfo
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuEventCreateWithFlags hipEventCreateWithFlags
#define gpuEventDisableTiming hipEventDisableTiming
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventQuery hipEventQuery
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuMemcpyPeerAsync hipMemcpyPeerAsync
#define gpuMemsetAsync hipMemsetAsync
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#endif

#endif  // WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_RUNTIME_H_
