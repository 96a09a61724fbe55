// AdamW (Loshchilov & Hutter, 2019), as torch.optim.AdamW: weight decay is
// decoupled from the gradient, var *= 1 - lr * weight_decay before the
// Adam step.
#include "adam_rule.h"

namespace weft::optimizers {
namespace {

const auto kHyper = AdamHyperparameters("0.01", "Decoupled weight decay: var *= 1 - lr * weight_decay each step.");

class AdamW : public AdamRule {
 public:
  explicit AdamW(const weft_options_t* o) : AdamRule(o, /*decoupled=*/true) {}
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("adamw", "AdamW, decoupled weight decay (torch.optim.AdamW)", weft::optimizers::AdamW,
                      weft::optimizers::kHyper)
