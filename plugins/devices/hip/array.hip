// The shared array kernels (../gpu/kernels/array.h), built for HIP.
#include "gpu/kernels/array.h"
