// The GPU runtime API the cuda and hip device plugins share, as one small
// set of names over the CUDA runtime (WEFT_GPU_CUDA) or the HIP runtime
// (WEFT_GPU_HIP). The two APIs are the same calls with another prefix;
// writing the plugin once against these aliases keeps the two plugins from
// drifting apart, and the vendor-specific parts (cuBLAS, cuDNN, messages)
// stay in plugins/devices/cuda and plugins/devices/hip.
//
//   rt::Error e = rt::Malloc(&ptr, bytes);
//   if (e != rt::kSuccess) throw RuntimeError(e, "allocating 64 bytes");
//
// Host code only: this header is safe in files built by the plain C++
// compiler. Device code includes gpu/device_compat.h instead.
#ifndef WEFT_PLUGINS_DEVICES_GPU_GPU_RUNTIME_H_
#define WEFT_PLUGINS_DEVICES_GPU_GPU_RUNTIME_H_

#include <cstddef>
#include <string>

#if defined(WEFT_GPU_CUDA) == defined(WEFT_GPU_HIP)
#error "define exactly one of WEFT_GPU_CUDA and WEFT_GPU_HIP"
#endif

#if defined(WEFT_GPU_CUDA)
#include <cuda_runtime_api.h>
#else
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#endif

namespace weft::gpu::rt {

#if defined(WEFT_GPU_CUDA)

using Error = cudaError_t;
using Stream = cudaStream_t;
using Event = cudaEvent_t;
using DeviceProp = cudaDeviceProp;
using StreamCallback = cudaStreamCallback_t;

inline constexpr Error kSuccess = cudaSuccess;
inline constexpr Error kErrorNotReady = cudaErrorNotReady;
inline constexpr Error kErrorOutOfMemory = cudaErrorMemoryAllocation;
inline constexpr Error kErrorNoDevice = cudaErrorNoDevice;

inline const char* ErrorName(Error e) { return cudaGetErrorName(e); }
inline const char* ErrorString(Error e) { return cudaGetErrorString(e); }
inline Error GetLastError() { return cudaGetLastError(); }
inline Error GetDeviceCount(int* count) { return cudaGetDeviceCount(count); }
inline Error SetDevice(int ordinal) { return cudaSetDevice(ordinal); }
inline Error GetDeviceProperties(DeviceProp* prop, int ordinal) { return cudaGetDeviceProperties(prop, ordinal); }
inline Error DriverGetVersion(int* version) { return cudaDriverGetVersion(version); }
inline Error RuntimeGetVersion(int* version) { return cudaRuntimeGetVersion(version); }
inline Error MemGetInfo(size_t* free_bytes, size_t* total_bytes) { return cudaMemGetInfo(free_bytes, total_bytes); }

inline Error Malloc(void** ptr, size_t bytes) { return cudaMalloc(ptr, bytes); }
inline Error Free(void* ptr) { return cudaFree(ptr); }
inline Error MallocHost(void** ptr, size_t bytes) { return cudaMallocHost(ptr, bytes); }
inline Error FreeHost(void* ptr) { return cudaFreeHost(ptr); }

inline Error StreamCreate(Stream* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking); }
inline Error StreamDestroy(Stream stream) { return cudaStreamDestroy(stream); }
inline Error StreamSynchronize(Stream stream) { return cudaStreamSynchronize(stream); }
inline Error StreamWaitEvent(Stream stream, Event event) { return cudaStreamWaitEvent(stream, event, 0); }
// |fn|(stream, status, user) runs on a runtime thread once the stream's
// work so far is done, with the first error that work hit; it may not call
// the runtime.
inline Error StreamAddCallback(Stream stream, StreamCallback fn, void* user) {
  return cudaStreamAddCallback(stream, fn, user, 0);
}

inline Error EventCreate(Event* event) { return cudaEventCreateWithFlags(event, cudaEventDisableTiming); }
inline Error EventDestroy(Event event) { return cudaEventDestroy(event); }
inline Error EventRecord(Event event, Stream stream) { return cudaEventRecord(event, stream); }
inline Error EventSynchronize(Event event) { return cudaEventSynchronize(event); }

