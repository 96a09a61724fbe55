// The shared unary kernels (../gpu/kernels/unary.h), built for HIP.
#include "gpu/kernels/unary.h"
