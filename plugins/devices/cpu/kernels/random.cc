// In progress: the random kernel family (being written now).
#include "../kernel_framework.h"

namespace weft::cpu {

void RegisterRandomKernels(KernelRegistry&) {}

}  // namespace weft::cpu
