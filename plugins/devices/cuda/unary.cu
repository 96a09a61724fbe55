// The shared unary kernels (../gpu/kernels/unary.h), built for CUDA.
#include "gpu/kernels/unary.h"
