// OpenCL error codes as weft errors, and typed clGet*Info helpers.
//
//   Check(clFinish(queue), "clFinish", device.describe());
//   // throws sdk::Error(INTERNAL, "clFinish on pthread-... (/device:OPENCL:0):
//   //                   CL_OUT_OF_RESOURCES (-5)")
//
// Part of the opencl device plugin, which sees the Weft SDK only.
#ifndef WEFT_PLUGINS_DEVICES_OPENCL_CL_UTIL_H_
#define WEFT_PLUGINS_DEVICES_OPENCL_CL_UTIL_H_

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>
#include <vector>

#include "weft/sdk/status.h"

namespace weft::opencl {

// The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or
// "unknown OpenCL error" for a code the 1.2 headers do not define.
const char* ClErrorName(cl_int code);

// "CL_OUT_OF_RESOURCES (-5)".
std::string ClErrorText(cl_int code);

// The weft code an OpenCL error maps to: RESOURCE_EXHAUSTED for memory
// and resources, UNAVAILABLE for a device that went away, INTERNAL else.
weft_code_t ClErrorCode(cl_int code);

// Throws sdk::Error "<call> on <where>: <name> (<code>)" when |code| is not
// CL_SUCCESS. |where| names the device ("pthread-x (/device:OPENCL:0)").
void Check(cl_int code, const char* call, const std::string& where);

// Typed wrappers of clGetPlatformInfo / clGetDeviceInfo; they throw like
// Check.
std::string PlatformString(cl_platform_id platform, cl_platform_info what);
std::string DeviceString(cl_device_id device, cl_device_info what);
template <class T>
T DeviceValue(cl_device_id device, cl_device_info what) {
  T value{};
  Check(clGetDeviceInfo(device, what, sizeof value, &value, nullptr), "clGetDeviceInfo", "an OpenCL device");
  return value;
}

}  // namespace weft::opencl

#endif  // WEFT_PLUGINS_DEVICES_OPENCL_CL_UTIL_H_
