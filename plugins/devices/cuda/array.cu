// The shared array kernels (../gpu/kernels/array.h), built for CUDA.
#include "gpu/kernels/array.h"
