// Adagrad (Duchi et al., 2011), as torch.optim.Adagrad: accum += g^2;
// var -= lr_t * g / (sqrt(accum) + eps), lr_t = lr / (1 + (t - 1) lr_decay).
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("lr_decay", "0", "The rate is lr / (1 + (step - 1) * lr_decay).", 0, 1e6),
    FloatOption("initial_accumulator_value", "0", "Where the sum of squared gradients starts.", 0, 1e6),
    FloatOption("epsilon", "1e-10", "Added to the denominator for numerical stability.", 0, 1),
    WeightDecayOption("0", "L2 penalty added to the gradient: grad + weight_decay * var."),
};

class Adagrad : public Rule {
 public:
  explicit Adagrad(const weft_options_t* o)
      : lr_decay_(sdk::GetFloat(o, "lr_decay")),
        epsilon_(sdk::GetFloat(o, "epsilon")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")),
        slots_{Slot("accumulator", sdk::GetFloat(o, "initial_accumulator_value"))} {}
  const std::vector<weft_slot_def_t>& Slots() const override { return slots_; }
  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    const weft_update_args_t& a = u.args;
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    weft_value_t lr = a.learning_rate;
    if (lr_decay_ != 0) {
      weft_value_t t = g.Op("Cast", "t", {a.step}, {sdk::Attr::Type("DstT", a.dtype)});
      weft_value_t decay = g.Add(u.Scalar(1), g.Mul(g.Sub(t, u.Scalar(1)), u.Scalar(lr_decay_)), "decay");
      lr = g.Div(lr, decay, "decayed_lr");
    }
    weft_value_t eps = u.Scalar(epsilon_);
    if (g.HasKernel("ResourceApplyAdagrad", "T", a.dtype)) {
      return g.Op("ResourceApplyAdagrad", "apply", {a.variable, u.slot(0), lr, eps, grad});
    }
    weft_value_t accum = g.Add(g.Read(u.slot(0), a.dtype, "accum_read"), g.Square(grad), "accum");
    weft_value_t saved = g.Assign(u.slot(0), accum, a.dtype, "accum_update");
    weft_value_t delta = g.Mul(lr, g.Div(grad, g.Add(g.Sqrt(accum), eps, "std")), "delta");
    weft_value_t applied = g.Op("AssignSub", "apply", {a.variable, delta}, {sdk::Attr::Type("dtype", a.dtype)});
    return g.Op("NoOp", "done", {}, {}, {saved, applied});
  }

 private:
  double lr_decay_, epsilon_, weight_decay_;
  std::vector<weft_slot_def_t> slots_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("adagrad", "Adagrad (torch.optim.Adagrad)", weft::optimizers::Adagrad, weft::optimizers::kHyper)
