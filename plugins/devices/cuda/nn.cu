// The shared nn kernels (../gpu/kernels/nn.h), built for CUDA.
#include "gpu/kernels/nn.h"
