// The shared device kernels (gpu_common/device_kernels.inc), compiled by
// nvcc for the cuda plugin.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "gpu_launch.h"

#include "device_kernels.inc"
