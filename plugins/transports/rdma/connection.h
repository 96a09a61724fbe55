// One connection of the rdma transport: a reliable-connected queue pair,
// its receive ring and send staging area, and the ring protocol of
// rdma_transport.h over them (chunks written with immediate data, credits
// returned in batches, messages reassembled by FrameAssembler).
//
// NOT RUN ON REAL HARDWARE (see rdma_transport.h): compiled, never executed.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_CONNECTION_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_CONNECTION_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rdma/connection_state.h"
#include "rdma/device.h"
#include "rdma/frame.h"
#include "rdma/handshake.h"
#include "rdma/rdma_transport.h"
#include "rdma/registration_cache.h"
#include "weft/weft_transport.h"

namespace weft::rdma {

class Endpoint;

// A part of an outgoing message: the frame prefix, the header or a
// payload slice; |lkey| is valid when |registered| (sent zero-copy).
struct Piece {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint32_t lkey = 0;
  bool registered = false;
};

// A queued send: its pieces, how far they are sent, and the registration
// cache regions it holds until it completes.
struct PendingMessage {
  weft_done_fn done = nullptr;
  void* user = nullptr;
  std::array<uint8_t, kFramePrefixSize> prefix{};
  std::vector<Piece> pieces;
  std::size_t piece_index = 0;
  uint64_t piece_offset = 0;
  std::vector<const Region*> regions;
};

struct StagingSlot {
  bool busy = false;
  // The message whose last chunk this slot carried: done when it completes.
  std::unique_ptr<PendingMessage> finishing;
};

// A callback to run outside the connection's lock. One tied to a
// connection (on_message, on_closed) is dropped once the host has closed
// that connection; one that is not (a send's done) always runs.
struct Task {
  const void* owner = nullptr;
  std::function<void()> fn;
};
using Work = std::vector<Task>;

// Thread safety: the host's thread calls Send and Close; the endpoint's
// progress thread calls the On* handlers. Each takes the connection's
// mutex; callbacks are returned as Work, to run without it.
class Connection {
 public:
  Connection(Endpoint* endpoint, int fd, std::string peer) : endpoint_(endpoint), fd_(fd), peer_(std::move(peer)) {}
  ~Connection();

  // Runs the setup of rdma_transport.h on the side channel; throws with
  // the step that failed.
  void Establish(const DeviceContext& device, const Options& options, int64_t timeout_ms);
  // Queues a message (host thread); work to run is posted to the endpoint.
  void Send(const weft_message_t& message, weft_done_fn done, void* user);
  // Handles whatever the completion channel holds; appends callbacks.
  void OnCompletionEvent(Work* work);
  // The side channel is readable: a bye, EOF or garbage.
  void OnSideChannelReadable(Work* work);
  // An async event named the QP.
  void OnQpEvent(const char* what, Work* work);
  // The host's close (or the endpoint's): tears down everything, failing
  // pending sends with CANCELLED (their done callbacks go to |work|).
  void Close(bool say_bye, Work* work);

  // Whether the progress thread should still watch it (not failed or
  // closed).
  bool Watched();
  int fd() const { return fd_; }
  int channel_fd() const { return channel_ != nullptr ? channel_->fd : -1; }
  ibv_qp* qp() const { return qp_; }
  const std::string& peer() const { return peer_; }
  bool host_owned = false;
  Endpoint* endpoint() const { return endpoint_; }
  void Detach() { endpoint_ = nullptr; }

 private:
  void PostReceive();
  void PostCredits();
  // Posts chunks while credits, staging slots and the send queue allow.
  void Pump();
  void PostChunk(PendingMessage& message, bool* finished);
  // Moves to |event|'s state with a failure; fails every pending send and
  // tells the host when the table says so.
  void FailLocked(ConnEvent event, weft_code_t code, const std::string& message, Work* work, bool orderly = false);
  void ReleaseRegions(PendingMessage& message);
  void ApplyOrThrow(ConnEvent event);

  Endpoint* endpoint_;
  int fd_;
  std::string peer_;
  const DeviceContext* device_ = nullptr;
  Options options_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  MemoryBlock ring_;
  MemoryBlock staging_;
  HandshakeInfo mine_;
  HandshakeInfo theirs_;
  uint32_t chunk_size_ = 0;
  uint32_t max_send_wr_ = 0;

  std::mutex mutex_;
  ConnectionStateMachine state_;
  std::unique_ptr<FrameAssembler> assembler_;
  std::deque<std::unique_ptr<PendingMessage>> queue_;
  std::vector<StagingSlot> slots_;
  uint64_t next_chunk_ = 0;
  uint64_t next_receive_chunk_ = 0;
  uint64_t next_sequence_ = 0;
  uint32_t credits_ = 0;
  uint32_t freed_ = 0;
  uint32_t outstanding_sends_ = 0;
};

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_CONNECTION_H_
