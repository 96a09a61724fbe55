#include "../kernel_framework.h"
namespace weft::opencl {
void RegisterMatMulKernels(KernelRegistry&) {}
}  // namespace weft::opencl
