// The shared binary kernels (../gpu/kernels/binary.h), built for HIP.
#include "gpu/kernels/binary.h"
