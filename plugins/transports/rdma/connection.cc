// One connection of the rdma transport (connection.h): the queue pair's
// setup over the side channel, the chunked send path, completions and
// credits, and the ways it fails or closes.
//
// NOT RUN ON REAL HARDWARE (see rdma_transport.h): compiled, never executed.
#include "rdma/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include "rdma/endpoint.h"
#include "rdma/side_channel.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"

namespace weft::rdma {
namespace {

constexpr uint32_t kCreditFlag = 0x80000000u;
constexpr uint64_t kCreditWrId = ~uint64_t{0};
constexpr uint64_t kRecvWrId = ~uint64_t{0} - 1;
// Credit messages in flight are bounded by 4 (+ rounding) because credits
// are returned in batches of a quarter of the ring; see rdma_transport.h.
constexpr uint32_t kCreditSlack = 8;
constexpr char kReadyByte = 'R';
constexpr char kByeByte = 'B';

weft_status_t NewStatus(weft_code_t code, const std::string& message) { return sdk::MakeStatus(code, message.c_str()); }

}  // namespace

Connection::~Connection() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  CloseFd(fd_);
}

void Connection::ApplyOrThrow(ConnEvent event) {
  Result<Transition> t = state_.Apply(event);
  if (!t.ok()) throw sdk::Error(WEFT_INTERNAL, t.failure().message);
}

