// The shared binary kernels (../gpu/kernels/binary.h), built for CUDA.
#include "gpu/kernels/binary.h"
