// One process-wide timer thread for kernels that wait with a deadline
// without holding a thread (the gradient accumulator's take, the step
// token's take, the test-only delay): they schedule a callback and cancel
// it when they finish first.
//
//   Timer::Id id = Timer::Global().Schedule(deadline, [w] { w->TimedOut(); });
//   ...
//   if (Timer::Global().Cancel(id)) { /* it will never run */ }
//
// Callbacks run on the timer thread, one at a time, with no lock held;
// they must be short (complete a wait, hand work to a pool).
#ifndef WEFT_CORE_RUNTIME_TIMER_H_
#define WEFT_CORE_RUNTIME_TIMER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace weft::runtime {

class Timer {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = int64_t;
  static constexpr Id kInvalidId = -1;

  // The process's timer; its thread starts on first use and lives until
  // the process ends.
  static Timer& Global();

  Timer();
  ~Timer();  // Drops callbacks not yet run, then joins.
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Runs |fn| on the timer thread at |when| (at once if it has passed).
  Id Schedule(Clock::time_point when, std::function<void()> fn);
  // True when |id|'s callback was dropped before it ran; false when it has
  // run or is running, or for an unknown id.
  bool Cancel(Id id);

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Id next_ = 0;
  // By (deadline, id): ids break ties in scheduling order.
  std::map<std::pair<Clock::time_point, Id>, std::function<void()>> pending_;
  std::map<Id, Clock::time_point> when_;
  std::thread thread_;
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_TIMER_H_
