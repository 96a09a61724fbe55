// Adam and AdamW share their hyper-parameters, moments and bias
// corrections; they differ in how weight decay enters (adam.cc: added to
// the gradient; adamw.cc: decoupled, var *= 1 - lr * weight_decay).
#ifndef WEFT_PLUGINS_OPTIMIZERS_ADAM_RULE_H_
#define WEFT_PLUGINS_OPTIMIZERS_ADAM_RULE_H_

#include <array>

#include "rule.h"

namespace weft::optimizers {

// beta1, beta2, epsilon and weight_decay, the last with |weight_decay_default|
// and |weight_decay_doc|.
inline std::array<weft_option_def_t, 4> AdamHyperparameters(const char* weight_decay_default,
                                                            const char* weight_decay_doc) {
  return {FloatOption("beta1", "0.9", "Decay of the running mean of gradients; below 1.", 0, 1),
          FloatOption("beta2", "0.999", "Decay of the running mean of squared gradients; below 1.", 0, 1),
          EpsilonOption("1e-8"), WeightDecayOption(weight_decay_default, weight_decay_doc)};
}

class AdamRule : public Rule {
 public:
  AdamRule(const weft_options_t* o, bool decoupled)
      : Rule({Slot("m", 0), Slot("v", 0)}),
        beta1_(sdk::GetFloat(o, "beta1")),
        beta2_(sdk::GetFloat(o, "beta2")),
        epsilon_(sdk::GetFloat(o, "epsilon")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")),
        decoupled_(decoupled) {
    // The declared ranges are inclusive; at 1 the bias correction
    // 1 - beta^step is 0 and every step divides by it (torch refuses it too).
    Require(beta1_ < 1, "beta1 must be below 1 (1 - beta1^step would be 0), got " + Number(beta1_));
    Require(beta2_ < 1, "beta2 must be below 1 (1 - beta2^step would be 0), got " + Number(beta2_));
  }

  // The lazy rule of torch.optim.SparseAdam: the moments and the variable
  // change in the gradient's rows only, with the bias corrections of the
  // global step. Rows not read this step keep their moments (the dense rule
  // would decay them). Weight decay has no sparse form here (nor in torch):
  // with it, the host's dense fallback runs.
  weft_value_t BuildSparse(Update& u) {
    if (weight_decay_ != 0) return nullptr;
    sdk::Graph& g = u.g;
    weft_value_t grad = u.args.gradient;
    weft_value_t old_m = u.Rows(u.slot(0), "m_rows");
    weft_value_t old_v = u.Rows(u.slot(1), "v_rows");
    // m += (1 - b1)(g - m); v += (1 - b2)(g^2 - v), on the rows.
    weft_value_t dm = g.Mul(u.Scalar(1 - beta1_), g.Sub(grad, old_m), "m_delta");
    weft_value_t dv = g.Mul(u.Scalar(1 - beta2_), g.Sub(g.Square(grad), old_v), "v_delta");
    weft_value_t m = g.Add(old_m, dm, "m");
    weft_value_t v = g.Add(old_v, dv, "v");
    weft_value_t saved_m = u.AddRows(u.slot(0), dm, "m_update");
    weft_value_t saved_v = u.AddRows(u.slot(1), dv, "v_update");
    // var -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
    weft_value_t t = u.StepAsFloat();
    weft_value_t one = u.Scalar(1);
    weft_value_t bc1 = g.Sub(one, g.Op("Pow", "b1_power", {u.Scalar(beta1_), t}), "bias_correction1");
    weft_value_t bc2 = g.Sub(one, g.Op("Pow", "b2_power", {u.Scalar(beta2_), t}), "bias_correction2");
    weft_value_t step_size = g.Div(g.Mul(u.lr(), g.Sqrt(bc2)), bc1, "step_size");
    weft_value_t delta = g.Mul(g.Op("Neg", "neg_step_size", {step_size}),
                               g.Div(m, g.Add(g.Sqrt(v), u.Scalar(epsilon_), "denom")), "delta");
    weft_value_t apply = g.Op("ResourceScatterAdd", "apply", {u.var(), u.args.indices, delta},
                              {sdk::Attr::Type("dtype", u.dtype())}, {saved_m, saved_v});
    return u.Group({saved_m, saved_v, apply});
  }

  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    weft_value_t grad = decoupled_ ? u.args.gradient : WithWeightDecay(u, weight_decay_);
    weft_value_t b1 = u.Scalar(beta1_), b2 = u.Scalar(beta2_), eps = u.Scalar(epsilon_);
    if (decoupled_ && g.HasKernel("ResourceApplyAdamW", "T", u.dtype())) {
      return g.Op("ResourceApplyAdamW", "apply",
                  {u.var(), u.slot(0), u.slot(1), u.lr(), b1, b2, eps, u.Scalar(weight_decay_), u.args.step, grad});
    }
    if (!decoupled_ && g.HasKernel("ResourceApplyAdam", "T", u.dtype())) {
      return g.Op("ResourceApplyAdam", "apply",
                  {u.var(), u.slot(0), u.slot(1), u.lr(), b1, b2, eps, u.args.step, grad});
    }
    // m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2
    weft_value_t m = g.Add(g.Mul(b1, u.ReadSlot(0, "m_read")), g.Mul(u.Scalar(1 - beta1_), grad), "m");
    weft_value_t v = g.Add(g.Mul(b2, u.ReadSlot(1, "v_read")), g.Mul(u.Scalar(1 - beta2_), g.Square(grad)), "v");
    weft_value_t saved_m = u.SaveSlot(0, m, "m_update");
    weft_value_t saved_v = u.SaveSlot(1, v, "v_update");
    // var -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
    weft_value_t t = u.StepAsFloat();
    weft_value_t one = u.Scalar(1);
    weft_value_t bc1 = g.Sub(one, g.Op("Pow", "b1_power", {b1, t}), "bias_correction1");
    weft_value_t bc2 = g.Sub(one, g.Op("Pow", "b2_power", {b2, t}), "bias_correction2");
    weft_value_t denom = g.Add(g.Div(g.Sqrt(v), g.Sqrt(bc2)), eps, "denom");
    weft_value_t delta = g.Mul(g.Div(u.lr(), bc1, "step_size"), g.Div(m, denom), "delta");
    if (!decoupled_ || weight_decay_ == 0) return u.Group({saved_m, saved_v, u.Subtract(delta)});
    // var = var * (1 - lr * weight_decay) - delta, one write of var.
    weft_value_t keep = g.Sub(one, g.Mul(u.lr(), u.Scalar(weight_decay_)), "decay_factor");
    weft_value_t decayed = g.Mul(g.Read(u.var(), u.dtype(), "var_read"), keep, "decayed");
    return u.Group({saved_m, saved_v, g.Assign(u.var(), g.Sub(decayed, delta, "updated"), u.dtype(), "apply")});
  }

 private:
  double beta1_, beta2_, epsilon_, weight_decay_;
  bool decoupled_;
};

}  // namespace weft::optimizers

#endif  // WEFT_PLUGINS_OPTIMIZERS_ADAM_RULE_H_
