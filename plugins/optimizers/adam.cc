// Adam (Kingma & Ba, 2015), as torch.optim.Adam (amsgrad off): weight decay
// is added to the gradient.
#include "adam_rule.h"

namespace weft::optimizers {
namespace {

const auto kHyper = AdamHyperparameters("0", "L2 penalty added to the gradient: grad + weight_decay * var.");

class Adam : public AdamRule {
 public:
  explicit Adam(const weft_options_t* o) : AdamRule(o, /*decoupled=*/false) {}
};

}  // namespace
}  // namespace weft::optimizers

WEFT_OPTIMIZER_PLUGIN("adam", "Adam (torch.optim.Adam)", weft::optimizers::Adam, weft::optimizers::kHyper)
