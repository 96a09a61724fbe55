// The resources behind synchronous training on parameter servers
// (training.mode = "sync"; docs/distributed-internals.md, "Synchronous
// training"): a gradient accumulator
// per trained variable, beside it on its ps task, and a step-token queue
// that releases the next step to the workers.
//
// A worker stamps each gradient with the step at which it read the
// parameters (its local step). The accumulator of a variable keeps the
// first N gradients stamped with its current step (N =
// training.replicas_to_aggregate) and drops the rest: a gradient stamped
// with an older step is stale, one that arrives after N were kept is
// late. The chief takes the mean of the N, which advances the accumulator
// to the next step in the same critical section, applies it, and puts the
// new global step in the token queue; every worker waits there for a step
// later than its own, then reads the new parameters. This is the paper's
// scheme with backup workers: N + b workers, the first N of each step
// count.
//
// Unlike TensorFlow's SyncReplicasOptimizer, whose queue holds one token
// per worker per step, the token queue here holds only the latest
// released step: a worker never takes an old token (which would make its
// next gradient stale), a straggler rejoins at the current step at once,
// and no tokens are left over when some workers fall behind.
//
// Both keep host memory and run on any device. Waits never hold a thread:
// they finish through callbacks, on the thread that makes them possible,
// on the timer thread (a timeout) or on the canceller's.
#ifndef WEFT_CORE_RUNTIME_ACCUMULATOR_H_
#define WEFT_CORE_RUNTIME_ACCUMULATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/cancellation.h"
#include "core/runtime/resource_mgr.h"
#include "core/runtime/timer.h"

namespace weft::runtime {

struct AccumulatorSpec {
  DType dtype = DType::kF32;  // f16, bf16, f32 or f64
  Shape shape;                // fully defined
  int64_t replicas_to_aggregate = 1;
  std::string variable;  // the variable whose gradients these are, for messages

  // "replicas_to_aggregate 2, f32[784,512]".
  std::string ToString() const;
};

// Checks a spec for a new accumulator, naming what is wrong.
Status ValidateAccumulatorSpec(const AccumulatorSpec& spec);

class GradientAccumulator : public Resource, public std::enable_shared_from_this<GradientAccumulator> {
 public:
  static std::shared_ptr<GradientAccumulator> Create(std::string name, AccumulatorSpec spec);
  ~GradientAccumulator() override;
  GradientAccumulator(const GradientAccumulator&) = delete;
  GradientAccumulator& operator=(const GradientAccumulator&) = delete;

  std::string_view kind() const override { return "gradient accumulator"; }
  const std::string& name() const override { return name_; }
  const AccumulatorSpec& spec() const { return spec_; }

  // Offers |gradient| (a host tensor) from replica |replica| (named
  // |replica_name| in messages), computed at |local_step|. True when it
  // is kept; false when it is late (for the step taken last, or N were
  // already kept for the current one) or stale (for an older step). A
  // gradient from a later step than the accumulator's, a second one from
  // the same replica in one step, or one of another dtype or shape is an
  // error naming both sides.
  Expected<bool> Apply(int64_t local_step, int64_t replica, const std::string& replica_name, const Tensor& gradient);

  struct Taken {
    Tensor average;          // host tensor of the spec's dtype and shape
    int64_t step = 0;        // the step these gradients were computed at
    int64_t aggregated = 0;  // N
    int64_t stale = 0;       // dropped since the previous take: steps before the one taken last
    int64_t late = 0;        // dropped since the previous take: arrived after N were kept for their step
  };
  using TakeDone = std::function<void(Status, Taken)>;

  // Waits until N gradients of the current step are kept, then calls
  // |done| with their mean (summed in ascending replica order, in f32 for
  // the 16-bit types, so the result does not depend on arrival order) and
  // advances to the next step: later gradients stamped with this one are
  // stale. Fails with DEADLINE_EXCEEDED after |timeout_ms| (0: no limit),
  // naming the replicas (by |replica_names|, indexed by replica) that did
  // and did not send one; with CANCELLED when |cancellation| fires; with
  // FAILED_PRECONDITION when another take is already waiting.
  void Take(int64_t timeout_ms, std::vector<std::string> replica_names, CancellationManager* cancellation,
            TakeDone done);

  // Sets the current step (at initialisation, after a restore) and drops
  // what was kept and counted.
  void SetGlobalStep(int64_t step);
  int64_t global_step() const;
  // Whether a take is waiting, and how many gradients are kept now.
  bool take_waiting() const;
  int64_t kept() const;

