// The verbs data path of the rdma transport; see rdma_transport.h for the
// protocol.
//
// NOT RUN ON REAL HARDWARE: everything in this file past ProbeDevices() is
// compiled but has never executed (no RDMA device where it was written).
#include "rdma/rdma_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rdma/address.h"
#include "rdma/connection_state.h"
#include "rdma/handshake.h"
#include "rdma/registration_cache.h"
#include "rdma/side_channel.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/log.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"

namespace weft::rdma {

namespace {

constexpr uint32_t kCreditFlag = 0x80000000u;
constexpr uint64_t kCreditWrId = ~uint64_t{0};
constexpr uint64_t kRecvWrId = ~uint64_t{0} - 1;
constexpr int kMaxSge = 4;
// Credit messages in flight are bounded by 4 (+ rounding) because credits
// are returned in batches of a quarter of the ring; see the header.
constexpr uint32_t kCreditSlack = 8;
constexpr char kReadyByte = 'R';
constexpr char kByeByte = 'B';

std::mutex g_options_mutex;
Options g_options;

Options CurrentOptions() {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  return g_options;
}

std::string ErrnoText(int error) { return "errno " + std::to_string(error) + ": " + std::strerror(error); }

[[noreturn]] void ThrowVerbs(const std::string& what, int error) {
  throw sdk::Error(WEFT_UNAVAILABLE, "rdma: " + what + " failed (" + ErrnoText(error) + ")");
}

constexpr const char* kAdvice =
    "install rdma-core and a provider (Debian: ibverbs-providers), load the RDMA kernel modules for the "
    "NIC (or set up rxe/siw over Ethernet), or use the tcp transport";

// --- Device ------------------------------------------------------------

// One opened device with its protection domain and the port used.
struct DeviceContext {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  ibv_port_attr port_attr{};
  ibv_gid gid{};
  uint32_t gid_index = 0;
  int max_sge = 1;
  std::string name;

  DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ~DeviceContext() {
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (context != nullptr) ibv_close_device(context);
  }
};

std::unique_ptr<DeviceContext> OpenDevice(const std::string& wanted, uint32_t gid_index) {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) ThrowVerbs("ibv_get_device_list", errno);
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> owned(list, ibv_free_device_list);
  ibv_device* chosen = nullptr;
  std::string names;
  for (int i = 0; i < count; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : ", ") + name;
    if (chosen == nullptr && (wanted.empty() || wanted == name)) chosen = list[i];
  }
  if (chosen == nullptr) {
    throw sdk::Error(count == 0 ? WEFT_UNAVAILABLE : WEFT_NOT_FOUND,
                     count == 0 ? std::string("rdma: no RDMA device found")
                                : "rdma: no RDMA device '" + wanted + "' (found: " + names + ")");
  }
  auto device = std::make_unique<DeviceContext>();
  device->name = ibv_get_device_name(chosen);
  errno = 0;
  device->context = ibv_open_device(chosen);
  if (device->context == nullptr) ThrowVerbs("ibv_open_device(" + device->name + ")", errno);
  device->pd = ibv_alloc_pd(device->context);
  if (device->pd == nullptr) ThrowVerbs("ibv_alloc_pd(" + device->name + ")", errno);
  ibv_device_attr attr{};
  if (const int rc = ibv_query_device(device->context, &attr); rc != 0) ThrowVerbs("ibv_query_device", rc);
  device->max_sge = std::clamp(attr.max_sge, 1, kMaxSge);
  bool found = false;
  for (uint8_t port = 1; port <= attr.phys_port_cnt && !found; ++port) {
    ibv_port_attr pattr{};
    if (ibv_query_port(device->context, port, &pattr) == 0 && pattr.state == IBV_PORT_ACTIVE) {
      device->port = port;
      device->port_attr = pattr;
      found = true;
    }
  }
  if (!found) {
    throw sdk::Error(WEFT_UNAVAILABLE, "rdma: device " + device->name + " has no active port (" +
                                           std::to_string(attr.phys_port_cnt) + " port(s), none ACTIVE)");
  }
  device->gid_index = gid_index;
  if (const int rc = ibv_query_gid(device->context, device->port, static_cast<int>(gid_index), &device->gid); rc != 0) {
    ThrowVerbs("ibv_query_gid(index " + std::to_string(gid_index) + ")", rc);
  }
  // Completion channel and async fds are polled by the progress thread.
  const int flags = fcntl(device->context->async_fd, F_GETFL);
  fcntl(device->context->async_fd, F_SETFL, flags | O_NONBLOCK);
  return device;
}

