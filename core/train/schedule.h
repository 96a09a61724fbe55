// What the host decides each training step around the optimizer's rule:
// the learning rate ([schedule] in the training TOML) and the clipping of
// gradients by their global norm. Both follow PyTorch
// (torch.optim.lr_scheduler, torch.nn.utils.clip_grad_norm_).
//
//   // Host side, once per step: the rate of update |step| (0 for the first).
//   double lr = LearningRateAt(config.schedule, base_lr, step, total_steps);
//
//   // Graph side, once when the training graph is built:
//   Output norm;
//   WEFT_ASSIGN_OR_RETURN(std::vector<Output> clipped, ClipByGlobalNorm(b, grads, 1.0, &norm));
#ifndef WEFT_CORE_TRAIN_SCHEDULE_H_
#define WEFT_CORE_TRAIN_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/graph/builder.h"

namespace weft::train {

// The learning rate of the update that follows |step| completed updates
// (0 for the first), for a run of |total_steps| updates, under schedule
// |s| (validated by config::ParseConfig) from |base_lr|:
//
//   constant     base_lr
//   step         base_lr * gamma^floor(step / step_size)       (StepLR)
//   exponential  base_lr * decay_rate^(step / decay_steps), the exponent
//                floored when staircase                         (ExponentialLR)
//   cosine       min + (base_lr - min) * (1 + cos(pi * step / T)) / 2, with
//                min = min_learning_rate and T = s.total_steps, or
//                |total_steps| when that is 0  (CosineAnnealingLR's closed
//                form); from step T on it stays at min, and with no T
//                known (both 0) the rate is base_lr.
//
// With warmup_steps > 0 the rate is then multiplied by
// min(1, (step + 1) / warmup_steps): the first update runs at
// base_lr / warmup_steps, update warmup_steps - 1 at the full rate. A
// negative |step| counts as 0. Pure; thread-safe.
double LearningRateAt(const config::ScheduleConfig& s, double base_lr, int64_t step, int64_t total_steps);

// Adds to |b| the ops that scale |grads| together so that their global
// norm, sqrt(sum over every element of every gradient of g^2), is at most
// about |max_norm|, as torch.nn.utils.clip_grad_norm_ does: each gradient
// is multiplied by min(1, max_norm / (norm + 1e-6)), so gradients whose
// norm is below max_norm pass unchanged. Returns the clipped gradients, in
// order, and sets |*global_norm| (when not null) to the norm before
// clipping, a scalar. The ops go under the name scope
// "clip_by_global_norm".
//
// INVALID_ARGUMENT when |grads| is empty, when |max_norm| is not a finite
// number > 0, or when a gradient is missing, not f32 or f64, or of another
// dtype than the first; the message names the gradient by position and
// tensor. An error |b| already holds is returned as is.
Expected<std::vector<Output>> ClipByGlobalNorm(GraphBuilder& b, const std::vector<Output>& grads, double max_norm,
                                               Output* global_norm);

}  // namespace weft::train

#endif  // WEFT_CORE_TRAIN_SCHEDULE_H_
