#include <cstdio>
#include <cstdlib>

#include "core/ops/ops.h"

namespace weft {

namespace ops {
Status RegisterAllOps(OpRegistry& registry) {
  WEFT_RETURN_IF_ERROR(RegisterArrayOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterIndexingOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterMathOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterNnOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterNnGradOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterRandomOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterStateOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterTrainingOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterGradSupportOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterIoOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterDataFlowOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterSparseOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterControlFlowOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterFusedOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterQuantizeOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterDynamicShapeOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterResizeOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterDetectionOps(registry));
  WEFT_RETURN_IF_ERROR(RegisterUniqueOps(registry));
  return Status();
}
}  // namespace ops

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    Status status = ops::RegisterAllOps(*r);
    if (!status.ok()) {
      // A malformed built-in op definition is a bug in Weft; tests catch it.
      std::fprintf(stderr, "weft: internal error: %s\n", status.ToString().c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

}  // namespace weft
