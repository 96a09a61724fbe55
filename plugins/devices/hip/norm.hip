// The shared norm kernels (../gpu/kernels/norm.h), built for HIP.
#include "gpu/kernels/norm.h"
