#include "core/runtime/timer.h"

namespace weft::runtime {

Timer& Timer::Global() {
  // Never destroyed: kernels of sessions torn down during exit may still
  // cancel their callbacks.
  static Timer* timer = new Timer();
  return *timer;
}

Timer::Timer() : thread_([this] { Loop(); }) {}

Timer::~Timer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    pending_.clear();
    when_.clear();
  }
  wake_.notify_all();
  thread_.join();
}

Timer::Id Timer::Schedule(Clock::time_point when, std::function<void()> fn) {
  Id id;
  bool earliest;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_++;
    pending_.emplace(std::make_pair(when, id), std::move(fn));
    when_.emplace(id, when);
    earliest = pending_.begin()->first.second == id;
  }
  if (earliest) wake_.notify_all();
  return id;
}

bool Timer::Cancel(Id id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  pending_.erase({it->second, id});
  when_.erase(it);
  return true;
}

void Timer::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (pending_.empty()) {
      wake_.wait(lock);
      continue;
    }
    auto first = pending_.begin();
    // A copy: a Cancel while this waits (the lock released) may free the
    // entry, and wait_until reads its deadline again.
    const Clock::time_point when = first->first.first;
    if (Clock::now() < when) {
      wake_.wait_until(lock, when);
      continue;
    }
    std::function<void()> fn = std::move(first->second);
    when_.erase(first->first.second);
    pending_.erase(first);
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace weft::runtime
