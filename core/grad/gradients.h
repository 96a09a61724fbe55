// Symbolic differentiation: adds to a graph being built the ops that
// compute the gradients of some tensors with respect to others.
//
//   GraphBuilder b;
//   WEFT_RETURN_IF_ERROR(b.Import(model));
//   WEFT_ASSIGN_OR_RETURN(Output loss, b.Resolve("loss"));
//   WEFT_ASSIGN_OR_RETURN(std::vector<Output> grads,
//                         grad::AddGradients(b, {loss}, {w, bias}));
//
// The backward graph is built from the gradient function registered for
// each op on a path from an x to a y (grad/*_grad.cc): the gradient
// arriving at an output used in several places is the sum of what each use
// sends back; a StopGradient, an op registered as not differentiable, and
// integer tensors stop the flow. A variable (a VarHandle's resource output)
// may be an x: what flows back through each ReadVariable and
// ResourceGather of it is summed into one dense gradient of the variable's
// shape.
#ifndef WEFT_CORE_GRAD_GRADIENTS_H_
#define WEFT_CORE_GRAD_GRADIENTS_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph/builder.h"

namespace weft::grad {

struct GradientOptions {
  // What an x that no y depends on gets: a tensor of zeros shaped like it
  // (for a variable: like its value), or an error naming it.
  enum class Unreachable { kZeros, kError };
  Unreachable unreachable = Unreachable::kZeros;
  // Prefix of the names of the added nodes.
  std::string scope = "gradients";
};

// Adds the gradient of sum_i sum(ys[i] * grad_ys[i]) with respect to each
// of |xs|, returning one tensor per x with its dtype and shape. |grad_ys|
// is empty (ones for every y) or one tensor per y, shaped like it. Errors
// name the op without a gradient function, or the unreachable x.
Expected<std::vector<Output>> AddGradients(GraphBuilder& b, const std::vector<Output>& ys,
                                           const std::vector<Output>& xs, const std::vector<Output>& grad_ys = {},
                                           const GradientOptions& options = {});

// What a gradient function sees: the forward node, its inputs and outputs,
// and the gradient arriving at each output.
class GradContext {
 public:
  GradContext(GraphBuilder& b, int node, std::vector<Output> grads);

  GraphBuilder& b() { return b_; }
  const NodeDef& node() const { return b_.node_def(node_); }
  const std::vector<Output>& inputs() const { return inputs_; }
  const std::vector<Output>& outputs() const { return outputs_; }
  Output input(int i) const { return inputs_[static_cast<std::size_t>(i)]; }
  Output output(int i) const { return outputs_[static_cast<std::size_t>(i)]; }
  // The gradient arriving at output |i|; an invalid Output when none does
  // (only possible for nodes with several outputs).
  Output grad(int i) const { return grads_[static_cast<std::size_t>(i)]; }
  // grad(i), or zeros shaped like output |i| when none arrives.
  Output grad_or_zeros(int i);

  // The node's attrs.
  const AttrValue& attr(std::string_view name) const;
  int64_t Int(std::string_view name) const { return attr(name).get<int64_t>(); }
  bool Bool(std::string_view name) const { return attr(name).get<bool>(); }
  double Float(std::string_view name) const { return attr(name).get<double>(); }
  const std::string& String(std::string_view name) const { return attr(name).get<std::string>(); }
  DType Type(std::string_view name) const { return attr(name).get<DType>(); }
  const std::vector<int64_t>& Ints(std::string_view name) const { return attr(name).get<std::vector<int64_t>>(); }

  // Shorthands for the gradient functions.
  Output Op(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs = {});
  std::vector<Output> Node(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs = {});
  // A scalar constant of |like|'s dtype.
  Output Scalar(double value, const Output& like);
  // The shape of |x| as an i64 vector: a constant when it is fully known.
  Output ShapeOf(const Output& x);
  // |dx| summed down to |x|'s shape, undoing NumPy broadcasting (nothing
  // is added when the shapes are known to be equal).
  Output ReduceLike(const Output& dx, const Output& x);

 private:
  GraphBuilder& b_;
  int node_;
  std::vector<Output> inputs_;
  std::vector<Output> outputs_;
  std::vector<Output> grads_;
};

// Sets |dx| (one entry per input, all invalid to begin with) to the
// gradients of the node's inputs; an input left invalid gets none.
using GradFn = std::function<Status(GradContext& ctx, std::vector<Output>& dx)>;

class GradRegistry {
 public:
  // The registry with every built-in gradient function (grad/*_grad.cc).
  static const GradRegistry& Global();

  void Register(std::string op, GradFn fn);
  // The op's outputs do not depend differentiably on its inputs (Shape,
  // ArgMax, comparisons, ...): no gradient flows through it.
  void NotDifferentiable(std::string op);

  // nullptr when the op has no function; *not_differentiable says whether
  // that is because it is declared not differentiable.
  const GradFn* Find(std::string_view op, bool* not_differentiable) const;
  // Every op with a gradient function, and every op declared not
  // differentiable.
  std::vector<std::string> Differentiable() const;
  std::vector<std::string> NotDifferentiableOps() const;

 private:
  std::map<std::string, GradFn, std::less<>> fns_;
  std::set<std::string, std::less<>> none_;
};

// The families of gradient functions, registered by Global().
void RegisterMathGradients(GradRegistry& r);         // math_grad.cc
void RegisterArrayGradients(GradRegistry& r);        // array_grad.cc
void RegisterNnGradients(GradRegistry& r);           // nn_grad.cc
void RegisterStateGradients(GradRegistry& r);        // state_grad.cc
void RegisterControlFlowGradients(GradRegistry& r);  // control_flow_grad.cc

}  // namespace weft::grad

#endif  // WEFT_CORE_GRAD_GRADIENTS_H_
