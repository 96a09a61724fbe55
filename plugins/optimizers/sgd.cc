// Plain stochastic gradient descent, as torch.optim.SGD without momentum:
// var -= lr * (grad + weight_decay * var).
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

 private:
  double weight_decay_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("sgd", "Stochastic gradient descent (torch.optim.SGD without momentum)",
                      weft::optimizers::Sgd, weft::optimizers::kHyper)
