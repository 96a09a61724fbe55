// SGD with momentum, optionally Nesterov's, as torch.optim.SGD with
// dampening 0: accum = momentum * accum + grad;
// var -= lr * (nesterov ? grad + momentum * accum : accum).
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("momentum", "0.9", "Factor of the running accumulation of gradients.", 0, 1),
    BoolOption("nesterov", "false", "Use Nesterov momentum (the gradient is looked up ahead)."),
    WeightDecayOption("0", "L2 penalty added to the gradient: grad + weight_decay * var."),
};

class Momentum : public Rule {
 public:
  explicit Momentum(const weft_options_t* o)
      : momentum_(sdk::GetFloat(o, "momentum")),
        nesterov_(sdk::GetBool(o, "nesterov")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")),
        slots_{Slot("momentum", 0)} {}
  const std::vector<weft_slot_def_t>& Slots() const override { return slots_; }
  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    const weft_update_args_t& a = u.args;
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    weft_value_t momentum = u.Scalar(momentum_);
    if (g.HasKernel("ResourceApplyMomentum", "T", a.dtype)) {
      return g.Op("ResourceApplyMomentum", "apply", {a.variable, u.slot(0), a.learning_rate, grad, momentum},
                  {sdk::Attr::Bool("use_nesterov", nesterov_)});
    }
    weft_value_t accum = g.Add(g.Mul(momentum, g.Read(u.slot(0), a.dtype, "accum_read")), grad, "accum");
    weft_value_t saved = g.Assign(u.slot(0), accum, a.dtype, "accum_update");
    weft_value_t step = nesterov_ ? g.Add(grad, g.Mul(momentum, accum), "nesterov") : accum;
    weft_value_t applied = g.Op("AssignSub", "apply", {a.variable, g.Mul(a.learning_rate, step, "delta")},
                                {sdk::Attr::Type("dtype", a.dtype)});
    return g.Op("NoOp", "done", {}, {}, {saved, applied});
  }

 private:
  double momentum_;
  bool nesterov_;
  double weight_decay_;
  std::vector<weft_slot_def_t> slots_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("momentum", "SGD with (Nesterov) momentum (torch.optim.SGD with momentum)",
                      weft::optimizers::Momentum, weft::optimizers::kHyper)
