#include "send_state.h"

#include <cstdio>

#include "weft/sdk/status.h"

namespace weft::zmq_transport {

void SendTracker::Add() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++pending_;
}

void SendTracker::Remove() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--pending_ == 0) idle_.notify_all();
}

int64_t SendTracker::pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_;
}

bool SendTracker::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return pending_ == 0; });
}

SendState::SendState(std::shared_ptr<SendTracker> tracker, std::shared_ptr<DoneSink> sink, weft_done_fn done,
                     void* user)
    : tracker_(std::move(tracker)), sink_(std::move(sink)), done_(done), user_(user) {
  tracker_->Add();
}

void SendState::Unref() noexcept {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (suppressed_) {
    std::shared_ptr<SendTracker> tracker = std::move(tracker_);
    delete this;
    tracker->Remove();
    return;
  }
  // The sink may run it right here; nothing of |this| is touched after.
  std::shared_ptr<DoneSink> sink = std::move(sink_);
  sink->Complete(this);
}

void SendState::RunDone() noexcept {
  // Keeps the tracker alive past `delete this`, so that Remove comes after
  // done: a waiter in connection_close then knows done has returned.
  std::shared_ptr<SendTracker> tracker = std::move(tracker_);
  if (done_ != nullptr) {
    weft_status_t status = nullptr;
    if (failed_.load(std::memory_order_acquire) || tracker->dead()) {
      // May run on ZeroMQ's own threads: no allocation that could throw.
      char message[512];
      std::snprintf(message, sizeof message,
                    "zmq transport: a message to %s was not sent: the connection closed before it went out",
                    tracker->peer().c_str());
      status = sdk::MakeStatus(WEFT_UNAVAILABLE, message);
    }
    done_(user_, status);
  }
  delete this;
  tracker->Remove();
}

void SendState::FreeFrame(void* /*data*/, void* hint) noexcept { static_cast<SendState*>(hint)->Unref(); }

}  // namespace weft::zmq_transport
