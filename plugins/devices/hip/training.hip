// The shared training kernels (../gpu/kernels/training.h), built for HIP.
#include "gpu/kernels/training.h"