void Connection::Establish(const DeviceContext& device, const Options& options, int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  device_ = &device;
  options_ = options;
  ApplyOrThrow(ConnEvent::kSideChannelConnected);
  const uint32_t slots = options.ring_slots;

  channel_ = ibv_create_comp_channel(device.context);
  if (channel_ == nullptr) ThrowVerbs("ibv_create_comp_channel", errno);
  fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  max_send_wr_ = slots + kCreditSlack;
  const int cqe = static_cast<int>(2 * (slots + kCreditSlack));
  cq_ = ibv_create_cq(device.context, cqe, this, channel_, 0);
  if (cq_ == nullptr) ThrowVerbs("ibv_create_cq", errno);
  if (const int rc = ibv_req_notify_cq(cq_, 0); rc != 0) ThrowVerbs("ibv_req_notify_cq", rc);

  ring_.Allocate(device.pd, std::size_t{slots} * options.slot_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                 "receive ring");
  staging_.Allocate(device.pd, std::size_t{slots} * options.slot_size, IBV_ACCESS_LOCAL_WRITE, "send staging area");
  slots_.resize(slots);

  ibv_qp_init_attr init{};
  init.qp_context = this;
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = max_send_wr_;
  init.cap.max_recv_wr = slots + kCreditSlack;
  init.cap.max_send_sge = static_cast<uint32_t>(device.max_sge);
  init.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(device.pd, &init);
  if (qp_ == nullptr) ThrowVerbs("ibv_create_qp(RC)", errno);

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device.port;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (const int rc = ibv_modify_qp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    ThrowVerbs("ibv_modify_qp(INIT)", rc);
  }
  for (uint32_t i = 0; i < slots + kCreditSlack; ++i) PostReceive();

  std::random_device random;
  mine_.qp_num = qp_->qp_num;
  mine_.psn = random() & 0xFFFFFF;
  mine_.lid = device.port_attr.lid;
  mine_.port = device.port;
  mine_.mtu = static_cast<uint8_t>(device.port_attr.active_mtu);
  std::memcpy(mine_.gid.data(), device.gid.raw, mine_.gid.size());
  mine_.ring_address = reinterpret_cast<uintptr_t>(ring_.data);
  mine_.ring_rkey = ring_.mr->rkey;
  mine_.ring_slots = slots;
  mine_.slot_size = options.slot_size;
  mine_.device_name = device.name.substr(0, kHandshakeMaxDeviceName);
  Result<std::vector<uint8_t>> hello = EncodeHandshake(mine_);
  if (!hello.ok()) throw sdk::Error(hello.failure().code, hello.failure().message);
  WriteAll(fd_, hello->data(), hello->size(), timeout_ms);
  std::vector<uint8_t> reply(kHandshakePreambleSize);
  ReadAll(fd_, reply.data(), reply.size(), timeout_ms);
  Result<uint32_t> body = DecodeHandshakePreamble(reply);
  if (!body.ok()) throw sdk::Error(body.failure().code, body.failure().message);
  reply.resize(kHandshakePreambleSize + *body);
  ReadAll(fd_, reply.data() + kHandshakePreambleSize, *body, timeout_ms);
  Result<HandshakeInfo> peer = DecodeHandshake(reply);
  if (!peer.ok()) throw sdk::Error(peer.failure().code, peer.failure().message);
  theirs_ = *peer;
  ApplyOrThrow(ConnEvent::kQpInfoExchanged);
  chunk_size_ = std::min(options.slot_size, theirs_.slot_size);
  credits_ = theirs_.ring_slots;
  assembler_ = std::make_unique<FrameAssembler>(options.limits);

  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(mine_.mtu, theirs_.mtu));
  attr.dest_qp_num = theirs_.qp_num;
  attr.rq_psn = theirs_.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.dlid = theirs_.lid;
  attr.ah_attr.port_num = device.port;
  const bool global = std::any_of(theirs_.gid.begin(), theirs_.gid.end(), [](uint8_t b) { return b != 0; });
  if (global || device.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, theirs_.gid.data(), theirs_.gid.size());
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device.gid_index);
    attr.ah_attr.grh.hop_limit = 64;
  }
  if (const int rc = ibv_modify_qp(qp_, &attr,
                                   IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    ThrowVerbs("ibv_modify_qp(RTR)", rc);
  }
  ApplyOrThrow(ConnEvent::kQpReadyToReceive);

  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = mine_.psn;
  attr.timeout = 14;
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = 1;
  if (const int rc = ibv_modify_qp(qp_, &attr,
                                   IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                       IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    ThrowVerbs("ibv_modify_qp(RTS)", rc);
  }
  // Neither side writes before both are at RTS.
  WriteAll(fd_, &kReadyByte, 1, timeout_ms);
  char ready = 0;
  ReadAll(fd_, &ready, 1, timeout_ms);
  if (ready != kReadyByte) {
    throw sdk::Error(WEFT_DATA_LOSS, "rdma side channel: the peer sent byte " + std::to_string(int(ready)) +
                                         " where the ready byte was expected");
  }
  ApplyOrThrow(ConnEvent::kQpReadyToSend);
}

void Connection::PostReceive() {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kRecvWrId;
  wr.sg_list = nullptr;
  wr.num_sge = 0;
  if (const int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) ThrowVerbs("ibv_post_recv", rc);
}

void Connection::PostCredits() {
  const uint32_t batch = std::max<uint32_t>(1, options_.ring_slots / 4);
  if (freed_ < batch || outstanding_sends_ >= max_send_wr_) return;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kCreditWrId;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(kCreditFlag | freed_);
  wr.wr.rdma.remote_addr = theirs_.ring_address;
  wr.wr.rdma.rkey = theirs_.ring_rkey;
  if (const int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) ThrowVerbs("ibv_post_send(credits)", rc);
  ++outstanding_sends_;
  freed_ = 0;
}

void Connection::PostChunk(PendingMessage& message, bool* finished) {
  const uint32_t own_slots = options_.ring_slots;
  const std::size_t slot = static_cast<std::size_t>(next_chunk_ % own_slots);
  const uint64_t remote = next_chunk_ % theirs_.ring_slots;
  uint8_t* stage = staging_.data + slot * options_.slot_size;
  std::size_t stage_used = 0;
  std::array<ibv_sge, kMaxSge> sges{};
  int n = 0;
  bool last_is_stage = false;
  uint64_t bytes = 0;
  while (bytes < chunk_size_ && message.piece_index < message.pieces.size()) {
    const Piece& piece = message.pieces[message.piece_index];
    const uint64_t take = std::min<uint64_t>(piece.size - message.piece_offset, chunk_size_ - bytes);
    const uint8_t* from = piece.data + message.piece_offset;
    if (piece.registered && n + 2 <= device_->max_sge) {
      sges[n++] = ibv_sge{reinterpret_cast<uintptr_t>(from), static_cast<uint32_t>(take), piece.lkey};
      last_is_stage = false;
    } else {
      std::memcpy(stage + stage_used, from, take);
      if (last_is_stage) {
        sges[n - 1].length += static_cast<uint32_t>(take);
      } else {
        sges[n++] =
            ibv_sge{reinterpret_cast<uintptr_t>(stage + stage_used), static_cast<uint32_t>(take), staging_.mr->lkey};
        last_is_stage = true;
      }
      stage_used += take;
    }
    bytes += take;
    message.piece_offset += take;
    if (message.piece_offset == piece.size) {
      ++message.piece_index;
      message.piece_offset = 0;
    }
  }
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = slot;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = n > 0 ? sges.data() : nullptr;
  wr.num_sge = n;
  wr.imm_data = htonl(static_cast<uint32_t>(bytes));
  wr.wr.rdma.remote_addr = theirs_.ring_address + remote * theirs_.slot_size;
  wr.wr.rdma.rkey = theirs_.ring_rkey;
  if (const int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) ThrowVerbs("ibv_post_send(data)", rc);
  ++next_chunk_;
  ++outstanding_sends_;
  --credits_;
  slots_[slot].busy = true;
  *finished = message.piece_index == message.pieces.size();
}

void Connection::Pump() {
  while (!queue_.empty() && credits_ > 0 && outstanding_sends_ < max_send_wr_ &&
         !slots_[next_chunk_ % options_.ring_slots].busy) {
    const std::size_t slot = static_cast<std::size_t>(next_chunk_ % options_.ring_slots);
    bool finished = false;
    PostChunk(*queue_.front(), &finished);
    if (finished) {
      slots_[slot].finishing = std::move(queue_.front());
      queue_.pop_front();
    }
  }
}

void Connection::ReleaseRegions(PendingMessage& message) {
  if (message.regions.empty() || endpoint_ == nullptr) return;
  std::lock_guard<std::mutex> lock(endpoint_->cache_mutex());
  for (const Region* region : message.regions) endpoint_->cache().Release(region);
  message.regions.clear();
}

void Connection::FailLocked(ConnEvent event, weft_code_t code, const std::string& message, Work* work, bool orderly) {
  Result<Transition> t = state_.Apply(event);
  const std::string text = "rdma connection to " + peer_ + ": " + message;
  auto fail = [&](std::unique_ptr<PendingMessage> pending) {
    if (pending == nullptr) return;
    ReleaseRegions(*pending);
    work->push_back(
        Task{nullptr, [done = pending->done, user = pending->user, code, text] { done(user, NewStatus(code, text)); }});
  };
  for (auto& slot : slots_) fail(std::move(slot.finishing));
  while (!queue_.empty()) {
    fail(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (t.ok() && t->notifies_host && host_owned && endpoint_ != nullptr) {
    const weft_transport_callbacks_t callbacks = endpoint_->callbacks();
    auto* self = reinterpret_cast<weft_connection_t>(this);
    work->push_back(Task{this, [callbacks, self, code, text, orderly] {
                           callbacks.on_closed(callbacks.user, self, orderly ? nullptr : NewStatus(code, text));
                         }});
  }
}

void Connection::Send(const weft_message_t& message, weft_done_fn done, void* user) {
  auto pending = std::make_unique<PendingMessage>();
  pending->done = done;
  pending->user = user;
  uint64_t payload = 0;
  for (std::size_t i = 0; i < message.num_slices; ++i) payload += message.slice_sizes[i];
  if (message.header_size > options_.limits.max_header_size || payload > options_.limits.max_payload_size) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "rdma send to " + peer_ + ": a message of " +
                                                std::to_string(message.header_size) + " header and " +
                                                std::to_string(payload) + " payload bytes is over the limits (" +
                                                std::to_string(options_.limits.max_header_size) + " and " +
                                                std::to_string(options_.limits.max_payload_size) + ")");
  }
  pending->pieces.push_back(Piece{pending->prefix.data(), kFramePrefixSize, 0, false});
  if (message.header_size > 0) {
    pending->pieces.push_back(Piece{static_cast<const uint8_t*>(message.header), message.header_size, 0, false});
  }
  for (std::size_t i = 0; i < message.num_slices; ++i) {
    const uint64_t size = message.slice_sizes[i];
    if (size == 0) continue;
    Piece piece{static_cast<const uint8_t*>(message.slice_data[i]), size, 0, false};
    if (size >= options_.zero_copy_threshold && endpoint_ != nullptr) {
      std::lock_guard<std::mutex> lock(endpoint_->cache_mutex());
      Result<const Region*> region = endpoint_->cache().Acquire(piece.data, size);
      // A slice that cannot be registered goes through the bounce buffer.
      if (region.ok()) {
        piece.registered = true;
        piece.lkey = (*region)->memory.lkey;
        pending->regions.push_back(*region);
      }
    }
    pending->pieces.push_back(piece);
  }
  Work work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!state_.can_send()) {
      ReleaseRegions(*pending);
      throw sdk::Error(WEFT_FAILED_PRECONDITION,
                       "rdma send to " + peer_ + ": the connection is " + std::string(StateName(state_.state())));
    }
    const FramePrefix prefix{static_cast<uint32_t>(message.header_size), payload, next_sequence_};
    Result<Ok> encoded = EncodeFramePrefix(prefix, options_.limits, pending->prefix);
    if (!encoded.ok()) {
      ReleaseRegions(*pending);
      throw sdk::Error(encoded.failure().code, encoded.failure().message);
    }
    ++next_sequence_;
    queue_.push_back(std::move(pending));
    try {
      Pump();
    } catch (const sdk::Error& e) {
      FailLocked(ConnEvent::kQpError, e.code(), e.what(), &work);
    }
  }
  // Callbacks run on the progress thread, never on the host's.
  if (!work.empty() && endpoint_ != nullptr) endpoint_->Post(std::move(work));
}

