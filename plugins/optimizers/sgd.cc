// Plain stochastic gradient descent, as torch.optim.SGD without momentum:
// var -= lr * (grad + weight_decay * var).
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    WeightDecayOption("0", "L2 penalty added to the gradient: grad + weight_decay * var."),
};

class Sgd : public Rule {
 public:
  explicit Sgd(const weft_options_t* options) : weight_decay_(sdk::GetFloat(options, "weight_decay")) {}
  const std::vector<weft_slot_def_t>& Slots() const override { return slots_; }
  weft_value_t Build(Update& u) override {
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    const weft_update_args_t& a = u.args;
    if (u.g.HasKernel("ResourceApplyGradientDescent", "T", a.dtype)) {
      return u.g.Op("ResourceApplyGradientDescent", "apply", {a.variable, a.learning_rate, grad});
    }
    return u.g.Op("AssignSub", "apply", {a.variable, u.g.Mul(a.learning_rate, grad, "delta")},
                  {sdk::Attr::Type("dtype", a.dtype)});
  }

 private:
  double weight_decay_;
  std::vector<weft_slot_def_t> slots_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("sgd", "Stochastic gradient descent (torch.optim.SGD without momentum)",
                      weft::optimizers::Sgd, weft::optimizers::kHyper)
