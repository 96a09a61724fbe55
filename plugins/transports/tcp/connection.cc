// A connection's work on its endpoint's I/O thread: reading each message
// into its buffers and handing it to the host, writing the queued sends,
// and closing.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tcp_internal.h"
#include "weft/sdk/struct.h"

namespace weft::transports::tcp {
namespace {

// Asio's transfer_all moves at most 64 KiB per system call; a tensor of
// 64 MiB would take a thousand trips through the reactor. This lets each
// readv/writev move as much as the socket takes (Linux caps one call at
// just under 2 GiB).
struct TransferAllLarge {
  std::size_t operator()(const boost::system::error_code& ec, std::size_t) const {
    return ec ? 0 : std::size_t{1} << 30;
  }
};

weft_status_t NewStatus(weft_code_t code, const std::string& message) { return sdk::MakeStatus(code, message.c_str()); }

// What on_message sees; |message| first so the ABI pointer converts back.
struct Delivery {
  weft_received_t message;
  std::shared_ptr<RecvBuffer> buffer;
};

void* RetainDelivery(const weft_received_t* message) {
  const auto* delivery = reinterpret_cast<const Delivery*>(message);
  return new std::shared_ptr<RecvBuffer>(delivery->buffer);
}

void ReleaseDelivery(void* token) { delete static_cast<std::shared_ptr<RecvBuffer>*>(token); }

}  // namespace

void Conn::Configure() {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
  if (const int buffer = g_options.socket_buffer_bytes.load(std::memory_order_relaxed); buffer > 0) {
    socket.set_option(asio::socket_base::send_buffer_size(buffer), ignored);
    socket.set_option(asio::socket_base::receive_buffer_size(buffer), ignored);
  }
}

void Conn::Close(weft_status_t status, bool notify) {
  if (closed) {
    if (status != nullptr) sdk::host()->status_free(status);
    return;
  }
  closed = true;
  dead = true;  // before send_mu: a Submit that takes it after this sees it
  // The socket is closed, so the kernel no longer reads any send's
  // memory: every pending send can be finished now.
  std::deque<std::unique_ptr<SendOp>> pending;
  {
    std::lock_guard<std::mutex> lock(send_mu);
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
    pending.swap(queue);
    writing = false;
  }
  for (auto& op : pending) {
    const std::string why =
        status != nullptr ? std::string("connection to ") + peer + " failed: " + sdk::host()->status_message(status)
                          : "connection to " + peer + " was closed before the message was sent";
    op->Finish(NewStatus(status != nullptr ? sdk::host()->status_code(status) : WEFT_CANCELLED, why));
  }
  auto self = shared_from_this();
  ep->conns.erase(self);
  if (notify && handle != nullptr && !ep->closing) {
    ep->callbacks.on_closed(ep->callbacks.user, handle, status);
  } else if (status != nullptr) {
    sdk::host()->status_free(status);
  }
}

void Conn::Fail(boost::system::error_code ec, const char* during, uint64_t got, uint64_t want) {
  if (closed) return;
  // A TLS peer that closes without close_notify (Weft closes the socket
  // directly) is an end of stream like any other.
  if (ec == asio::ssl::error::stream_truncated) ec = asio::error::eof;
  if (ec == asio::error::operation_aborted) return;
  if (ec == asio::error::eof && during == nullptr) {
    std::size_t unsent;
    {
      std::lock_guard<std::mutex> lock(send_mu);
      unsent = queue.size();
    }
    if (unsent == 0) {
      Close(nullptr, true);  // orderly: the peer closed between messages, and nothing was lost
      return;
    }
    Close(NewStatus(WEFT_UNAVAILABLE, "connection with " + peer + " closed by the peer while " +
                                          std::to_string(unsent) + " message(s) to it were not yet sent"),
          true);
    return;
  }
  std::string message = "connection with " + peer + " ";
  if (ec == asio::error::eof || ec == asio::error::connection_reset) {
    message += ec == asio::error::eof ? "closed by the peer" : "reset by the peer";
  } else {
    message += "failed: " + ec.message();
  }
  if (during != nullptr) {
    message += std::string(" ") + during;
    if (want > 0) message += " (" + std::to_string(got) + " of " + std::to_string(want) + " bytes)";
  }
  Close(NewStatus(ec == asio::error::eof ? WEFT_DATA_LOSS : WEFT_UNAVAILABLE, message), true);
}

void Conn::StartRead() {
  while (!closed) {
    if (incoming != nullptr) {
      if (!FillFromStage()) break;  // the rest comes straight from the socket
      Deliver();
      continue;
    }
    if (stage_end - stage_begin < kPreambleSize) break;
    if (!BeginMessage()) return;
  }
  if (closed) return;
  auto self = shared_from_this();
  if (incoming != nullptr) {
    // The message's remaining bytes, read into their final buffers.
    const uint64_t have = incoming_have;
    const uint64_t header_size = incoming->header.size();
    std::vector<asio::mutable_buffer> buffers;  // copied into the read
    if (have < header_size) buffers.push_back(asio::buffer(incoming->header.data() + have, header_size - have));
    const uint64_t payload_have = have > header_size ? have - header_size : 0;
    if (incoming->payload_size > payload_have) {
      buffers.push_back(asio::buffer(static_cast<unsigned char*>(incoming->payload) + payload_have,
                                     incoming->payload_size - payload_have));
    }
    Read(buffers, TransferAllLarge(), [self](const boost::system::error_code& ec, std::size_t n) {
      if (ec) {
        self->Fail(ec, "in the middle of a message", self->incoming_have + n, self->incoming_size);
        return;
      }
      if (self->closed) return;  // a failed write closed it meanwhile
      self->incoming_have = self->incoming_size;
      self->Deliver();
      self->StartRead();
    });
    return;
  }
  // Fewer bytes than a preamble are staged: keep them, read more after them.
  if (stage_begin > 0) {
    std::memmove(stage.get(), stage.get() + stage_begin, stage_end - stage_begin);
    stage_end -= stage_begin;
    stage_begin = 0;
  }
  ReadSome(asio::buffer(stage.get() + stage_end, kStageBytes - stage_end),
           [self](const boost::system::error_code& ec, std::size_t n) {
             if (ec) {
               const std::size_t staged = self->stage_end - self->stage_begin;
               if (staged == 0) {
                 // Between messages: an end of stream (a TLS peer's too,
                 // which Fail takes as one) is orderly.
                 self->Fail(ec, nullptr, 0, 0);
               } else {
                 self->Fail(ec, "in the middle of a message", staged, kPreambleSize);
               }
               return;
             }
             self->stage_end += n;
             self->StartRead();
           });
}

bool Conn::BeginMessage() {
  Preamble p;
  const uint64_t plugin_limit = g_options.max_message_bytes.load(std::memory_order_relaxed);
  const uint64_t own = max_message.load(std::memory_order_relaxed);
  const unsigned char* at = stage.get() + stage_begin;
  const std::string bad = own != 0 && own < plugin_limit
                              ? DecodePreamble(at, own, &p, "this connection's limit, set by the host")
                              : DecodePreamble(at, plugin_limit, &p);
  if (!bad.empty()) {
    Close(NewStatus(WEFT_DATA_LOSS, "malformed message from " + peer + ": " + bad), true);
    return false;
  }
  stage_begin += kPreambleSize;
  incoming = std::make_shared<RecvBuffer>();
  incoming->header.resize(p.header_size);
  incoming->payload_size = p.payload_size;
  if (p.payload_size > 0) {
    incoming->payload = BufferCache::Get().Take(p.payload_size, &incoming->capacity);
    if (incoming->payload == nullptr) {
      Close(NewStatus(WEFT_RESOURCE_EXHAUSTED,
                      "out of memory for a message of " + std::to_string(p.payload_size) + " bytes from " + peer),
            true);
      return false;
    }
  }
  incoming_size = uint64_t{p.header_size} + p.payload_size;
  incoming_have = 0;
  return true;
}

bool Conn::FillFromStage() {
  const uint64_t header_size = incoming->header.size();
  const uint64_t take = std::min<uint64_t>(stage_end - stage_begin, incoming_size - incoming_have);
  const unsigned char* from = stage.get() + stage_begin;
  uint64_t left = take;
  if (incoming_have < header_size) {
    const uint64_t n = std::min(left, header_size - incoming_have);
    std::memcpy(incoming->header.data() + incoming_have, from, n);
    from += n;
    left -= n;
    incoming_have += n;
  }
  if (left > 0) {
    std::memcpy(static_cast<unsigned char*>(incoming->payload) + (incoming_have - header_size), from, left);
    incoming_have += left;
  }
  stage_begin += take;
  if (stage_begin == stage_end) stage_begin = stage_end = 0;
  return incoming_have == incoming_size;
}

void Conn::Deliver() {
  std::shared_ptr<RecvBuffer> buffer = std::move(incoming);
  if (handle != nullptr && !ep->closing) {
    Delivery delivery;
    delivery.message = sdk::Make<weft_received_t>();
    delivery.message.connection = handle;
    delivery.message.header = buffer->header.empty() ? nullptr : buffer->header.data();
    delivery.message.header_size = buffer->header.size();
    delivery.message.payload = buffer->payload;
    delivery.message.payload_size = buffer->payload_size;
    delivery.message.retain = RetainDelivery;
    delivery.message.release = ReleaseDelivery;
    delivery.buffer = std::move(buffer);
    ep->callbacks.on_message(ep->callbacks.user, &delivery.message);
  }
}

void Conn::Submit(std::unique_ptr<SendOp> op) {
  std::unique_lock<std::mutex> lock(send_mu);
  if (dead.load()) {
    lock.unlock();
    op->Finish(NewStatus(WEFT_UNAVAILABLE, "connection to " + peer + " is closed"));
    return;
  }
  if (writing) {
    queue.push_back(std::move(op));  // the write loop takes it in its turn
    return;
  }
  // Nothing is queued or in flight, so this message is next on the wire.
  if (!tls && WriteNow(*op)) {
    lock.unlock();
    op->Finish(nullptr);
    return;
  }
  queue.push_back(std::move(op));
  writing = true;
  lock.unlock();
  if (ep->OnIoThread()) {
    WriteNext();
    return;
  }
  std::lock_guard<std::mutex> post_lock(ep->post_mu);
  // A stopped endpoint closed this connection, which failed the queue.
  if (!ep->stopped.load()) asio::post(ep->io, [self = shared_from_this()] { self->WriteNext(); });
}

bool Conn::WriteNow(SendOp& op) {
  constexpr std::size_t kMaxSlices = 64;
  if (op.buffers.size() > kMaxSlices) return false;
  std::array<iovec, kMaxSlices> iov;
  std::size_t total = 0;
  for (std::size_t i = 0; i < op.buffers.size(); ++i) {
    iov[i].iov_base = const_cast<void*>(op.buffers[i].data());
    iov[i].iov_len = op.buffers[i].size();
    total += op.buffers[i].size();
  }
  msghdr header{};
  header.msg_iov = iov.data();
  header.msg_iovlen = op.buffers.size();
  ssize_t sent;
  do {
    sent = ::sendmsg(socket.native_handle(), &header, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  // EAGAIN: the socket's buffer is full. Any other error: the I/O thread's
  // write meets it again and closes the connection, saying why.
  if (sent <= 0) return false;
  if (static_cast<std::size_t>(sent) == total) return true;
  auto first = op.buffers.begin();
  auto left = static_cast<std::size_t>(sent);
  while (left >= first->size()) {
    left -= first->size();
    ++first;
  }
  op.buffers.erase(op.buffers.begin(), first);
  op.buffers.front() += left;
  return false;
}

void Conn::WriteNext() {
  SendOp* op;
  {
    std::lock_guard<std::mutex> lock(send_mu);
    if (closed || queue.empty()) {
      writing = false;
      return;
    }
    op = queue.front().get();  // popped only here, on this thread
  }
  auto self = shared_from_this();
  Write(op->buffers, TransferAllLarge(), [self](const boost::system::error_code& ec, std::size_t) {
    if (self->closed) return;  // Close finished the op already
    if (ec) {
      self->Fail(ec, "while sending a message", 0, 0);
      return;
    }
    std::unique_ptr<SendOp> sent;
    {
      std::lock_guard<std::mutex> lock(self->send_mu);
      sent = std::move(self->queue.front());
      self->queue.pop_front();
    }
    sent->Finish(nullptr);
    self->WriteNext();
  });
}

// Hands an accepted connection to the host, then reads from it (not
// before: the host may limit its first message in on_accept).
void Admit(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn) {
  conn->handle = new weft_connection_s{conn};
  state->callbacks.on_accept(state->callbacks.user, conn->handle, conn->peer.c_str());
  conn->StartRead();
}

}  // namespace weft::transports::tcp
