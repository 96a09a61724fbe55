// SGD with momentum, optionally Nesterov's, as torch.optim.SGD with
// dampening 0: accum = momentum * accum + grad;
// var -= lr * (nesterov ? grad + momentum * accum : accum).
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("momentum", "0.9", "Factor of the running accumulation of gradients.", 0, 1),
    BoolOption("nesterov", "false", "Use Nesterov momentum (the gradient is looked up ahead)."),
    WeightDecayOption("0"),
};

class Momentum : public Rule {
 public:
  explicit Momentum(const weft_options_t* o)
      : Rule({Slot("momentum", 0)}),
        momentum_(sdk::GetFloat(o, "momentum")),
        nesterov_(sdk::GetBool(o, "nesterov")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")) {
    // As torch.optim.SGD: with momentum 0 the Nesterov step is plain SGD,
    // which asking for Nesterov cannot have meant.
    Require(!nesterov_ || momentum_ > 0, "nesterov = true needs momentum > 0");
  }
  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    weft_value_t momentum = u.Scalar(momentum_);
    if (g.HasKernel("ResourceApplyMomentum", "T", u.dtype())) {
      return g.Op("ResourceApplyMomentum", "apply", {u.var(), u.slot(0), u.lr(), grad, momentum},
                  {sdk::Attr::Bool("use_nesterov", nesterov_)});
    }
    weft_value_t accum = g.Add(g.Mul(momentum, u.ReadSlot(0, "accum_read")), grad, "accum");
    weft_value_t saved = u.SaveSlot(0, accum, "accum_update");
    weft_value_t step = nesterov_ ? g.Add(grad, g.Mul(momentum, accum), "nesterov") : accum;
    return u.Group({saved, u.Subtract(g.Mul(u.lr(), step, "delta"))});
  }

 private:
  double momentum_;
  bool nesterov_;
  double weight_decay_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("momentum", "SGD with (Nesterov) momentum (torch.optim.SGD with momentum)",
                      weft::optimizers::Momentum, weft::optimizers::kHyper)
