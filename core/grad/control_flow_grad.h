// Gradients through dynamic control flow (docs/architecture.md, "Control flow"), used by
// AddGradients (gradients.cc):
//
// - A cond's Switch and Merge have ordinary gradient functions: the
//   gradient of a Merge goes back, through a Switch on the Merge's
//   value_index, to the input that was taken; the gradient of a Switch is
//   the Merge of what came back through its two outputs. Dead values do
//   the rest: nothing runs in the branch that was not taken.
// - A while loop is differentiated as a whole. The forward loop gains an
//   iteration counter and, for every loop variable its body reads, a
//   StackPush of the variable's value at the start of each iteration,
//   under the iteration's index. The backward loop runs the iterations in
//   reverse: it pops those values, recomputes the body's intermediate
//   values from them (a copy of the body), and differentiates that copy
//   with AddGradients, carrying the gradient of each loop variable to the
//   previous iteration and summing the gradients of the loop invariants.
//   Loops nested in the body are copied with it and differentiated the
//   same way inside the backward loop.
//
// Saving only the loop variables and recomputing the rest costs one more
// run of the body per iteration and keeps per-iteration memory to the
// loop state; every gradient function works unchanged inside loops.
#ifndef WEFT_CORE_GRAD_CONTROL_FLOW_GRAD_H_
#define WEFT_CORE_GRAD_CONTROL_FLOW_GRAD_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/builder.h"

namespace weft::grad::internal {

// The static frames of the graph being built: frame 0 is the top level;
// every loop (a frame_name under a parent frame) is one more.
struct Frames {
  struct Frame {
    int parent = -1;
    std::string name;  // the Enter nodes' frame_name ("" for the top level)
  };
  std::vector<Frame> frames;
  std::vector<int> frame_of;  // per node: the frame it runs in (an Exit: the parent's)

  // True when frame |f| is |ancestor| or nested in it.
  bool Within(int f, int ancestor) const;
  // The child of |ancestor| that holds frame |f| (nested in it), or -1.
  int ChildOf(int f, int ancestor) const;
};

Frames AnalyzeFrames(const GraphBuilder& b);

// The nodes whose output |node| waits for without a data edge (its "^name"
// inputs).
std::vector<int> ControlInputs(const GraphBuilder& b, int node);

// True for the data input |index| of node |node| that closes a loop (a
// NextIteration into a Merge).
bool IsBackEdge(const GraphBuilder& b, int node, const Output& input);

// Builds the gradient of the while loop of frame |frame| whose nodes
// (every node in it or nested in it, and its Exit nodes) are |nodes|.
// |exit_grad| gives the gradient arriving at an Exit (an invalid Output
// when none does); |wants| says whether an input of the loop (what one of
// its Enter nodes reads) should receive a gradient. Returns the
// (input, gradient) pairs to hand on.
Expected<std::vector<std::pair<Output, Output>>> LoopGradient(GraphBuilder& b, const Frames& frames, int frame,
                                                              const std::vector<int>& nodes,
                                                              const std::function<Output(const Output&)>& exit_grad,
                                                              const std::function<bool(const Output&)>& wants);

}  // namespace weft::grad::internal

#endif  // WEFT_CORE_GRAD_CONTROL_FLOW_GRAD_H_
