// In progress: the array kernel family (being written now).
#include "../kernel_framework.h"

namespace weft::cpu {

void RegisterArrayKernels(KernelRegistry&) {}

}  // namespace weft::cpu
