// Plain stochastic gradient descent, as torch.optim.SGD without momentum:
// var -= lr * (grad + weight_decay * var). Its sparse form updates the
// gradient's rows only; without weight decay that is exactly the dense rule
// (the other rows' gradient is 0), with it the rows not read keep their
// values instead of decaying.
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {WeightDecayOption("0")};

class Sgd : public Rule {
 public:
  explicit Sgd(const weft_options_t* options) : weight_decay_(sdk::GetFloat(options, "weight_decay")) {}
  weft_value_t Build(Update& u) override {
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    if (u.g.HasKernel("ResourceApplyGradientDescent", "T", u.dtype())) {
      return u.g.Op("ResourceApplyGradientDescent", "apply", {u.var(), u.lr(), grad});
    }
    return u.Subtract(u.g.Mul(u.lr(), grad, "delta"));
  }
  weft_value_t BuildSparse(Update& u) {
    sdk::Graph& g = u.g;
    weft_value_t grad = u.args.gradient;
    if (weight_decay_ != 0) {
      grad = g.Add(grad, g.Mul(u.Scalar(weight_decay_), u.Rows(u.var(), "decay_rows"), "decay"), "decayed_grad");
    }
    return u.AddRows(u.var(), g.Mul(g.Op("Neg", "neg_lr", {u.lr()}), grad, "delta"), "apply");
  }

 private:
  double weight_decay_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("sgd", "Stochastic gradient descent (torch.optim.SGD without momentum)", weft::optimizers::Sgd,
                      weft::optimizers::kHyper)
