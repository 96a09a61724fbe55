// The built-in op families. OpRegistry::Global() registers them all, in
// this order, the first time it is used.
#ifndef WEFT_CORE_OPS_OPS_H_
#define WEFT_CORE_OPS_OPS_H_

#include "core/graph/op_def.h"

namespace weft::ops {

Status RegisterArrayOps(OpRegistry& registry);         // array_ops.cc
Status RegisterControlFlowOps(OpRegistry& registry);   // control_flow_ops.cc
Status RegisterDataFlowOps(OpRegistry& registry);      // data_flow_ops.cc
Status RegisterDetectionOps(OpRegistry& registry);     // detection_ops.cc
Status RegisterDynamicShapeOps(OpRegistry& registry);  // dynamic_shape_ops.cc
Status RegisterFusedOps(OpRegistry& registry);         // fused_ops.cc
Status RegisterGradSupportOps(OpRegistry& registry);   // grad_support_ops.cc
Status RegisterIndexingOps(OpRegistry& registry);      // indexing_ops.cc
Status RegisterIoOps(OpRegistry& registry);            // io_ops.cc
Status RegisterMathOps(OpRegistry& registry);          // math_ops.cc
Status RegisterNnOps(OpRegistry& registry);            // nn_ops.cc
Status RegisterNnGradOps(OpRegistry& registry);        // nn_grad_ops.cc
Status RegisterQuantizeOps(OpRegistry& registry);      // quantize_ops.cc
Status RegisterRandomOps(OpRegistry& registry);        // random_ops.cc
Status RegisterResizeOps(OpRegistry& registry);        // resize_ops.cc
Status RegisterSparseOps(OpRegistry& registry);        // sparse_ops.cc
Status RegisterStateOps(OpRegistry& registry);         // state_ops.cc
Status RegisterTrainingOps(OpRegistry& registry);      // training_ops.cc
Status RegisterUniqueOps(OpRegistry& registry);        // unique_ops.cc

// Registers every family into |registry|.
Status RegisterAllOps(OpRegistry& registry);

}  // namespace weft::ops

#endif  // WEFT_CORE_OPS_OPS_H_
