#include "core/train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace weft::train {

double LearningRateAt(const config::ScheduleConfig& s, double base_lr, int64_t step, int64_t total_steps) {
  step = std::max<int64_t>(step, 0);
  const double t = static_cast<double>(step);
  double lr = base_lr;
  if (s.kind == "step") {
    // The config demands step_size >= 1; the clamp only keeps a hand-built
    // ScheduleConfig from dividing by zero.
    lr = base_lr * std::pow(s.gamma, static_cast<double>(step / std::max<int64_t>(s.step_size, 1)));
  } else if (s.kind == "exponential") {
    double exponent = t / static_cast<double>(std::max<int64_t>(s.decay_steps, 1));
    if (s.staircase) exponent = std::floor(exponent);
    lr = base_lr * std::pow(s.decay_rate, exponent);
  } else if (s.kind == "cosine") {
    const int64_t period = s.total_steps > 0 ? s.total_steps : total_steps;
    if (period > 0) {
      // Past the period torch's recursion would climb back up; a run that
      // outlasts its schedule keeps the final rate instead.
      const double progress = std::min(t, static_cast<double>(period)) / static_cast<double>(period);
      lr = s.min_learning_rate + (base_lr - s.min_learning_rate) * (1 + std::cos(std::numbers::pi * progress)) / 2;
    }
  }
  if (s.warmup_steps > 0) lr *= std::min(1.0, (t + 1) / static_cast<double>(s.warmup_steps));
  return lr;
}

Expected<std::vector<Output>> ClipByGlobalNorm(GraphBuilder& b, const std::vector<Output>& grads, double max_norm,
                                               Output* global_norm) {
  if (grads.empty()) return InvalidArgumentError("ClipByGlobalNorm: no gradients to clip");
  if (!std::isfinite(max_norm) || max_norm <= 0) {
    return InvalidArgumentError("ClipByGlobalNorm: max_norm must be a finite number > 0, got ", max_norm);
  }
  WEFT_RETURN_IF_ERROR(b.status());
  DType dtype = DType::kInvalid;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const Output& g = grads[i];
    if (!g.valid() || g.index() < 0) {
      return InvalidArgumentError("ClipByGlobalNorm: gradient ", i, " is not a tensor of the graph");
    }
    if (g.dtype() != DType::kF32 && g.dtype() != DType::kF64) {
      return InvalidArgumentError("ClipByGlobalNorm: gradient ", i, " ('", g.name(), "') is ", DTypeName(g.dtype()),
                                  "; only f32 and f64 gradients can be clipped");
    }
    if (i == 0) dtype = g.dtype();
    if (g.dtype() != dtype) {
      return InvalidArgumentError("ClipByGlobalNorm: gradient ", i, " ('", g.name(), "') is ", DTypeName(g.dtype()),
                                  " but gradient 0 ('", grads[0].name(), "') is ", DTypeName(dtype),
                                  "; clip gradients of one dtype together");
    }
  }
  auto scope = b.NameScope("clip_by_global_norm");
  auto scalar = [&](double v) {
    return dtype == DType::kF32 ? b.Scalar<float>(static_cast<float>(v)) : b.Scalar<double>(v);
  };
  std::vector<Output> squares;
  squares.reserve(grads.size());
  for (const Output& g : grads) squares.push_back(b.Op("Sum", {b.Op("Square", {g})}));
  const Output sum = squares.size() == 1 ? squares[0] : b.Op("AddN", squares);
  const Output norm = b.Op("Sqrt", {sum}, {}, "global_norm");
  // torch.nn.utils.clip_grad_norm_: the 1e-6 keeps a zero norm finite, and
  // clamping at 1 leaves small gradients alone.
  const Output coef = b.Op("Div", {scalar(max_norm), b.Op("Add", {norm, scalar(1e-6)})}, {}, "coef");
  const Output factor = b.Op("Minimum", {coef, scalar(1.0)}, {}, "factor");
  std::vector<Output> clipped;
  clipped.reserve(grads.size());
  for (const Output& g : grads) clipped.push_back(b.Op("Mul", {g, factor}, {}, "clipped"));
  WEFT_RETURN_IF_ERROR(b.status());
  if (global_norm != nullptr) *global_norm = norm;
  return clipped;
}

}  // namespace weft::train
