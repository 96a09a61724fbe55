// Adagrad (Duchi et al., 2011), as torch.optim.Adagrad: accum += g^2;
// var -= lr_t * g / (sqrt(accum) + eps), lr_t = lr / (1 + (t - 1) lr_decay).
// Its sparse form updates the gradient's rows of var and accum only: without
// weight decay exactly the dense rule (a zero gradient changes neither).
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("lr_decay", "0", "The rate is lr / (1 + (step - 1) * lr_decay).", 0, 1e6),
    FloatOption("initial_accumulator_value", "0", "Where the sum of squared gradients starts.", 0, 1e6),
    EpsilonOption("1e-10"),
    WeightDecayOption("0"),
};

class Adagrad : public Rule {
 public:
  explicit Adagrad(const weft_options_t* o)
      : Rule({Slot("accumulator", sdk::GetFloat(o, "initial_accumulator_value"))}),
        lr_decay_(sdk::GetFloat(o, "lr_decay")),
        epsilon_(sdk::GetFloat(o, "epsilon")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")) {}
  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    weft_value_t lr = u.lr();
    if (lr_decay_ != 0) {
      weft_value_t decay = g.Add(u.Scalar(1), g.Mul(g.Sub(u.StepAsFloat(), u.Scalar(1)), u.Scalar(lr_decay_)), "decay");
      lr = g.Div(lr, decay, "decayed_lr");
    }
    weft_value_t eps = u.Scalar(epsilon_);
    if (g.HasKernel("ResourceApplyAdagrad", "T", u.dtype())) {
      return g.Op("ResourceApplyAdagrad", "apply", {u.var(), u.slot(0), lr, eps, grad});
    }
    weft_value_t accum = g.Add(u.ReadSlot(0, "accum_read"), g.Square(grad), "accum");
    weft_value_t saved = u.SaveSlot(0, accum, "accum_update");
    weft_value_t delta = g.Mul(lr, g.Div(grad, g.Add(g.Sqrt(accum), eps, "std")), "delta");
    return u.Group({saved, u.Subtract(delta)});
  }
  weft_value_t BuildSparse(Update& u) {
    sdk::Graph& g = u.g;
    weft_value_t grad = u.args.gradient;
    if (weight_decay_ != 0) {
      grad = g.Add(grad, g.Mul(u.Scalar(weight_decay_), u.Rows(u.var(), "decay_rows"), "decay"), "decayed_grad");
    }
    weft_value_t lr = u.lr();
    if (lr_decay_ != 0) {
      weft_value_t decay = g.Add(u.Scalar(1), g.Mul(g.Sub(u.StepAsFloat(), u.Scalar(1)), u.Scalar(lr_decay_)), "decay");
      lr = g.Div(lr, decay, "decayed_lr");
    }
    weft_value_t squared = g.Square(grad);
    weft_value_t accum = g.Add(u.Rows(u.slot(0), "accum_rows"), squared, "accum");
    // Written after the rows above are read.
    weft_value_t saved = g.Op("ResourceScatterAdd", "accum_update", {u.slot(0), u.args.indices, squared},
                              {sdk::Attr::Type("dtype", u.dtype())}, {accum});
    weft_value_t delta =
        g.Mul(g.Op("Neg", "neg_lr", {lr}), g.Div(grad, g.Add(g.Sqrt(accum), u.Scalar(epsilon_), "std")), "delta");
    return u.Group({saved, u.AddRows(u.var(), delta, "apply")});
  }

 private:
  double lr_decay_, epsilon_, weight_decay_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("adagrad", "Adagrad (torch.optim.Adagrad)", weft::optimizers::Adagrad, weft::optimizers::kHyper)
