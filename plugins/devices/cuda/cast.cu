// The shared cast kernels (../gpu/kernels/cast.h), built for CUDA.
#include "gpu/kernels/cast.h"
