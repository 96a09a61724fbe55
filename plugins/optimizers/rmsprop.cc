// RMSprop (Tieleman & Hinton), as torch.optim.RMSprop: ms = rho ms +
// (1 - rho) g^2; centered subtracts the squared running mean of g; the
// step g / (sqrt(.) + eps) goes through a momentum buffer.
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("rho", "0.99", "Decay of the running mean of squared gradients (PyTorch's alpha).", 0, 1),
    FloatOption("momentum", "0", "Momentum of the step.", 0, 1),
    FloatOption("epsilon", "1e-8", "Added to the denominator for numerical stability.", 0, 1),
    BoolOption("centered", "false", "Normalise by the variance rather than the second moment of the gradient."),
    WeightDecayOption("0", "L2 penalty added to the gradient: grad + weight_decay * var."),
};

class RmsProp : public Rule {
 public:
  explicit RmsProp(const weft_options_t* o)
      : rho_(sdk::GetFloat(o, "rho")),
        momentum_(sdk::GetFloat(o, "momentum")),
        epsilon_(sdk::GetFloat(o, "epsilon")),
        centered_(sdk::GetBool(o, "centered")),
        weight_decay_(sdk::GetFloat(o, "weight_decay")) {
    slots_ = {Slot("ms", 0), Slot("mom", 0)};
    if (centered_) slots_.push_back(Slot("mg", 0));
  }
  const std::vector<weft_slot_def_t>& Slots() const override { return slots_; }
  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    const weft_update_args_t& a = u.args;
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    weft_value_t rho = u.Scalar(rho_), momentum = u.Scalar(momentum_), eps = u.Scalar(epsilon_);
    const char* fused = centered_ ? "ResourceApplyCenteredRMSProp" : "ResourceApplyRMSProp";
    if (g.HasKernel(fused, "T", a.dtype)) {
      if (centered_) {
        return g.Op(fused, "apply",
                    {a.variable, u.slot(2), u.slot(0), u.slot(1), a.learning_rate, rho, momentum, eps, grad});
      }
      return g.Op(fused, "apply", {a.variable, u.slot(0), u.slot(1), a.learning_rate, rho, momentum, eps, grad});
    }
    weft_value_t one_minus_rho = u.Scalar(1 - rho_);
    weft_value_t ms = g.Add(g.Mul(rho, g.Read(u.slot(0), a.dtype, "ms_read")), g.Mul(one_minus_rho, g.Square(grad)),
                            "ms");
    std::vector<weft_value_t> done = {g.Assign(u.slot(0), ms, a.dtype, "ms_update")};
    weft_value_t second = ms;
    if (centered_) {
      weft_value_t mg = g.Add(g.Mul(rho, g.Read(u.slot(2), a.dtype, "mg_read")), g.Mul(one_minus_rho, grad), "mg");
      done.push_back(g.Assign(u.slot(2), mg, a.dtype, "mg_update"));
      second = g.Sub(ms, g.Square(mg), "variance");
    }
    weft_value_t avg = g.Add(g.Sqrt(second), eps, "avg");
    weft_value_t mom = g.Add(g.Mul(momentum, g.Read(u.slot(1), a.dtype, "mom_read")), g.Div(grad, avg), "mom");
    done.push_back(g.Assign(u.slot(1), mom, a.dtype, "mom_update"));
    done.push_back(g.Op("AssignSub", "apply", {a.variable, g.Mul(a.learning_rate, mom, "delta")},
                        {sdk::Attr::Type("dtype", a.dtype)}));
    weft_value_t result = done[0];
    for (std::size_t i = 1; i < done.size(); ++i) result = g.Op("NoOp", "done", {}, {}, {result, done[i]});
    return result;
  }

 private:
  double rho_, momentum_, epsilon_;
  bool centered_;
  double weight_decay_;
  std::vector<weft_slot_def_t> slots_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("rmsprop", "RMSprop, optionally centered (torch.optim.RMSprop)", weft::optimizers::RmsProp,
                      weft::optimizers::kHyper)
