// The control-flow primitives (docs/architecture.md, "Control flow"): with them, conditionals and
// loops live inside the dataflow graph (the builders of
// core/graph/control_flow.h emit them; the executor gives them meaning).
//
// A tensor may be "dead": the untaken output of a Switch is, and so is
// every output of a node with a dead input, except a Merge, which forwards
// whichever input is alive. A loop is a frame: Enter moves a value into a
// child frame (iteration 0), NextIteration carries a value to the next
// iteration of its frame (the only edges allowed to close a cycle), and
// Exit hands the value of the last iteration back to the parent frame.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

Status SwitchShape(InferenceContext& c) {
  if (!c.input_shape(1).IsCompatibleWith(Shape{})) {
    return InvalidArgumentError("pred must be a scalar bool, has shape ", c.input_shape(1).ToString());
  }
  c.set_output(0, c.input_shape(0));
  c.set_output(1, c.input_shape(0));
  return Status();
}

// The most specific shape every input fits: equal dimensions stay, others
// become unknown, and different ranks give an unknown rank. (A loop's
// Merge sees only its Enter input here: the NextIteration input closes a
// cycle and is checked against this shape when the graph is validated.)
Status MergeShape(InferenceContext& c) {
  Shape out = c.input_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (out.unknown_rank() || s.unknown_rank() || s.rank() != out.rank()) {
      out = Shape::UnknownRank();
      break;
    }
    std::vector<int64_t> dims = out.dims();
    for (std::size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] != s.dims()[d]) dims[d] = -1;
    }
    out = Shape(dims);
  }
  c.set_output(0, out);
  c.set_output(1, Shape{});
  return Status();
}

Status EnterShape(InferenceContext& c) {
  if (c.String("frame_name").empty()) return InvalidArgumentError("frame_name is empty");
  const auto& invariant = c.Get("shape_invariant").get<std::vector<Shape>>();
  if (invariant.size() > 1) {
    return InvalidArgumentError("shape_invariant holds ", invariant.size(), " shapes; give at most one");
  }
  if (invariant.empty()) {
    c.set_output(0, c.input_shape(0));
    return Status();
  }
  if (!invariant[0].IsCompatibleWith(c.input_shape(0))) {
    return InvalidArgumentError("the loop variable enters with shape ", c.input_shape(0).ToString(),
                                ", which does not fit its shape invariant ", invariant[0].ToString());
  }
  c.set_output(0, invariant[0]);
  return Status();
}

Status LoopCondShape(InferenceContext& c) {
  if (!c.input_shape(0).IsCompatibleWith(Shape{})) {
    return InvalidArgumentError("the loop condition must be a scalar bool, has shape ", c.input_shape(0).ToString());
  }
  c.set_output(0, Shape{});
  return Status();
}

}  // namespace

Status RegisterControlFlowOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("Switch")
                     .Input("data: T")
                     .Input("pred: bool")
                     .Output("output_false: T")
                     .Output("output_true: T")
                     .Attr("T: {all, resource}")
                     .Shape(SwitchShape)
                     .Doc("Forwards 'data' to output_true when 'pred' is true and to output_false otherwise; the other "
                          "output is dead, and so is everything computed from it until a Merge.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("Merge")
                     .Input("inputs: N * T")
                     .Output("output: T")
                     .Output("value_index: i32")
                     .Attr("T: {all, resource}")
                     .Attr("N: int >= 1")
                     .Shape(MergeShape)
                     .Doc("Forwards the first of its inputs that is alive, and its index; dead when all of them are. "
                          "In a loop it joins the value entering the loop with the one from the previous iteration.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Enter")
          .Input("data: T")
          .Output("output: T")
          .Attr("T: {all, resource}")
          .Attr("frame_name: string")
          .Attr("is_constant: bool = false")
          .Attr("parallel_iterations: int = 10")
          .Attr("shape_invariant: list(shape) = []")
          .Shape(EnterShape)
          .Doc("Makes 'data' available in the child frame 'frame_name' (a loop), in its first iteration; with "
               "is_constant, in every iteration (a loop invariant). Up to parallel_iterations iterations of "
               "the frame run at once. shape_invariant, when given, is the shape every iteration's value must "
               "fit (unknown dimensions may change).")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Exit")
                                      .Input("data: T")
                                      .Output("output: T")
                                      .Attr("T: {all, resource}")
                                      .Shape(UnchangedShape)
                                      .Doc("Hands the value of the loop's last iteration to the parent frame.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("NextIteration")
                                      .Input("data: T")
                                      .Output("output: T")
                                      .Attr("T: {all, resource}")
                                      .Shape(UnchangedShape)
                                      .Doc("Carries 'data' to the next iteration of its frame (into a Merge); the "
                                           "only edge that may close a cycle.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("LoopCond")
                                      .Input("input: bool")
                                      .Output("output: bool")
                                      .Shape(LoopCondShape)
                                      .Doc("The loop's condition, feeding the Switch of every loop variable: the "
                                           "loop goes on while it is true.")));
  return Status();
}

}  // namespace weft::ops
