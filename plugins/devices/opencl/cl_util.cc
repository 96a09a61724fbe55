#include "cl_util.h"

namespace weft::opencl {

const char* ClErrorName(cl_int code) {
  switch (code) {
#define WEFT_CL_CASE(name) \
  case name: return #name;
    WEFT_CL_CASE(CL_SUCCESS)
    WEFT_CL_CASE(CL_DEVICE_NOT_FOUND)
    WEFT_CL_CASE(CL_DEVICE_NOT_AVAILABLE)
    WEFT_CL_CASE(CL_COMPILER_NOT_AVAILABLE)
    WEFT_CL_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    WEFT_CL_CASE(CL_OUT_OF_RESOURCES)
    WEFT_CL_CASE(CL_OUT_OF_HOST_MEMORY)
    WEFT_CL_CASE(CL_PROFILING_INFO_NOT_AVAILABLE)
    WEFT_CL_CASE(CL_MEM_COPY_OVERLAP)
    WEFT_CL_CASE(CL_IMAGE_FORMAT_MISMATCH)
    WEFT_CL_CASE(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    WEFT_CL_CASE(CL_BUILD_PROGRAM_FAILURE)
    WEFT_CL_CASE(CL_MAP_FAILURE)
    WEFT_CL_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    WEFT_CL_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    WEFT_CL_CASE(CL_COMPILE_PROGRAM_FAILURE)
    WEFT_CL_CASE(CL_LINKER_NOT_AVAILABLE)
    WEFT_CL_CASE(CL_LINK_PROGRAM_FAILURE)
    WEFT_CL_CASE(CL_DEVICE_PARTITION_FAILED)
    WEFT_CL_CASE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    WEFT_CL_CASE(CL_INVALID_VALUE)
    WEFT_CL_CASE(CL_INVALID_DEVICE_TYPE)
    WEFT_CL_CASE(CL_INVALID_PLATFORM)
    WEFT_CL_CASE(CL_INVALID_DEVICE)
    WEFT_CL_CASE(CL_INVALID_CONTEXT)
    WEFT_CL_CASE(CL_INVALID_QUEUE_PROPERTIES)
    WEFT_CL_CASE(CL_INVALID_COMMAND_QUEUE)
    WEFT_CL_CASE(CL_INVALID_HOST_PTR)
    WEFT_CL_CASE(CL_INVALID_MEM_OBJECT)
    WEFT_CL_CASE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    WEFT_CL_CASE(CL_INVALID_IMAGE_SIZE)
    WEFT_CL_CASE(CL_INVALID_SAMPLER)
    WEFT_CL_CASE(CL_INVALID_BINARY)
    WEFT_CL_CASE(CL_INVALID_BUILD_OPTIONS)
    WEFT_CL_CASE(CL_INVALID_PROGRAM)
    WEFT_CL_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
    WEFT_CL_CASE(CL_INVALID_KERNEL_NAME)
    WEFT_CL_CASE(CL_INVALID_KERNEL_DEFINITION)
    WEFT_CL_CASE(CL_INVALID_KERNEL)
    WEFT_CL_CASE(CL_INVALID_ARG_INDEX)
    WEFT_CL_CASE(CL_INVALID_ARG_VALUE)
    WEFT_CL_CASE(CL_INVALID_ARG_SIZE)
    WEFT_CL_CASE(CL_INVALID_KERNEL_ARGS)
    WEFT_CL_CASE(CL_INVALID_WORK_DIMENSION)
    WEFT_CL_CASE(CL_INVALID_WORK_GROUP_SIZE)
    WEFT_CL_CASE(CL_INVALID_WORK_ITEM_SIZE)
    WEFT_CL_CASE(CL_INVALID_GLOBAL_OFFSET)
    WEFT_CL_CASE(CL_INVALID_EVENT_WAIT_LIST)
    WEFT_CL_CASE(CL_INVALID_EVENT)
    WEFT_CL_CASE(CL_INVALID_OPERATION)
    WEFT_CL_CASE(CL_INVALID_GL_OBJECT)
    WEFT_CL_CASE(CL_INVALID_BUFFER_SIZE)
    WEFT_CL_CASE(CL_INVALID_MIP_LEVEL)
    WEFT_CL_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
    WEFT_CL_CASE(CL_INVALID_PROPERTY)
    WEFT_CL_CASE(CL_INVALID_IMAGE_DESCRIPTOR)
    WEFT_CL_CASE(CL_INVALID_COMPILER_OPTIONS)
    WEFT_CL_CASE(CL_INVALID_LINKER_OPTIONS)
    WEFT_CL_CASE(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef WEFT_CL_CASE
    // From cl_ext.h (cl_khr_icd), which the 1.2 core headers leave out:
    // what the ICD loader answers when no platform is installed.
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "unknown OpenCL error";
  }
}

std::string ClErrorText(cl_int code) { return std::string(ClErrorName(code)) + " (" + std::to_string(code) + ")"; }

weft_code_t ClErrorCode(cl_int code) {
  switch (code) {
    case CL_OUT_OF_HOST_MEMORY:
    case CL_OUT_OF_RESOURCES:
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return WEFT_RESOURCE_EXHAUSTED;
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_DEVICE_NOT_FOUND:
    case -1001: return WEFT_UNAVAILABLE;
    default: return WEFT_INTERNAL;
  }
}

void Check(cl_int code, const char* call, const std::string& where) {
  if (code == CL_SUCCESS) return;
  throw sdk::Error(ClErrorCode(code), std::string(call) + " on " + where + ": " + ClErrorText(code));
}

std::string PlatformString(cl_platform_id platform, cl_platform_info what) {
  size_t size = 0;
  Check(clGetPlatformInfo(platform, what, 0, nullptr, &size), "clGetPlatformInfo", "an OpenCL platform");
  std::string text(size, '\0');
  Check(clGetPlatformInfo(platform, what, size, text.data(), nullptr), "clGetPlatformInfo", "an OpenCL platform");
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

std::string DeviceString(cl_device_id device, cl_device_info what) {
  size_t size = 0;
  Check(clGetDeviceInfo(device, what, 0, nullptr, &size), "clGetDeviceInfo", "an OpenCL device");
  std::string text(size, '\0');
  Check(clGetDeviceInfo(device, what, size, text.data(), nullptr), "clGetDeviceInfo", "an OpenCL device");
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

}  // namespace weft::opencl
