// Zero-copy sends: the bookkeeping that turns ZeroMQ's per-frame free
// callbacks into the one `done` of a send.
//
// Every frame that points at the host's memory is made with
// zmq_msg_init_data and a free callback holding a reference to the send's
// SendState. ZeroMQ calls it once the frame's bytes are written to the
// socket (or the frame is dropped), from whichever thread releases the
// frame. The last reference hands the state to its DoneSink (the endpoint),
// which runs `done` exactly once on the endpoint's loop thread, like every
// other callback: OK when every frame went out, UNAVAILABLE when the
// connection failed or closed first.
#ifndef WEFT_PLUGINS_TRANSPORTS_ZMQ_SEND_STATE_H_
#define WEFT_PLUGINS_TRANSPORTS_ZMQ_SEND_STATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "weft/weft_abi.h"

namespace weft::zmq_transport {

// The sends of one connection whose done has not run yet. Thread-safe.
class SendTracker {
 public:
  explicit SendTracker(std::string peer) : peer_(std::move(peer)) {}

  const std::string& peer() const { return peer_; }

  // From now on a send whose frames are released reports failure: the
  // connection is gone, so frames still held were dropped, not sent.
  void MarkDead() { dead_.store(true, std::memory_order_release); }
  bool dead() const { return dead_.load(std::memory_order_acquire); }

  void Add();
  void Remove();
  // Sends whose done has not run yet.
  int64_t pending();
  // Waits until no send is pending; false when |timeout| passed first.
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  const std::string peer_;
  std::atomic<bool> dead_{false};
  std::mutex mutex_;
  std::condition_variable idle_;
  int64_t pending_ = 0;
};

class SendState;

// Where finished sends go to have their done run (the endpoint's loop).
class DoneSink {
 public:
  virtual ~DoneSink() = default;
  // Runs |state|->RunDone() now or later, on some thread. Never throws.
  virtual void Complete(SendState* state) noexcept = 0;
};

// One send in flight. Created with one reference (the sender's own),
// plus one per zero-copy frame.
class SendState {
 public:
  SendState(std::shared_ptr<SendTracker> tracker, std::shared_ptr<DoneSink> sink, weft_done_fn done, void* user);

  // A reference for a frame made with zmq_msg_init_data(..., &FreeFrame,
  // this).
  void AddFrameRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // The frames could not be handed to ZeroMQ: done reports failure.
  void MarkFailed() { failed_.store(true, std::memory_order_release); }
  // send() returned an error: done must not run at all.
  void Suppress() { suppressed_ = true; }
  // Drops a reference; the last one hands the state to the sink (or
  // deletes it at once when suppressed).
  void Unref() noexcept;
  // Runs done and deletes the state.
  void RunDone() noexcept;

  // ZeroMQ's free callback (zmq_free_fn); |hint| is the SendState.
  static void FreeFrame(void* data, void* hint) noexcept;

 private:
  ~SendState() = default;

  std::shared_ptr<SendTracker> tracker_;
  std::shared_ptr<DoneSink> sink_;
  weft_done_fn done_;
  void* user_;
  std::atomic<int> refs_{1};
  std::atomic<bool> failed_{false};
  bool suppressed_ = false;
};

}  // namespace weft::zmq_transport

#endif  // WEFT_PLUGINS_TRANSPORTS_ZMQ_SEND_STATE_H_
