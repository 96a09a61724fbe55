// The shared training kernels (../gpu/kernels/training.h), built for CUDA.
#include "gpu/kernels/training.h"