void Connection::OnCompletionEvent(Work* work) {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  if (ibv_get_cq_event(channel_, &cq, &context) != 0) return;  // nothing there (non-blocking)
  ibv_ack_cq_events(cq, 1);
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_.finished()) return;
  try {
    if (const int rc = ibv_req_notify_cq(cq_, 0); rc != 0) ThrowVerbs("ibv_req_notify_cq", rc);
    std::array<ibv_wc, 32> wcs{};
    int n = 0;
    while ((n = ibv_poll_cq(cq_, static_cast<int>(wcs.size()), wcs.data())) > 0) {
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[i];
        if (wc.status != IBV_WC_SUCCESS) {
          if (state_.state() == ConnState::kClosing) continue;
          FailLocked(ConnEvent::kQpError, WEFT_UNAVAILABLE,
                     std::string("work completion failed: ") + ibv_wc_status_str(wc.status) + " (vendor error " +
                         std::to_string(wc.vendor_err) + ")",
                     work);
          return;
        }
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          PostReceive();
          const uint32_t imm = ntohl(wc.imm_data);
          if ((imm & kCreditFlag) != 0) {
            credits_ += imm & ~kCreditFlag;
            if (credits_ > theirs_.ring_slots) {
              FailLocked(ConnEvent::kQpError, WEFT_DATA_LOSS,
                         "the peer returned more ring credits than its ring has slots", work);
              return;
            }
            continue;
          }
          if (imm > options_.slot_size) {
            FailLocked(ConnEvent::kQpError, WEFT_DATA_LOSS,
                       "a chunk of " + std::to_string(imm) + " bytes is larger than a ring slot", work);
            return;
          }
          const std::size_t slot = static_cast<std::size_t>(next_receive_chunk_++ % options_.ring_slots);
          Result<std::optional<AssembledMessage>> got =
              assembler_->Consume(std::span<const uint8_t>(ring_.data + slot * options_.slot_size, imm));
          ++freed_;
          if (!got.ok()) {
            FailLocked(ConnEvent::kQpError, got.failure().code, got.failure().message, work);
            return;
          }
          if (got->has_value() && endpoint_ != nullptr) {
            auto message = std::make_shared<AssembledMessage>(std::move(**got));
            const weft_transport_callbacks_t callbacks = endpoint_->callbacks();
            auto* self = reinterpret_cast<weft_connection_t>(this);
            work->push_back(Task{this, [callbacks, self, message] {
                                   auto received = sdk::Make<weft_received_t>();
                                   received.connection = self;
                                   received.header_size = message->header_size;
                                   received.header = received.header_size > 0 ? message->header().data() : nullptr;
                                   received.payload_size = message->payload().size();
                                   received.payload = received.payload_size > 0 ? message->payload().data() : nullptr;
                                   callbacks.on_message(callbacks.user, &received);
                                 }});
          }
          continue;
        }
        // A send of ours completed.
        if (outstanding_sends_ > 0) --outstanding_sends_;
        if (wc.wr_id == kCreditWrId) continue;
        StagingSlot& slot = slots_.at(static_cast<std::size_t>(wc.wr_id));
        slot.busy = false;
        if (slot.finishing != nullptr) {
          std::unique_ptr<PendingMessage> done = std::move(slot.finishing);
          ReleaseRegions(*done);
          work->push_back(Task{nullptr, [fn = done->done, user = done->user] { fn(user, nullptr); }});
        }
      }
    }
    PostCredits();
    Pump();
  } catch (const sdk::Error& e) {
    FailLocked(ConnEvent::kQpError, e.code(), e.what(), work);
  }
}