inline Error CopyHostToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
}
inline Error CopyDeviceToHost(void* dst, const void* src, size_t bytes, Stream stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
}
inline Error CopyDeviceToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream);
}
inline Error CopyPeer(void* dst, int dst_ordinal, const void* src, int src_ordinal, size_t bytes, Stream stream) {
  return cudaMemcpyPeerAsync(dst, dst_ordinal, src, src_ordinal, bytes, stream);
}
inline Error Memset(void* dst, int value, size_t bytes, Stream stream) {
  return cudaMemsetAsync(dst, value, bytes, stream);
}

#else  // WEFT_GPU_HIP

using Error = hipError_t;
using Stream = hipStream_t;
using Event = hipEvent_t;
using DeviceProp = hipDeviceProp_t;
using StreamCallback = hipStreamCallback_t;

inline constexpr Error kSuccess = hipSuccess;
inline constexpr Error kErrorNotReady = hipErrorNotReady;
inline constexpr Error kErrorOutOfMemory = hipErrorOutOfMemory;
inline constexpr Error kErrorNoDevice = hipErrorNoDevice;

inline const char* ErrorName(Error e) { return hipGetErrorName(e); }
inline const char* ErrorString(Error e) { return hipGetErrorString(e); }
inline Error GetLastError() { return hipGetLastError(); }
inline Error GetDeviceCount(int* count) { return hipGetDeviceCount(count); }
inline Error SetDevice(int ordinal) { return hipSetDevice(ordinal); }
inline Error GetDeviceProperties(DeviceProp* prop, int ordinal) { return hipGetDeviceProperties(prop, ordinal); }
inline Error DriverGetVersion(int* version) { return hipDriverGetVersion(version); }
inline Error RuntimeGetVersion(int* version) { return hipRuntimeGetVersion(version); }
inline Error MemGetInfo(size_t* free_bytes, size_t* total_bytes) { return hipMemGetInfo(free_bytes, total_bytes); }

inline Error Malloc(void** ptr, size_t bytes) { return hipMalloc(ptr, bytes); }
inline Error Free(void* ptr) { return hipFree(ptr); }
inline Error MallocHost(void** ptr, size_t bytes) { return hipHostMalloc(ptr, bytes, 0); }
inline Error FreeHost(void* ptr) { return hipHostFree(ptr); }

inline Error StreamCreate(Stream* stream) { return hipStreamCreateWithFlags(stream, hipStreamNonBlocking); }
inline Error StreamDestroy(Stream stream) { return hipStreamDestroy(stream); }
inline Error StreamSynchronize(Stream stream) { return hipStreamSynchronize(stream); }
inline Error StreamWaitEvent(Stream stream, Event event) { return hipStreamWaitEvent(stream, event, 0); }
inline Error StreamAddCallback(Stream stream, StreamCallback fn, void* user) {
  return hipStreamAddCallback(stream, fn, user, 0);
}

inline Error EventCreate(Event* event) { return hipEventCreateWithFlags(event, hipEventDisableTiming); }
inline Error EventDestroy(Event event) { return hipEventDestroy(event); }
inline Error EventRecord(Event event, Stream stream) { return hipEventRecord(event, stream); }
inline Error EventSynchronize(Event event) { return hipEventSynchronize(event); }

inline Error CopyHostToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, stream);
}
inline Error CopyDeviceToHost(void* dst, const void* src, size_t bytes, Stream stream) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, stream);
}
inline Error CopyDeviceToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream);
}
inline Error CopyPeer(void* dst, int dst_ordinal, const void* src, int src_ordinal, size_t bytes, Stream stream) {
  return hipMemcpyPeerAsync(dst, dst_ordinal, src, src_ordinal, bytes, stream);
}
inline Error Memset(void* dst, int value, size_t bytes, Stream stream) {
  return hipMemsetAsync(dst, value, bytes, stream);
}

#endif

}  // namespace weft::gpu::rt

namespace weft::gpu {

// The runtime's text for |error|: "cudaErrorNoDevice: no CUDA-capable
// device is detected".
inline std::string RuntimeErrorText(rt::Error error) {
  const char* name = rt::ErrorName(error);
  const char* text = rt::ErrorString(error);
  std::string out = name != nullptr ? name : ("error " + std::to_string(static_cast<int>(error)));
  // HIP's text is sometimes just the name again.
  if (text != nullptr && std::string(text) != out) out += std::string(": ") + text;
  return out;
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_GPU_RUNTIME_H_
