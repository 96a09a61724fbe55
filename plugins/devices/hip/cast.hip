// The shared cast kernels (../gpu/kernels/cast.h), built for HIP.
#include "gpu/kernels/cast.h"