// --- Registered buffers -------------------------------------------------

struct MemoryBlock {
  uint8_t* data = nullptr;
  std::size_t size = 0;
  ibv_mr* mr = nullptr;

  MemoryBlock() = default;
  MemoryBlock(const MemoryBlock&) = delete;
  MemoryBlock& operator=(const MemoryBlock&) = delete;
  ~MemoryBlock() { Reset(); }
  void Allocate(ibv_pd* pd, std::size_t bytes, int access, const char* what) {
    const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
    data = static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
    if (data == nullptr) throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, std::string("rdma: cannot allocate the ") + what);
    size = rounded;
    errno = 0;
    mr = ibv_reg_mr(pd, data, size, access);
    if (mr == nullptr)
      ThrowVerbs(std::string("ibv_reg_mr for the ") + what + " (" + std::to_string(size) + " bytes)", errno);
  }
  void Reset() {
    if (mr != nullptr) ibv_dereg_mr(mr);
    std::free(data);
    mr = nullptr;
    data = nullptr;
  }
};

// --- Connections ---------------------------------------------------------

class Endpoint;

struct Piece {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  uint32_t lkey = 0;
  bool registered = false;
};

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

class Endpoint {
 public:
  Endpoint(const weft_transport_callbacks_t& callbacks, std::unique_ptr<DeviceContext> device, Options options);
  ~Endpoint();

  void Listen(const RdmaAddress& address);
  void Start();
  std::string Address() const { return address_; }
  Connection* Connect(const RdmaAddress& address, int64_t timeout_ms);
  void CloseConnection(Connection* connection);
  void Post(Work work);
  // Runs |work|, skipping tasks of connections closed meanwhile.
  void RunTasks(Work& work);

  RegistrationCache& cache() { return cache_; }
  std::mutex& cache_mutex() { return cache_mutex_; }
  const weft_transport_callbacks_t& callbacks() const { return callbacks_; }

 private:
  void Run();
  void Accept();
  void Wake();
  bool Alive(Connection* connection) const { return connections_.count(connection) != 0; }

  weft_transport_callbacks_t callbacks_;
  std::unique_ptr<DeviceContext> device_;
  Options options_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  bool stopping_ = false;

  // Held by the progress thread while it handles events and runs
  // callbacks, and by every close: no callback for a connection runs after
  // its close returns. Recursive because a callback may close.
  std::recursive_mutex dispatch_;
  std::set<Connection*> connections_;
  std::mutex posted_mutex_;
  Work posted_;

  std::mutex cache_mutex_;
  RegistrationCache cache_;
};

void RunUntied(Work& work) {
  for (Task& task : work) task.fn();
  work.clear();
}

weft_status_t NewStatus(weft_code_t code, const std::string& message) { return sdk::MakeStatus(code, message.c_str()); }

// --- Connection ----------------------------------------------------------

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

// --- Endpoint ------------------------------------------------------------

