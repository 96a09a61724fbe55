// AdamW (Loshchilov & Hutter, 2019), as torch.optim.AdamW: weight decay is
// decoupled from the gradient, var *= 1 - lr * weight_decay before the
// Adam step.
#include "adam_rule.h"

namespace weft::optimizers {
namespace {

const weft_option_def_t kHyper[] = {
    FloatOption("beta1", "0.9", "Decay of the running mean of gradients.", 0, 1),
    FloatOption("beta2", "0.999", "Decay of the running mean of squared gradients.", 0, 1),
    FloatOption("epsilon", "1e-8", "Added to the denominator for numerical stability.", 0, 1),
    WeightDecayOption("0.01", "Decoupled weight decay: var *= 1 - lr * weight_decay each step."),
};

class AdamW : public AdamRule {
 public:
  explicit AdamW(const weft_options_t* o) : AdamRule(o, /*decoupled=*/true) {}
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("adamw", "AdamW, decoupled weight decay (torch.optim.AdamW)", weft::optimizers::AdamW,
                      weft::optimizers::kHyper)
