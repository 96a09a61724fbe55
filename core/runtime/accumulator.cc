#include "core/runtime/accumulator.h"

#include <algorithm>
#include <cstring>

#include "core/tensor/size.h"
#include "weft/sdk/half.h"

namespace weft::runtime {
namespace {

// Longer timeouts are taken as this (a week), so that now + timeout
// cannot overflow the clock.
constexpr int64_t kMaxTimeoutMs = int64_t{7} * 24 * 3600 * 1000;

std::string Gradients(int64_t n) { return StrCat(n, n == 1 ? " gradient" : " gradients"); }

std::string SpecText(DType dtype, const Shape& shape) { return StrCat(DTypeName(dtype), shape.ToString()); }

std::string Seconds(int64_t ms) {
  if (ms % 1000 == 0) return StrCat(ms / 1000, " s");
  return StrCat(static_cast<double>(ms) / 1000.0, " s");
}

// Adds |n| elements of |src| to the f32 or f64 |sum|, converting 16-bit
// floats to f32.
template <class Acc>
void AddTo(Acc* sum, const Tensor& src, int64_t n) {
  switch (src.dtype()) {
    case DType::kF16: {
      const auto* p = src.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) sum[i] += sdk::HalfToFloat(p[i]);
      break;
    }
    case DType::kBF16: {
      const auto* p = src.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) sum[i] += sdk::Bfloat16ToFloat(p[i]);
      break;
    }
    default: {
      const auto* p = src.data<Acc>();
      for (int64_t i = 0; i < n; ++i) sum[i] += p[i];
      break;
    }
  }
}

}  // namespace

std::string AccumulatorSpec::ToString() const {
  return StrCat("replicas_to_aggregate ", replicas_to_aggregate, ", ", SpecText(dtype, shape));
}

Status ValidateAccumulatorSpec(const AccumulatorSpec& spec) {
  if (spec.dtype != DType::kF16 && spec.dtype != DType::kBF16 && spec.dtype != DType::kF32 &&
      spec.dtype != DType::kF64) {
    return InvalidArgumentError("a gradient accumulator holds f16, bf16, f32 or f64 gradients; got ",
                                DTypeName(spec.dtype));
  }
  if (!spec.shape.IsFullyDefined()) {
    return InvalidArgumentError("the shape of a gradient accumulator must be fully defined; got ",
                                spec.shape.ToString());
  }
  WEFT_RETURN_IF_ERROR(CheckShapeFits(spec.shape, spec.dtype));
  if (spec.replicas_to_aggregate < 1) {
    return InvalidArgumentError("replicas_to_aggregate is ", spec.replicas_to_aggregate, "; it must be at least 1");
  }
  return Status();
}

// --- GradientAccumulator -----------------------------------------------------

std::shared_ptr<GradientAccumulator> GradientAccumulator::Create(std::string name, AccumulatorSpec spec) {
  return std::shared_ptr<GradientAccumulator>(new GradientAccumulator(std::move(name), std::move(spec)));
}

GradientAccumulator::~GradientAccumulator() {
  // A take still waiting when the resource goes (its device closing)
  // finishes rather than leaving its step hanging.
  if (waiter_) {
    if (waiter_->cancellation != nullptr) waiter_->cancellation->Deregister(waiter_->token);
    if (waiter_->timer != Timer::kInvalidId) Timer::Global().Cancel(waiter_->timer);
    waiter_->done(Status(Code::kCancelled, StrCat(Named(), " was destroyed while a take waited")), Taken{});
  }
}

std::string GradientAccumulator::Named() const {
  return StrCat("the accumulator of '", spec_.variable.empty() ? name_ : spec_.variable, "'");
}

int64_t GradientAccumulator::global_step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return step_;
}

bool GradientAccumulator::take_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiter_.has_value();
}

int64_t GradientAccumulator::kept() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(kept_.size());
}

void GradientAccumulator::SetGlobalStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
  kept_.clear();
  stale_ = 0;
  late_ = 0;
}

