// The tiled MatMul (../gpu/kernels/matmul_tiled.h), built for HIP.
#include "gpu/kernels/matmul_tiled.h"