Endpoint::Endpoint(const weft_transport_callbacks_t& callbacks, std::unique_ptr<DeviceContext> device, Options options)
    : callbacks_(callbacks),
      device_(std::move(device)),
      options_(options),
      cache_(
          options.registration_cache_bytes,
          [pd = device_->pd](void* address, uint64_t size) -> Result<RegisteredMemory> {
            errno = 0;
            // An int, not the enum: libibverbs' ibv_reg_mr macro ANDs it with
            // a flag of another enum type, which clang rejects
            // (-Wdeprecated-enum-enum-conversion).
            const int access = IBV_ACCESS_LOCAL_WRITE;
            ibv_mr* mr = ibv_reg_mr(pd, address, size, access);
            if (mr == nullptr) {
              return Fail(WEFT_RESOURCE_EXHAUSTED,
                          "ibv_reg_mr of " + std::to_string(size) + " bytes failed (" + ErrnoText(errno) + ")");
            }
            return RegisteredMemory{mr, mr->lkey, mr->rkey};
          },
          [](const RegisteredMemory& memory) { ibv_dereg_mr(static_cast<ibv_mr*>(memory.handle)); }) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) ThrowVerbs("pipe2", errno);
}

Endpoint::~Endpoint() {
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  Work work;
  std::set<Connection*> connections;
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    connections.swap(connections_);
  }
  for (Connection* c : connections) {
    c->Close(true, &work);
    c->Detach();
    if (!c->host_owned) delete c;
  }
  // Done callbacks of cancelled sends still run exactly once.
  RunUntied(work);
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    posted_.clear();
  }
  CloseFd(listen_fd_);
  CloseFd(wake_[0]);
  CloseFd(wake_[1]);
}

void Endpoint::Listen(const RdmaAddress& address) {
  listen_fd_ = ListenOn(address.host, address.port);
  fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  RdmaAddress actual = address;
  actual.port = LocalPort(listen_fd_);
  actual.device = device_->name;
  address_ = FormatAddress(actual);
}

void Endpoint::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Endpoint::Wake() {
  const char byte = 0;
  (void)!write(wake_[1], &byte, 1);
}

void Endpoint::Post(Work work) {
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    for (Task& task : work) posted_.push_back(std::move(task));
  }
  Wake();
}

void Endpoint::RunTasks(Work& work) {
  for (Task& task : work) {
    if (task.owner == nullptr || Alive(static_cast<Connection*>(const_cast<void*>(task.owner)))) task.fn();
  }
  work.clear();
}

Connection* Endpoint::Connect(const RdmaAddress& address, int64_t timeout_ms) {
  const int fd = ConnectTo(address.host, address.port, timeout_ms);
  auto connection = std::make_unique<Connection>(this, fd, address.host + ":" + std::to_string(address.port));
  connection->Establish(*device_, options_, timeout_ms);
  connection->host_owned = true;
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    connections_.insert(connection.get());
  }
  Wake();
  return connection.release();
}

void Endpoint::CloseConnection(Connection* connection) {
  Work work;
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    connections_.erase(connection);
    connection->Close(true, &work);
  }
  RunUntied(work);
  delete connection;
  Wake();
}

void Endpoint::Accept() {
  std::string peer;
  int fd = -1;
  try {
    fd = AcceptFrom(listen_fd_, &peer);
  } catch (const sdk::Error& e) {
    WEFT_SDK_LOG(WARNING) << e.what();
    return;
  }
  auto connection = std::make_unique<Connection>(this, fd, peer);
  try {
    connection->Establish(*device_, options_, options_.handshake_timeout_ms);
  } catch (const std::exception& e) {
    WEFT_SDK_LOG(WARNING) << "rdma: refused a connection from " << peer << ": " << e.what();
    return;
  }
  Connection* accepted = connection.release();
  accepted->host_owned = true;
  connections_.insert(accepted);
  callbacks_.on_accept(callbacks_.user, reinterpret_cast<weft_connection_t>(accepted), peer.c_str());
}