Expected<bool> GradientAccumulator::Apply(int64_t local_step, int64_t replica, const std::string& replica_name,
                                          const Tensor& gradient) {
  if (gradient.dtype() != spec_.dtype || gradient.shape() != spec_.shape) {
    return InvalidArgumentError("gradient for '", spec_.variable, "' is ", gradient.TypeString(), "; ", Named(),
                                " holds ", SpecText(spec_.dtype, spec_.shape));
  }
  if (replica < 0) return InvalidArgumentError("replica is ", replica, "; it must be >= 0");
  std::optional<Waiter> ready;
  Expected<Taken> taken = Taken{};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (local_step < step_) {
      // For the step just taken it came after the N (the take advances the
      // step as the N-th arrives when the chief already waits); older is
      // stale.
      ++(local_step == step_ - 1 ? late_ : stale_);
      return false;
    }
    if (local_step > step_) {
      return FailedPreconditionError("gradient for step ", local_step, " but ", Named(), " is at step ", step_,
                                     " (was the chief restarted without --resume?)");
    }
    if (kept_.count(replica) != 0) {
      return InvalidArgumentError(replica_name.empty() ? StrCat("replica ", replica) : replica_name,
                                  " sent a second gradient for step ", step_, " to ", Named(),
                                  "; two processes may be running as the same task");
    }
    if (static_cast<int64_t>(kept_.size()) >= spec_.replicas_to_aggregate) {
      ++late_;
      return false;
    }
    WEFT_ASSIGN_OR_RETURN(Tensor copy, gradient.DeepCopy());
    kept_.emplace(replica, std::move(copy));
    if (static_cast<int64_t>(kept_.size()) == spec_.replicas_to_aggregate && waiter_) {
      ready = std::move(waiter_);
      waiter_.reset();
      taken = TakeLocked();
    }
  }
  if (ready) {
    if (ready->cancellation != nullptr) ready->cancellation->Deregister(ready->token);
    if (ready->timer != Timer::kInvalidId) Timer::Global().Cancel(ready->timer);
    if (taken.ok()) {
      ready->done(Status(), std::move(*taken));
    } else {
      ready->done(taken.status(), Taken{});
    }
  }
  return true;
}

Expected<GradientAccumulator::Taken> GradientAccumulator::TakeLocked() {
  const int64_t n = spec_.shape.num_elements();
  Taken taken;
  taken.step = step_;
  taken.aggregated = static_cast<int64_t>(kept_.size());
  taken.stale = stale_;
  taken.late = late_;
  WEFT_ASSIGN_OR_RETURN(taken.average, Tensor::Allocate(spec_.dtype, spec_.shape));
  if (spec_.dtype == DType::kF64) {
    std::vector<double> sum(static_cast<std::size_t>(n), 0.0);
    for (const auto& [replica, g] : kept_) AddTo(sum.data(), g, n);
    const double scale = 1.0 / static_cast<double>(taken.aggregated);
    auto* out = taken.average.data<double>();
    for (int64_t i = 0; i < n; ++i) out[i] = sum[static_cast<std::size_t>(i)] * scale;
  } else {
    std::vector<float> sum(static_cast<std::size_t>(n), 0.0f);
    for (const auto& [replica, g] : kept_) AddTo(sum.data(), g, n);
    const float scale = 1.0f / static_cast<float>(taken.aggregated);
    if (spec_.dtype == DType::kF32) {
      auto* out = taken.average.data<float>();
      for (int64_t i = 0; i < n; ++i) out[i] = sum[static_cast<std::size_t>(i)] * scale;
    } else {
      auto* out = taken.average.data<uint16_t>();
      const bool half = spec_.dtype == DType::kF16;
      for (int64_t i = 0; i < n; ++i) {
        const float v = sum[static_cast<std::size_t>(i)] * scale;
        out[i] = half ? sdk::FloatToHalf(v) : sdk::FloatToBfloat16(v);
      }
    }
  }
  kept_.clear();
  stale_ = 0;
  late_ = 0;
  ++step_;
  return taken;
}

void GradientAccumulator::Take(int64_t timeout_ms, std::vector<std::string> replica_names,
                               CancellationManager* cancellation, TakeDone done) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (waiter_) {
    lock.unlock();
    return done(FailedPreconditionError("two takes wait on ", Named(), " at once; only the chief takes gradients"),
                Taken{});
  }
  if (static_cast<int64_t>(kept_.size()) >= spec_.replicas_to_aggregate) {
    Expected<Taken> taken = TakeLocked();
    lock.unlock();
    if (!taken.ok()) return done(taken.status(), Taken{});
    return done(Status(), std::move(*taken));
  }
  Waiter w;
  w.id = next_waiter_++;
  w.done = std::move(done);
  w.replica_names = std::move(replica_names);
  w.timeout_ms = timeout_ms;
  w.cancellation = cancellation;
  const int64_t id = w.id;
  std::weak_ptr<GradientAccumulator> self = weak_from_this();
  waiter_ = std::move(w);
  lock.unlock();
  // Registered with no lock held: a manager already cancelled runs nothing
  // and returns kInvalidToken, and one cancelled meanwhile finds the waiter.
  if (cancellation != nullptr) {
    const CancellationManager::Token token = cancellation->Register([self, id] {
      if (auto a = self.lock()) a->Cancelled(id);
    });
    if (token == CancellationManager::kInvalidToken) return Cancelled(id);
    std::lock_guard<std::mutex> relock(mutex_);
    if (waiter_ && waiter_->id == id) {
      waiter_->token = token;
    } else {
      cancellation->Deregister(token);
      return;
    }
  }
  if (timeout_ms > 0) {
    const Timer::Id timer = Timer::Global().Schedule(
        Timer::Clock::now() + std::chrono::milliseconds(std::min<int64_t>(timeout_ms, kMaxTimeoutMs)), [self, id] {
          if (auto a = self.lock()) a->Expire(id);
        });
    std::lock_guard<std::mutex> relock(mutex_);
    if (waiter_ && waiter_->id == id) {
      waiter_->timer = timer;
    } else {
      Timer::Global().Cancel(timer);
    }
  }
}

