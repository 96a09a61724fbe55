// The shared device kernels (gpu_common/device_kernels.inc), compiled by
// hipcc for the hip plugin.
#include <hip/hip_runtime.h>

#include <cmath>
#include <cstdint>

#include "gpu_launch.h"

#include "device_kernels.inc"
