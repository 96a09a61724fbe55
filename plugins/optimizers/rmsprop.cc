// RMSprop (Tieleman & Hinton), as torch.optim.RMSprop: ms = rho ms +
// (1 - rho) g^2; centered subtracts the squared running mean of g; the
// step g / (sqrt(.) + eps) goes through a momentum buffer.
#include "rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("rho", "0.99", "Decay of the running mean of squared gradients (PyTorch's alpha).", 0, 1),
    FloatOption("momentum", "0", "Momentum of the step.", 0, 1),
    EpsilonOption("1e-8"),
    BoolOption("centered", "false", "Normalise by the variance rather than the second moment of the gradient."),
    WeightDecayOption("0"),
};

// Slot positions; "mg" exists only when centered.
enum : std::size_t { kMs = 0, kMom = 1, kMg = 2 };

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
  weft_value_t Build(Update& u) override {
    sdk::Graph& g = u.g;
    weft_value_t grad = WithWeightDecay(u, weight_decay_);
    weft_value_t rho = u.Scalar(rho_), momentum = u.Scalar(momentum_), eps = u.Scalar(epsilon_);
    if (centered_ && g.HasKernel("ResourceApplyCenteredRMSProp", "T", u.dtype())) {
      return g.Op("ResourceApplyCenteredRMSProp", "apply",
                  {u.var(), u.slot(kMg), u.slot(kMs), u.slot(kMom), u.lr(), rho, momentum, eps, grad});
    }
    if (!centered_ && g.HasKernel("ResourceApplyRMSProp", "T", u.dtype())) {
      return g.Op("ResourceApplyRMSProp", "apply",
                  {u.var(), u.slot(kMs), u.slot(kMom), u.lr(), rho, momentum, eps, grad});
    }
    weft_value_t one_minus_rho = u.Scalar(1 - rho_);
    weft_value_t ms = g.Add(g.Mul(rho, u.ReadSlot(kMs, "ms_read")), g.Mul(one_minus_rho, g.Square(grad)), "ms");
    std::vector<weft_value_t> done = {u.SaveSlot(kMs, ms, "ms_update")};
    weft_value_t second = ms;
    if (centered_) {
      weft_value_t mg = g.Add(g.Mul(rho, u.ReadSlot(kMg, "mg_read")), g.Mul(one_minus_rho, grad), "mg");
      done.push_back(u.SaveSlot(kMg, mg, "mg_update"));
      second = g.Sub(ms, g.Square(mg), "variance");
    }
    weft_value_t avg = g.Add(g.Sqrt(second), eps, "avg");
    weft_value_t mom = g.Add(g.Mul(momentum, u.ReadSlot(kMom, "mom_read")), g.Div(grad, avg), "mom");
    done.push_back(u.SaveSlot(kMom, mom, "mom_update"));
    done.push_back(u.Subtract(g.Mul(u.lr(), mom, "delta")));
    return u.Group(done);
  }

 private:
  double rho_, momentum_, epsilon_;
  bool centered_;
  double weight_decay_;
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("rmsprop", "RMSprop, optionally centered (torch.optim.RMSprop)", weft::optimizers::RmsProp,
                      weft::optimizers::kHyper)
