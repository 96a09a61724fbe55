#include "../kernel_framework.h"
namespace weft::opencl {
void RegisterNnKernels(KernelRegistry&) {}
}  // namespace weft::opencl
