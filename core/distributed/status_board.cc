#include "core/distributed/status_board.h"

#include <algorithm>
#include <cmath>

namespace weft::dist {

void StatusBoard::Ring::Add(double v) {
  if (values.size() < kWindow) {
    values.push_back(v);
  } else {
    values[next] = v;
  }
  next = (next + 1) % kWindow;
  ++count;
}

void StatusBoard::SetRole(std::string role) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.role = std::move(role);
}

void StatusBoard::SetState(std::string state) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.state = std::move(state);
}

void StatusBoard::SetTotalSteps(int64_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.total_steps = total;
}

void StatusBoard::StepDone(int64_t step, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.step = step;
  steps_.Add(ms);
}

void StatusBoard::SetGlobalStep(int64_t global_step) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.global_step = global_step;
}

void StatusBoard::AddGradients(int64_t accepted, int64_t dropped) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_.accepted_gradients = std::max<int64_t>(now_.accepted_gradients, 0) + accepted;
  now_.dropped_gradients = std::max<int64_t>(now_.dropped_gradients, 0) + dropped;
}

void StatusBoard::RunGraphDone(double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  run_graphs_.Add(ms);
}

StatusBoard::Snapshot StatusBoard::Take() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Snapshot s = now_;
  const Ring& ring = steps_.count > 0 ? steps_ : run_graphs_;
  if (ring.count == 0) return s;
  s.timed = steps_.count > 0 ? "training steps" : "RunGraph";
  s.steps_timed = ring.count;
  std::vector<double> sorted = ring.values;
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest value with at least p% at or below it.
  auto at = [&](double p) {
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
  };
  s.p50_ms = at(50);
  s.p90_ms = at(90);
  s.p99_ms = at(99);
  return s;
}

}  // namespace weft::dist
