#include "../kernel_framework.h"
namespace weft::opencl {
void RegisterReductionKernels(KernelRegistry&) {}
}  // namespace weft::opencl
