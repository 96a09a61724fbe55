#include "../kernel_framework.h"
namespace weft::opencl {
void RegisterTrainingKernels(KernelRegistry&) {}
}  // namespace weft::opencl