void Endpoint::Run() {
  std::vector<pollfd> fds;
  std::vector<Connection*> owners;  // per entry of fds: the connection, or nullptr
  std::vector<int> kinds;           // 0 wake, 1 listen, 2 async, 3 completion, 4 side channel
  for (;;) {
    fds.clear();
    owners.clear();
    kinds.clear();
    auto add = [&](int fd, int kind, Connection* owner) {
      if (fd < 0) return;
      fds.push_back(pollfd{fd, POLLIN, 0});
      kinds.push_back(kind);
      owners.push_back(owner);
    };
    {
      std::lock_guard<std::recursive_mutex> lock(dispatch_);
      if (stopping_) return;
      add(wake_[0], 0, nullptr);
      add(listen_fd_, 1, nullptr);
      add(device_->context->async_fd, 2, nullptr);
      for (Connection* c : connections_) {
        if (!c->Watched()) continue;
        add(c->channel_fd(), 3, c);
        add(c->fd(), 4, c);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      WEFT_SDK_LOG(ERROR) << "rdma: poll failed (" << ErrnoText(errno) << "); the endpoint stops";
      return;
    }
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    if (stopping_) return;
    Work work;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Connection* owner = owners[i];
      if (owner != nullptr && !Alive(owner)) continue;  // closed by an earlier callback of this round
      switch (kinds[i]) {
        case 0: {
          char drain[64];
          while (read(wake_[0], drain, sizeof drain) > 0) {
          }
          Work posted;
          {
            std::lock_guard<std::mutex> posted_lock(posted_mutex_);
            posted.swap(posted_);
          }
          RunTasks(posted);
          break;
        }
        case 1: Accept(); break;
        case 2: {
          ibv_async_event event{};
          if (ibv_get_async_event(device_->context, &event) != 0) break;
          const bool qp_event = event.event_type == IBV_EVENT_QP_FATAL || event.event_type == IBV_EVENT_QP_REQ_ERR ||
                                event.event_type == IBV_EVENT_QP_ACCESS_ERR;
          Connection* target = nullptr;
          if (qp_event) {
            for (Connection* c : connections_) {
              if (c->qp() == event.element.qp) target = c;
            }
          }
          const char* what = ibv_event_type_str(event.event_type);
          ibv_ack_async_event(&event);
          if (target != nullptr) {
            target->OnQpEvent(what, &work);
          } else {
            WEFT_SDK_LOG(WARNING) << "rdma: device " << device_->name << ": " << what;
          }
          break;
        }
        case 3: owner->OnCompletionEvent(&work); break;
        case 4: owner->OnSideChannelReadable(&work); break;
        default: break;
      }
      RunTasks(work);
    }
  }
}

Endpoint* AsEndpoint(weft_endpoint_t endpoint) { return reinterpret_cast<Endpoint*>(endpoint); }

}  // namespace

void SetOptions(const Options& options) {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  g_options = options;
}

void ProbeDevices() {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  const int error = errno;
  if (list == nullptr) {
    std::string reason = "no RDMA device found (ibv_get_device_list failed with " + ErrnoText(error);
    if (error == ENOSYS) {
      reason +=
          "; the kernel offers no RDMA verbs interface: /sys/class/infiniband_verbs is missing, is ib_uverbs loaded?";
    }
    throw sdk::Error(WEFT_UNAVAILABLE, reason + "); " + kAdvice);
  }
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> owned(list, ibv_free_device_list);
  if (count <= 0) {
    std::string reason = "no RDMA device found (ibv_get_device_list returned 0 devices";
    if (error != 0) reason += "; " + ErrnoText(error);
    throw sdk::Error(WEFT_UNAVAILABLE, reason + "); " + kAdvice);
  }
  errno = 0;
  ibv_context* context = ibv_open_device(list[0]);
  if (context == nullptr) {
    const int open_error = errno;
    throw sdk::Error(WEFT_UNAVAILABLE, std::string("RDMA device ") + ibv_get_device_name(list[0]) +
                                           " found but ibv_open_device failed (" + ErrnoText(open_error) +
                                           "); check the permissions of /dev/infiniband/uverbs* and the "
                                           "memlock limit, or use the tcp transport");
  }
  ibv_close_device(context);
}

