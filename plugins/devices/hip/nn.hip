// The shared nn kernels (../gpu/kernels/nn.h), built for HIP.
#include "gpu/kernels/nn.h"
