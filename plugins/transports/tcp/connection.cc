// A connection's work on its endpoint's I/O thread: reading each message
// into its buffers and handing it to the host, writing the queued sends,
// and closing.
#include <array>
#include <memory>
#include <string>
#include <utility>

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
  dead = true;
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
  // The socket is closed, so the kernel no longer reads any send's
  // memory: every pending send can be finished now.
  std::deque<std::unique_ptr<SendOp>> pending;
  pending.swap(queue);
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
    if (queue.empty()) {
      Close(nullptr, true);  // orderly: the peer closed between messages, and nothing was lost
      return;
    }
    Close(NewStatus(WEFT_UNAVAILABLE, "connection with " + peer + " closed by the peer while " +
                                          std::to_string(queue.size()) + " message(s) to it were not yet sent"),
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
  if (closed) return;
  auto self = shared_from_this();
  Read(asio::buffer(preamble, kPreambleSize), asio::transfer_all(),
       [self](const boost::system::error_code& ec, std::size_t n) {
         if (ec) {
           if (ec == asio::error::eof && n == 0) {
             self->Fail(ec, nullptr, 0, 0);
           } else {
             self->Fail(ec, "in the middle of a message", n, kPreambleSize);
           }
           return;
         }
         self->OnPreamble();
       });
}

void Conn::OnPreamble() {
  Preamble p;
  const uint64_t plugin_limit = g_options.max_message_bytes.load(std::memory_order_relaxed);
  const uint64_t own = max_message.load(std::memory_order_relaxed);
  const std::string bad = own != 0 && own < plugin_limit
                              ? DecodePreamble(preamble, own, &p, "this connection's limit, set by the host")
                              : DecodePreamble(preamble, plugin_limit, &p);
  if (!bad.empty()) {
    Close(NewStatus(WEFT_DATA_LOSS, "malformed message from " + peer + ": " + bad), true);
    return;
  }
  incoming = std::make_shared<RecvBuffer>();
  incoming->header.resize(p.header_size);
  incoming->payload_size = p.payload_size;
  if (p.payload_size > 0) {
    incoming->payload = BufferCache::Get().Take(p.payload_size, &incoming->capacity);
    if (incoming->payload == nullptr) {
      Close(NewStatus(WEFT_RESOURCE_EXHAUSTED,
                      "out of memory for a message of " + std::to_string(p.payload_size) + " bytes from " + peer),
            true);
      return;
    }
  }
  incoming_size = uint64_t{p.header_size} + p.payload_size;
  if (incoming_size == 0) {
    Deliver();
    return;
  }
  std::array<asio::mutable_buffer, 2> buffers = {asio::buffer(incoming->header.data(), incoming->header.size()),
                                                 asio::buffer(incoming->payload, p.payload_size)};
  auto self = shared_from_this();
  Read(buffers, TransferAllLarge(), [self](const boost::system::error_code& ec, std::size_t n) {
    if (ec) {
      self->Fail(ec, "in the middle of a message", n, self->incoming_size);
      return;
    }
    self->Deliver();
  });
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
  StartRead();
}

void Conn::Enqueue(std::unique_ptr<SendOp> op) {
  if (closed) {
    op->Finish(NewStatus(WEFT_UNAVAILABLE, "connection to " + peer + " is closed"));
    return;
  }
  queue.push_back(std::move(op));
  if (!writing) WriteNext();
}

void Conn::WriteNext() {
  if (closed || queue.empty()) {
    writing = false;
    return;
  }
  writing = true;
  auto self = shared_from_this();
  Write(queue.front()->buffers, TransferAllLarge(), [self](const boost::system::error_code& ec, std::size_t) {
    if (self->closed) return;  // Close finished the op already
    if (ec) {
      self->writing = false;
      self->Fail(ec, "while sending a message", 0, 0);
      return;
    }
    std::unique_ptr<SendOp> op = std::move(self->queue.front());
    self->queue.pop_front();
    op->Finish(nullptr);
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
