// Adam and AdamW share their moments and bias corrections; they differ in
// how weight decay enters (adam.cc: added to the gradient; adamw.cc:
// decoupled, var *= 1 - lr * weight_decay).
#ifndef WEFT_PLUGINS_OPTIMIZERS_ADAM_RULE_H_
#define WEFT_PLUGINS_OPTIMIZERS_ADAM_RULE_H_

#include "rule.h"

namespace weft::optimizers {

class AdamRule : public Rule {
 public:
  AdamRule(const weft_options_t* o, bool decoupled)
      : beta1_(sdk::GetFloat(o, "beta1")),
        beta2_(sdk::GetFloat(o, "beta2")),
        epsilon_(sdk::GetFloat(o, "epsilon")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")),
        decoupled_(decoupled),
        slots_{Slot("m", 0), Slot("v", 0)} {}
  const std::vector<weft_slot_def_t>& Slots() const override { return slots_; }

  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    const weft_update_args_t& a = u.args;
    weft_value_t grad = decoupled_ ? a.gradient : WithWeightDecay(u, weight_decay_);
    weft_value_t b1 = u.Scalar(beta1_), b2 = u.Scalar(beta2_), eps = u.Scalar(epsilon_);
    const char* fused = decoupled_ ? "ResourceApplyAdamW" : "ResourceApplyAdam";
    if (g.HasKernel(fused, "T", a.dtype)) {
      if (decoupled_) {
        return g.Op(fused, "apply",
                    {a.variable, u.slot(0), u.slot(1), a.learning_rate, b1, b2, eps, u.Scalar(weight_decay_), a.step,
                     grad});
      }
      return g.Op(fused, "apply", {a.variable, u.slot(0), u.slot(1), a.learning_rate, b1, b2, eps, a.step, grad});
    }
    // m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
    weft_value_t m = g.Add(g.Mul(b1, g.Read(u.slot(0), a.dtype, "m_read")), g.Mul(u.Scalar(1 - beta1_), grad), "m");
    weft_value_t v = g.Add(g.Mul(b2, g.Read(u.slot(1), a.dtype, "v_read")),
                           g.Mul(u.Scalar(1 - beta2_), g.Square(grad)), "v");
    weft_value_t saved_m = g.Assign(u.slot(0), m, a.dtype, "m_update");
    weft_value_t saved_v = g.Assign(u.slot(1), v, a.dtype, "v_update");
    // var -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
    weft_value_t t = g.Op("Cast", "t", {a.step}, {sdk::Attr::Type("DstT", a.dtype)});
    weft_value_t one = u.Scalar(1);
    weft_value_t bc1 = g.Sub(one, g.Op("Pow", "b1_power", {b1, t}), "bias_correction1");
    weft_value_t bc2 = g.Sub(one, g.Op("Pow", "b2_power", {b2, t}), "bias_correction2");
    weft_value_t denom = g.Add(g.Div(g.Sqrt(v), g.Sqrt(bc2)), eps, "denom");
    weft_value_t delta = g.Mul(g.Div(a.learning_rate, bc1, "step_size"), g.Div(m, denom), "delta");
    weft_value_t applied;
    if (decoupled_ && weight_decay_ != 0) {
      weft_value_t keep = g.Sub(one, g.Mul(a.learning_rate, u.Scalar(weight_decay_)), "decay_factor");
      weft_value_t decayed = g.Mul(g.Read(a.variable, a.dtype, "var_read"), keep, "decayed");
      applied = g.Assign(a.variable, g.Sub(decayed, delta, "updated"), a.dtype, "apply");
    } else {
      applied = g.Op("AssignSub", "apply", {a.variable, delta}, {sdk::Attr::Type("dtype", a.dtype)});
    }
    return g.Op("NoOp", "done", {}, {}, {saved_m, saved_v, applied});
  }

 private:
  double beta1_, beta2_, epsilon_, weight_decay_;
  bool decoupled_;
  std::vector<weft_slot_def_t> slots_;
};

}  // namespace weft::optimizers

#endif  // WEFT_PLUGINS_OPTIMIZERS_ADAM_RULE_H_
