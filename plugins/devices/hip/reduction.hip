// The shared reduction kernels (../gpu/kernels/reduction.h), built for HIP.
#include "gpu/kernels/reduction.h"
