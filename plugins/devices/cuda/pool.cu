// The shared pool kernels (../gpu/kernels/pool.h), built for CUDA.
#include "gpu/kernels/pool.h"
