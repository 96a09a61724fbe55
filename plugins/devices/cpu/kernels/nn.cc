// In progress: the nn kernel family (being written now).
#include "../kernel_framework.h"

namespace weft::cpu {

void RegisterNnKernels(KernelRegistry&) {}

}  // namespace weft::cpu