std::optional<GradientAccumulator::Waiter> GradientAccumulator::Detach(int64_t id) {
  if (!waiter_ || waiter_->id != id) return std::nullopt;
  std::optional<Waiter> w = std::move(waiter_);
  waiter_.reset();
  return w;
}

void GradientAccumulator::Cancelled(int64_t id) {
  std::optional<Waiter> w;
  int64_t step;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    w = Detach(id);
    step = step_;
  }
  if (!w) return;
  if (w->timer != Timer::kInvalidId) Timer::Global().Cancel(w->timer);
  w->done(Status(Code::kCancelled,
                 StrCat("the step was cancelled while ", Named(), " waited for step ", step, "'s gradients")),
          Taken{});
}

void GradientAccumulator::Expire(int64_t id) {
  std::optional<Waiter> w;
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    w = Detach(id);
    if (!w) return;
    const int64_t n = spec_.replicas_to_aggregate;
    const int64_t arrived = static_cast<int64_t>(kept_.size());
    auto name = [&](int64_t r) {
      return r < static_cast<int64_t>(w->replica_names.size()) ? w->replica_names[static_cast<std::size_t>(r)]
                                                               : StrCat("replica ", r);
    };
    std::vector<std::string> from;
    for (const auto& [replica, g] : kept_) from.push_back(name(replica));
    message = StrCat(Named(), " waited ", Seconds(w->timeout_ms), " at step ", step_, " for ", Gradients(n),
                     " (training.replicas_to_aggregate); ", arrived, " arrived");
    if (!from.empty()) message += StrCat(", from ", StrJoin(from, ", "));
    std::vector<std::string> missing;
    for (int64_t r = 0; r < static_cast<int64_t>(w->replica_names.size()); ++r) {
      if (kept_.count(r) == 0) missing.push_back(name(r));
    }
    if (!missing.empty()) message += StrCat("; none from ", StrJoin(missing, ", "));
    const int64_t backups = static_cast<int64_t>(w->replica_names.size()) - n;
    if (backups == 0) message += StrCat(" (with backup_workers = 0 every worker is needed)");
    if (stale_ + late_ > 0) message += StrCat("; ", stale_ + late_, " came too late or for an older step");
  }
  if (w->cancellation != nullptr) w->cancellation->Deregister(w->token);
  w->done(Status(Code::kDeadlineExceeded, message), Taken{});
}

// --- StepTokenQueue ----------------------------------------------------------

std::shared_ptr<StepTokenQueue> StepTokenQueue::Create(std::string name) {
  return std::shared_ptr<StepTokenQueue>(new StepTokenQueue(std::move(name)));
}

StepTokenQueue::~StepTokenQueue() {
  for (auto& [id, w] : waiters_) {
    if (w.cancellation != nullptr) w.cancellation->Deregister(w.token);
    if (w.timer != Timer::kInvalidId) Timer::Global().Cancel(w.timer);
    w.done(Status(Code::kCancelled, StrCat(Named(), " was destroyed while a take waited")), -1);
  }
}

int64_t StepTokenQueue::released() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return released_;
}

bool StepTokenQueue::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

Status StepTokenQueue::Ended() const {
  if (aborted_) {
    return Status(Code::kAborted,
                  StrCat("the chief stopped the run after an error, at step ", released_, " (its output says which)"));
  }
  return Status(Code::kOutOfRange, StrCat("the chief ended the run at step ", released_));
}

Status StepTokenQueue::WentBack(int64_t local_step) const {
  return Status(Code::kAborted, StrCat(Named(), " went back to step ", released_, " while this worker waited for a ",
                                       "step after ", local_step, " (the chief restored a checkpoint after a task ",
                                       "was lost); the worker takes its first step again"));
}

int64_t StepTokenQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(waiters_.size());
}

