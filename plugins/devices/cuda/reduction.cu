// The shared reduction kernels (../gpu/kernels/reduction.h), built for CUDA.
#include "gpu/kernels/reduction.h"
