#include "../kernel_framework.h"
namespace weft::opencl {
void RegisterConvKernels(KernelRegistry&) {}
}  // namespace weft::opencl