weft_status_t EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                           weft_endpoint_t* out_endpoint) {
  return sdk::Guard([&] {
    if (callbacks == nullptr || callbacks->struct_size < WEFT_TRANSPORT_CALLBACKS_SIZE_V1_0 ||
        callbacks->on_message == nullptr || callbacks->on_closed == nullptr ||
        (listen_address != nullptr && callbacks->on_accept == nullptr)) {
      throw sdk::Error(WEFT_INVALID_ARGUMENT,
                       "rdma endpoint_open: callbacks must be ABI 1.0 with on_message, on_closed and, to listen, "
                       "on_accept");
    }
    const Options options = CurrentOptions();
    RdmaAddress address;
    if (listen_address != nullptr) {
      Result<RdmaAddress> parsed = ParseAddress(listen_address);
      if (!parsed.ok()) throw sdk::Error(parsed.failure().code, parsed.failure().message);
      address = *parsed;
    }
    auto endpoint = std::make_unique<Endpoint>(*callbacks, OpenDevice(address.device, options.gid_index), options);
    if (listen_address != nullptr) endpoint->Listen(address);
    endpoint->Start();
    *out_endpoint = reinterpret_cast<weft_endpoint_t>(endpoint.release());
  });
}

void EndpointClose(weft_endpoint_t endpoint) {
  sdk::GuardVoid("rdma endpoint_close", [&] { delete AsEndpoint(endpoint); });
}

weft_status_t EndpointAddress(weft_endpoint_t endpoint, char* buffer, size_t size) {
  return sdk::Guard([&] {
    const std::string address = AsEndpoint(endpoint)->Address();
    if (address.size() + 1 > size) {
      throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, "rdma endpoint_address: " + std::to_string(address.size() + 1) +
                                                    " bytes needed, the buffer has " + std::to_string(size));
    }
    std::memcpy(buffer, address.c_str(), address.size() + 1);
  });
}

weft_status_t ConnectionOpen(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                             weft_connection_t* out_connection) {
  return sdk::Guard([&] {
    if (address == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "rdma connection_open: NULL address");
    Result<RdmaAddress> parsed = ParseAddress(address);
    if (!parsed.ok()) throw sdk::Error(parsed.failure().code, parsed.failure().message);
    Connection* connection = AsEndpoint(endpoint)->Connect(*parsed, timeout_ms);
    *out_connection = reinterpret_cast<weft_connection_t>(connection);
  });
}

void ConnectionClose(weft_connection_t handle) {
  sdk::GuardVoid("rdma connection_close", [&] {
    auto* connection = reinterpret_cast<Connection*>(handle);
    if (Endpoint* endpoint = connection->endpoint()) {
      endpoint->CloseConnection(connection);
    } else {
      // Its endpoint was closed first and tore it down already.
      delete connection;
    }
  });
}

weft_status_t Send(weft_connection_t connection, const weft_message_t* message, weft_done_fn done, void* user) {
  return sdk::Guard([&] {
    if (message == nullptr || message->struct_size < WEFT_MESSAGE_SIZE_V1_0 || done == nullptr) {
      throw sdk::Error(WEFT_INVALID_ARGUMENT, "rdma send: needs an ABI 1.0 message and a done callback");
    }
    reinterpret_cast<Connection*>(connection)->Send(*message, done, user);
  });
}

weft_status_t MemoryRegister(weft_endpoint_t endpoint, void* address, uint64_t size, void** out_registration) {
  return sdk::Guard([&] {
    Endpoint* e = AsEndpoint(endpoint);
    std::lock_guard<std::mutex> lock(e->cache_mutex());
    Result<const Region*> region = e->cache().Pin(address, size);
    if (!region.ok()) throw sdk::Error(region.failure().code, region.failure().message);
    *out_registration = const_cast<Region*>(*region);
  });
}

void MemoryUnregister(weft_endpoint_t endpoint, void* registration) {
  sdk::GuardVoid("rdma memory_unregister", [&] {
    Endpoint* e = AsEndpoint(endpoint);
    std::lock_guard<std::mutex> lock(e->cache_mutex());
    e->cache().Unpin(static_cast<const Region*>(registration));
  });
}

}  // namespace weft::rdma