 private:
  GradientAccumulator(std::string name, AccumulatorSpec spec) : name_(std::move(name)), spec_(std::move(spec)) {}

  struct Waiter {
    int64_t id = 0;
    TakeDone done;
    std::vector<std::string> replica_names;
    CancellationManager* cancellation = nullptr;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
    Timer::Id timer = Timer::kInvalidId;
    int64_t timeout_ms = 0;
  };

  // Under |mutex_|: the mean of the kept gradients, advancing the step.
  Expected<Taken> TakeLocked();
  // Detaches the waiter |id| (if it is still the one waiting) so that its
  // caller can complete it with no lock held.
  std::optional<Waiter> Detach(int64_t id);
  void Expire(int64_t id);
  void Cancelled(int64_t id);
  // "the accumulator of 'dense1/kernel'".
  std::string Named() const;

  std::string name_;
  AccumulatorSpec spec_;

  mutable std::mutex mutex_;
  int64_t step_ = 0;
  std::map<int64_t, Tensor> kept_;  // by replica: ascending order for the sum
  int64_t stale_ = 0;
  int64_t late_ = 0;
  int64_t next_waiter_ = 0;
  std::optional<Waiter> waiter_;
};

class StepTokenQueue : public Resource, public std::enable_shared_from_this<StepTokenQueue> {
 public:
  static std::shared_ptr<StepTokenQueue> Create(std::string name);
  StepTokenQueue(const StepTokenQueue&) = delete;
  StepTokenQueue& operator=(const StepTokenQueue&) = delete;

  std::string_view kind() const override { return "step token queue"; }
  ~StepTokenQueue() override;
  const std::string& name() const override { return name_; }

  // Releases |step| (and every earlier one): waiting takes below it
  // finish. A step below the latest released is ignored, unless |reset|,
  // which sets the released step to |step| exactly (after a restore) and
  // reopens a closed queue; takes waiting for a step after |step| or later
  // then fail with ABORTED (their worker takes its first step again).
  void Put(int64_t step, bool reset = false);

  using TakeDone = std::function<void(Status, int64_t)>;
  // Calls |done| with the latest released step once it is later than
  // |local_step|; fails at once with ABORTED when |local_step| is after
  // the released step (the queue went back: a reset, or a restarted task's
  // new queue once it released a step). Once the queue is closed and holds no later step, fails
  // with OUT_OF_RANGE ("the chief ended the run at step 20"), the clean
  // end of a run, or, when it was aborted, with ABORTED. With
  // |wait_open| (a worker's first take) a closed queue is waited on until
  // a reset opens it: a queue a previous run closed on a ps task that
  // kept serving does not hand its old step to a new run's workers.
  // Timeout and cancellation as for a gradient take.
  void Take(int64_t local_step, int64_t timeout_ms, CancellationManager* cancellation, TakeDone done,
            bool wait_open = false);

  // Closes the queue and wakes every waiting take; |aborted|: the chief
  // stopped the run on an error, which takes then report as one.
  void Close(bool aborted = false);

  int64_t released() const;
  bool closed() const;
  // Takes waiting now.
  int64_t waiting() const;

 private:
  explicit StepTokenQueue(std::string name) : name_(std::move(name)) {}

  struct Waiter {
    int64_t local_step = 0;
    bool wait_open = false;
    TakeDone done;
    CancellationManager* cancellation = nullptr;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
    Timer::Id timer = Timer::kInvalidId;
    int64_t timeout_ms = 0;
  };
  using Completions = std::vector<std::function<void()>>;

  // What ends the wait of |w| (run with no lock held): its cancellation
  // and timer let go, then its callback.
  static std::function<void()> Completion(Waiter w, Status status, int64_t token);
  // Under |mutex_|: moves the waiters Put or Close made ready to |out|.
  void Flush(Completions* out);
  // Removes the waiter |id|, completing it with |status|, if it is still
  // waiting.
  void Fail(int64_t id, Status status);
  void Expire(int64_t id);
  std::string Named() const { return StrCat("step token queue '", name_, "'"); }
  // Under |mutex_|: why a take on the closed queue ends.
  Status Ended() const;
  // Under |mutex_|: why a take for a step after the released one ends (the
  // queue went back to an earlier step).
  Status WentBack(int64_t local_step) const;

  std::string name_;
  mutable std::mutex mutex_;
  int64_t released_ = -1;
  bool closed_ = false;
  bool aborted_ = false;
  int64_t next_waiter_ = 0;
  std::map<int64_t, Waiter> waiters_;
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_ACCUMULATOR_H_
