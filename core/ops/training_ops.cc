// Training ops: fused optimizer updates ("apply" ops). Each updates a
// variable and its slot variables in place, from a gradient and scalar
// hyper-parameters, with the update rule of the torch.optim optimizer of the
// same name. They are stateful and have no outputs: a training step runs
// them as targets.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// Every resource input and the input named "grad" must have one shape; every
// other input must be a scalar.
Status ApplyShape(InferenceContext& c) {
  const OpDef& op = c.op();
  Shape merged = Shape::UnknownRank();
  std::string merged_from;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const ArgDef& arg = op.inputs[static_cast<std::size_t>(i)];
    if (arg.fixed_type == DType::kResource || arg.name == "grad") {
      const Shape& shape = arg.fixed_type == DType::kResource ? c.input_handle_shape(i) : c.input_shape(i);
      auto next = merged.Merge(shape);
      if (!next.ok()) {
        return c.Error("'", arg.name, "' has shape ", shape.ToString(), " but '", merged_from, "' has shape ",
                       merged.ToString(), "; the variable, its slots and the gradient must have one shape");
      }
      if (merged_from.empty() && !shape.unknown_rank()) merged_from = arg.name;
      merged = *std::move(next);
    } else if (c.input_shape(i).rank() > 0) {
      return c.Error("'", arg.name, "' must be a scalar, got shape ", c.input_shape(i).ToString());
    }
  }
  return Status();
}

constexpr const char* kTypes = "T: {f32, f64}";

}  // namespace

Status RegisterTrainingOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("ResourceApplyGradientDescent")
                     .Input("var: resource")
                     .Input("lr: T")
                     .Input("grad: T")
                     .Attr(kTypes)
                     .Stateful()
                     .Shape(ApplyShape)
                     .Doc("Plain gradient descent (torch.optim.SGD without momentum): var = var - lr * grad, in place. "
                          "'var' is a variable of dtype T initialised to grad's shape; 'lr' is a scalar.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceApplyMomentum")
          .Input("var: resource")
          .Input("accum: resource")
          .Input("lr: T")
          .Input("grad: T")
          .Input("momentum: T")
          .Attr(kTypes)
          .Attr("use_nesterov: bool = false")
          .Stateful()
          .Shape(ApplyShape)
          .Doc("Gradient descent with momentum (torch.optim.SGD with momentum, dampening 0): accum = momentum * "
               "accum + grad; then var = var - lr * accum, or with use_nesterov var = var - lr * (grad + momentum "
               "* accum). 'accum' starts at zero (PyTorch's first step copies grad into its buffer, which is the "
               "same). Both variables are updated in place.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceApplyAdam")
          .Input("var: resource")
          .Input("m: resource")
          .Input("v: resource")
          .Input("lr: T")
          .Input("beta1: T")
          .Input("beta2: T")
          .Input("epsilon: T")
          .Input("step: i64")
          .Input("grad: T")
          .Attr(kTypes)
          .Stateful()
          .Shape(ApplyShape)
          .Doc("Adam (torch.optim.Adam, amsgrad off): m = beta1 * m + (1 - beta1) * grad; v = beta2 * v + (1 - "
               "beta2) * grad * grad; with bc1 = 1 - beta1^step and bc2 = 1 - beta2^step, var = var - (lr / bc1) "
               "* m / (sqrt(v) / sqrt(bc2) + epsilon). 'step' counts updates from 1 (a step below 1 is an error); "
               "'m' and 'v' start at zero. As in PyTorch, the scalar factors lr / bc1 and sqrt(bc2) are computed "
               "in f64 and rounded to T; the element-wise arithmetic is done in T.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceApplyAdamW")
          .Input("var: resource")
          .Input("m: resource")
          .Input("v: resource")
          .Input("lr: T")
          .Input("beta1: T")
          .Input("beta2: T")
          .Input("epsilon: T")
          .Input("weight_decay: T")
          .Input("step: i64")
          .Input("grad: T")
          .Attr(kTypes)
          .Stateful()
          .Shape(ApplyShape)
          .Doc("Adam with decoupled weight decay (torch.optim.AdamW, amsgrad off): first var = var * (1 - lr * "
               "weight_decay) (the factor computed in f64 and rounded to T), then exactly the update of "
               "ResourceApplyAdam: m = beta1 * m + (1 - beta1) * grad; v = beta2 * v + (1 - beta2) * grad * grad; "
               "var = var - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + epsilon) with bc1 = 1 - beta1^step and bc2 = "
               "1 - beta2^step. 'step' counts updates from 1.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceApplyRMSProp")
          .Input("var: resource")
          .Input("ms: resource")
          .Input("mom: resource")
          .Input("lr: T")
          .Input("rho: T")
          .Input("momentum: T")
          .Input("epsilon: T")
          .Input("grad: T")
          .Attr(kTypes)
          .Stateful()
          .Shape(ApplyShape)
          .Doc("RMSprop (torch.optim.RMSprop with alpha = rho, not centered): ms = rho * ms + (1 - rho) * grad * "
               "grad; mom = momentum * mom + grad / (sqrt(ms) + epsilon); var = var - lr * mom. 'ms' and 'mom' "
               "start at zero; with momentum 0 this is PyTorch's update without a momentum buffer.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceApplyCenteredRMSProp")
          .Input("var: resource")
          .Input("mg: resource")
          .Input("ms: resource")
          .Input("mom: resource")
          .Input("lr: T")
          .Input("rho: T")
          .Input("momentum: T")
          .Input("epsilon: T")
          .Input("grad: T")
          .Attr(kTypes)
          .Stateful()
          .Shape(ApplyShape)
          .Doc("Centered RMSprop (torch.optim.RMSprop with alpha = rho, centered=True): mg = rho * mg + (1 - rho) "
               "* grad; ms = rho * ms + (1 - rho) * grad * grad; mom = momentum * mom + grad / (sqrt(ms - mg * mg) "
               "+ epsilon); var = var - lr * mom. 'mg', 'ms' and 'mom' start at zero.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ResourceApplyAdagrad")
          .Input("var: resource")
          .Input("accum: resource")
          .Input("lr: T")
          .Input("epsilon: T")
          .Input("grad: T")
          .Attr(kTypes)
          .Stateful()
          .Shape(ApplyShape)
          .Doc("Adagrad (torch.optim.Adagrad): accum = accum + grad * grad; var = var - lr * grad / (sqrt(accum) "
               "+ epsilon). 'accum' starts at PyTorch's initial_accumulator_value (usually zero); a learning-rate "
               "decay is the caller's, applied to 'lr'.")));
  return Status();
}

}  // namespace weft::ops
