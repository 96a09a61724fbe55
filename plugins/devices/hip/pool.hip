// The shared pool kernels (../gpu/kernels/pool.h), built for HIP.
#include "gpu/kernels/pool.h"