void Connection::OnSideChannelReadable(Work* work) {
  char byte = 0;
  const ssize_t n = recv(fd_, &byte, 1, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_.finished()) return;
  if (n == 1 && byte == kByeByte) {
    // An orderly close by the peer: on_closed without a status; sends
    // still queued fail.
    FailLocked(ConnEvent::kPeerClosed, WEFT_UNAVAILABLE, "the peer closed the connection", work, true);
    return;
  }
  FailLocked(ConnEvent::kPeerClosed, WEFT_UNAVAILABLE,
             n == 0  ? std::string("the side channel was closed without a goodbye (the peer process died or the "
                                    "network failed)")
             : n < 0 ? "the side channel failed: " + ErrnoText(errno)
                     : "unexpected byte " + std::to_string(int(byte)) + " on the side channel",
             work);
}

bool Connection::Watched() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !state_.finished() && fd_ >= 0;
}

void Connection::OnQpEvent(const char* what, Work* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_.finished()) return;
  FailLocked(ConnEvent::kQpError, WEFT_UNAVAILABLE, std::string("queue pair error: ") + what, work);
}

void Connection::Close(bool say_bye, Work* work) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool established = state_.can_send();
  Result<Transition> t = state_.Apply(ConnEvent::kCloseRequested);
  (void)t;  // closing is legal in every state but closed
  if (say_bye && established) {
    try {
      WriteAll(fd_, &kByeByte, 1, 100);
    } catch (const sdk::Error&) {
      // The peer is gone already; nothing to tell it.
    }
  }
  if (qp_ != nullptr) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
  }
  const std::string text = "rdma connection to " + peer_ + ": closed before the send completed";
  auto cancel = [&](std::unique_ptr<PendingMessage> pending) {
    if (pending == nullptr) return;
    ReleaseRegions(*pending);
    work->push_back(
        Task{nullptr, [fn = pending->done, user = pending->user, text] { fn(user, NewStatus(WEFT_CANCELLED, text)); }});
  };
  for (auto& slot : slots_) cancel(std::move(slot.finishing));
  while (!queue_.empty()) {
    cancel(std::move(queue_.front()));
    queue_.pop_front();
  }
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  qp_ = nullptr;
  cq_ = nullptr;
  channel_ = nullptr;
  ring_.Reset();
  staging_.Reset();
  CloseFd(fd_);
  fd_ = -1;
  if (state_.state() == ConnState::kClosing) (void)state_.Apply(ConnEvent::kDrained);
}

}  // namespace weft::rdma