std::function<void()> StepTokenQueue::Completion(Waiter w, Status status, int64_t token) {
  return [w = std::move(w), status = std::move(status), token]() mutable {
    if (w.cancellation != nullptr) w.cancellation->Deregister(w.token);
    if (w.timer != Timer::kInvalidId) Timer::Global().Cancel(w.timer);
    w.done(status, token);
  };
}

void StepTokenQueue::Flush(Completions* out) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Waiter& w = it->second;
    Status status;
    int64_t token = released_;
    if (w.wait_open && closed_) {
      ++it;
      continue;
    }
    if (released_ > w.local_step) {
      status = Status();
    } else if (closed_) {
      status = Ended();
    } else {
      ++it;
      continue;
    }
    out->push_back(Completion(std::move(w), std::move(status), token));
    it = waiters_.erase(it);
  }
}

void StepTokenQueue::Put(int64_t step, bool reset) {
  Completions ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reset) {
      released_ = step;
      closed_ = false;
      aborted_ = false;
      // Takes waiting for a step after one the reset went back before (a
      // restore) would wait for it in vain: the chief first needs their
      // gradients for |step|.
      for (auto it = waiters_.begin(); it != waiters_.end();) {
        if (it->second.wait_open || it->second.local_step < step) {
          ++it;
          continue;
        }
        Status status = WentBack(it->second.local_step);
        ready.push_back(Completion(std::move(it->second), std::move(status), -1));
        it = waiters_.erase(it);
      }
    } else if (step > released_) {
      released_ = step;
    }
    Flush(&ready);
  }
  for (auto& f : ready) f();
}

void StepTokenQueue::Close(bool aborted) {
  Completions ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    aborted_ = aborted_ || aborted;
    Flush(&ready);
  }
  for (auto& f : ready) f();
}

void StepTokenQueue::Take(int64_t local_step, int64_t timeout_ms, CancellationManager* cancellation, TakeDone done,
                          bool wait_open) {
  int64_t id;
  std::weak_ptr<StepTokenQueue> self = weak_from_this();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!(wait_open && closed_) && (released_ > local_step || closed_)) {
      const int64_t token = released_;
      Status status = released_ > local_step ? Status() : Ended();
      lock.unlock();
      return done(std::move(status), token);
    }
    if (!wait_open && released_ >= 0 && local_step > released_) {
      // A worker's step is always one the queue released, unless the
      // queue went back since (a reset after a restore).
      Status status = WentBack(local_step);
      lock.unlock();
      return done(std::move(status), -1);
    }
    id = next_waiter_++;
    Waiter w;
    w.local_step = local_step;
    w.wait_open = wait_open;
    w.done = std::move(done);
    w.cancellation = cancellation;
    w.timeout_ms = timeout_ms;
    waiters_.emplace(id, std::move(w));
  }
  if (cancellation != nullptr) {
    const CancellationManager::Token token = cancellation->Register([self, id, local_step] {
      if (auto q = self.lock()) {
        q->Fail(id, Status(Code::kCancelled, StrCat("the step was cancelled while it waited in ", q->Named(),
                                                    " for a step after ", local_step)));
      }
    });
    if (token == CancellationManager::kInvalidToken) {
      return Fail(id, Status(Code::kCancelled, StrCat("the step was cancelled before it waited in ", Named())));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) {
      cancellation->Deregister(token);
      return;
    }
    it->second.token = token;
  }
  if (timeout_ms > 0) {
    const Timer::Id timer = Timer::Global().Schedule(
        Timer::Clock::now() + std::chrono::milliseconds(std::min<int64_t>(timeout_ms, kMaxTimeoutMs)), [self, id] {
          if (auto q = self.lock()) q->Expire(id);
        });
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) {
      Timer::Global().Cancel(timer);
      return;
    }
    it->second.timer = timer;
  }
}

void StepTokenQueue::Fail(int64_t id, Status status) {
  std::optional<Waiter> w;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    w = std::move(it->second);
    waiters_.erase(it);
  }
  if (status.code() != Code::kCancelled && w->cancellation != nullptr) w->cancellation->Deregister(w->token);
  if (status.code() == Code::kCancelled && w->timer != Timer::kInvalidId) Timer::Global().Cancel(w->timer);
  w->done(std::move(status), -1);
}

void StepTokenQueue::Expire(int64_t id) {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    message = StrCat("waited ", Seconds(it->second.timeout_ms), " in ", Named(), " for a step after ",
                     it->second.local_step, "; the chief has released step ", released_,
                     " (is the chief alive, and are the other workers sending their gradients?)");
  }
  Fail(id, Status(Code::kDeadlineExceeded, message));
}

}  // namespace weft::runtime
