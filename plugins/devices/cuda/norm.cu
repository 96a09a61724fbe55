// The shared norm kernels (../gpu/kernels/norm.h), built for CUDA.
#include "gpu/kernels/norm.h"
