// Which ops are the control-flow primitives of control_flow_ops.cc. The
// executor, the runtime's kernels and the session each ask.
#ifndef WEFT_CORE_OPS_CONTROL_FLOW_OPS_H_
#define WEFT_CORE_OPS_CONTROL_FLOW_OPS_H_

#include <string_view>

namespace weft::ops {

// Whether |op| is Switch, Merge, Enter, Exit, NextIteration or LoopCond: a
// graph with one of them needs the executor's frames (docs/architecture.md, "Control flow").
inline bool IsControlFlowOp(std::string_view op) {
  return op == "Switch" || op == "Merge" || op == "Enter" || op == "Exit" || op == "NextIteration" || op == "LoopCond";
}

}  // namespace weft::ops

#endif  // WEFT_CORE_OPS_CONTROL_FLOW_OPS_H_
