// The tcp transport: weft_transport.h over TCP with Boost.Asio.
//
// One I/O thread per endpoint owns every socket of the endpoint; all
// connection state is touched on that thread only, so callbacks for one
// connection never run concurrently and need no locks. Calls from other
// threads (send, connection_close, endpoint_close) are posted to it.
//
// Sending: the preamble, the header and every payload slice go out in one
// scatter/gather async_write (writev), with no copy of the payload.
// Receiving: the 16-byte preamble is read first and checked (framing.h);
// then the header and the payload are read straight into their final
// buffers, the payload 64-byte aligned from the host's allocator, so the
// host can retain it and use it as a tensor's memory without a copy.
//
// TLS ([transports.tcp] tls = true): every connection runs a mutual TLS
// handshake (Boost.Asio's ssl::stream over OpenSSL, TLS 1.3 at least, both
// sides presenting a certificate that the cluster's CA signed) before the
// host hears of it; reads and writes then go through the stream, which
// encrypts in records of 16 KiB (so a send is no longer zero-copy). See
// docs/distributed.md, "Security".
// Boost 1.74's asio uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "framing.h"
#include "weft/sdk/plugin.h"

namespace weft::transports::tcp {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr uint64_t kPayloadAlignment = 64;

// Options, set by configure. One process may load the plugin for more than
// one host (each configures it), while endpoints of the first already run,
// so they are atomics: a value is read whole, never torn (found by TSan).
struct Options {
  std::atomic<uint64_t> max_message_bytes{uint64_t{4096} << 20};
  std::atomic<int> socket_buffer_bytes{0};  // 0: the kernel's autotuning
  std::atomic<int64_t> tls_handshake_timeout_ms{10000};
  // The TLS context when tls = true, else null; an endpoint takes the one
  // current when it opens.
  std::mutex tls_mutex;
  std::shared_ptr<asio::ssl::context> tls;
};
Options g_options;

std::shared_ptr<asio::ssl::context> CurrentTls() {
  std::lock_guard<std::mutex> lock(g_options.tls_mutex);
  return g_options.tls;
}

[[noreturn]] void Fail(weft_code_t code, const std::string& message) { throw sdk::Error(code, message); }

// "tcp://host:port", "host:port", "[::1]:port" -> host and port.
struct HostPort {
  std::string host;
  std::string port;
};
HostPort ParseAddress(const std::string& address, bool allow_port_zero) {
  std::string rest = address;
  if (rest.rfind("tcp://", 0) == 0) rest = rest.substr(6);
  if (rest.find("://") != std::string::npos) {
    Fail(WEFT_INVALID_ARGUMENT, "address '" + address + "' is not a tcp:// address");
  }
  HostPort hp;
  std::size_t colon;
  if (!rest.empty() && rest[0] == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      Fail(WEFT_INVALID_ARGUMENT, "address '" + address + "': expected [IPv6]:PORT");
    }
    hp.host = rest.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string::npos) {
      Fail(WEFT_INVALID_ARGUMENT, "address '" + address + "' has no port (expected HOST:PORT)");
    }
    hp.host = rest.substr(0, colon);
  }
  hp.port = rest.substr(colon + 1);
  if (hp.host.empty()) Fail(WEFT_INVALID_ARGUMENT, "address '" + address + "' has no host");
  if (hp.port.empty() || hp.port.size() > 5 || hp.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(hp.port) > 65535 || (!allow_port_zero && std::stoi(hp.port) == 0)) {
    Fail(WEFT_INVALID_ARGUMENT, "address '" + address + "': port '" + hp.port + "' is not a number in " +
                                    (allow_port_zero ? "0" : "1") + "..65535");
  }
  return hp;
}

std::string FormatEndpoint(const tcp::endpoint& e) {
  const std::string host = e.address().to_string();
  return "tcp://" + (e.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(e.port());
}

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

struct Conn;

// What one endpoint shares with its connections. Lives as long as any of
// them: a connection handed to the host may be released after
// endpoint_close.
struct EndpointState {
  asio::io_context io{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::optional<tcp::acceptor> acceptor;
  weft_transport_callbacks_t callbacks{};
  std::thread thread;
  std::atomic<std::thread::id> io_thread_id{};
  // TLS for every connection of this endpoint, or null.
  std::shared_ptr<asio::ssl::context> tls;
  // After endpoint_close the I/O thread is gone; work on connections then
  // runs on the caller's thread under this lock.
  std::mutex closed_mu;
  // Held by a send that posts to the I/O thread and by endpoint_close as it
  // sets |stopped|: a send that found the endpoint open has posted before
  // the close's last run of the queue, so nothing is left in it (a handler
  // left there holds its connection, and through it this state, forever).
  std::mutex post_mu;
  std::atomic<bool> stopped{false};
  // I/O thread only.
  std::set<std::shared_ptr<Conn>> conns;
  bool closing = false;

  bool OnIoThread() const { return std::this_thread::get_id() == io_thread_id.load(); }

  // Runs |fn| on the I/O thread and waits for it (inline when already
  // there, or when the thread is gone).
  template <class F>
  void RunAndWait(F&& fn) {
    if (OnIoThread()) {
      fn();
      return;
    }
    if (!stopped.load()) {
      std::promise<void> done;
      auto future = done.get_future();
      asio::post(io, [&] {
        fn();
        done.set_value();
      });
      // If the thread stops before running it, the posted work is dropped
      // and the wait times out; run it here then.
      while (future.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
        if (stopped.load()) break;
      }
      if (future.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return;
    }
    std::lock_guard<std::mutex> lock(closed_mu);
    fn();
  }
};

struct SendOp {
  unsigned char preamble[kPreambleSize];
  std::vector<asio::const_buffer> buffers;
  weft_done_fn done = nullptr;
  void* user = nullptr;
  void Finish(weft_status_t status) {
    weft_done_fn fn = done;
    done = nullptr;
    if (fn != nullptr) {
      fn(user, status);
    } else if (status != nullptr) {
      sdk::host()->status_free(status);
    }
  }
};

// A received message's memory: the header, and the payload from the
// host's allocator. Shared by the delivery and every retain token.
// Large receive buffers, kept for reuse once released. Fresh memory costs
// a page fault per 4 KiB the first time the kernel writes it, and on a
// virtual machine that is most of the cost of receiving a big tensor
// (measured: 64 MiB messages at 0.18 GB/s with a new buffer each, see
// BENCHMARKS.md); a training step receives tensors of the same sizes again
// and again. Buffers of at least kMinCached bytes are cached, up to
// kCacheBytes in all, and reused for a message of at most their size and
// more than half of it.
class BufferCache {
 public:
  static constexpr uint64_t kMinCached = uint64_t{1} << 20;
  static constexpr uint64_t kCacheBytes = uint64_t{512} << 20;

  static BufferCache& Get() {
    static BufferCache* cache = new BufferCache();  // lives as long as the plugin
    return *cache;
  }
  // A buffer of at least |size| bytes; its capacity in |*capacity|.
  void* Take(uint64_t size, uint64_t* capacity) {
    if (size >= kMinCached) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.lower_bound(size);
      if (it != free_.end() && it->first / 2 < size) {
        void* p = it->second;
        *capacity = it->first;
        held_ -= it->first;
        free_.erase(it);
        return p;
      }
    }
    *capacity = size;
    return sdk::host()->host_alloc(size, kPayloadAlignment);
  }
  void Give(void* p, uint64_t capacity) {
    if (capacity >= kMinCached && capacity <= kCacheBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      // Make room by dropping the biggest first.
      while (held_ + capacity > kCacheBytes && !free_.empty()) {
        auto last = std::prev(free_.end());
        held_ -= last->first;
        sdk::host()->host_free(last->second);
        free_.erase(last);
      }
      free_.emplace(capacity, p);
      held_ += capacity;
      return;
    }
    sdk::host()->host_free(p);
  }

 private:
  std::mutex mutex_;
  std::multimap<uint64_t, void*> free_;
  uint64_t held_ = 0;
};

struct RecvBuffer {
  std::vector<unsigned char> header;
  void* payload = nullptr;
  uint64_t payload_size = 0;
  uint64_t capacity = 0;
  RecvBuffer() = default;
  RecvBuffer(const RecvBuffer&) = delete;
  RecvBuffer& operator=(const RecvBuffer&) = delete;
  ~RecvBuffer() {
    if (payload != nullptr) BufferCache::Get().Give(payload, capacity);
  }
};

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
}  // namespace weft::transports::tcp

struct weft_connection_s {
  std::shared_ptr<weft::transports::tcp::Conn> conn;
};
struct weft_endpoint_s {
  std::shared_ptr<weft::transports::tcp::EndpointState> state;
};

namespace weft::transports::tcp {
namespace {

struct Conn : std::enable_shared_from_this<Conn> {
  Conn(std::shared_ptr<EndpointState> endpoint, std::string peer_address)
      : ep(std::move(endpoint)), socket(ep->io), peer(std::move(peer_address)) {}

  std::shared_ptr<EndpointState> ep;
  tcp::socket socket;
  std::string peer;
  // Set from any thread once the connection can carry nothing more.
  std::atomic<bool> dead{false};
  // I/O thread only (or under ep->closed_mu once the thread is gone).
  weft_connection_s* handle = nullptr;  // null once the host released it
  bool closed = false;
  std::deque<std::unique_ptr<SendOp>> queue;
  bool writing = false;
  unsigned char preamble[kPreambleSize];
  // With TLS, every read and write goes through this stream over |socket|.
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  std::shared_ptr<RecvBuffer> incoming;
  uint64_t incoming_size = 0;
  // connection_set_max_message's limit; 0: the plugin's max_message_mb.
  std::atomic<uint64_t> max_message{0};

  void Configure() {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    socket.set_option(asio::socket_base::keep_alive(true), ignored);
    if (const int buffer = g_options.socket_buffer_bytes.load(std::memory_order_relaxed); buffer > 0) {
      socket.set_option(asio::socket_base::send_buffer_size(buffer), ignored);
      socket.set_option(asio::socket_base::receive_buffer_size(buffer), ignored);
    }
  }

  // Ends the connection: no more reads or writes; pending sends fail.
  // |notify| says whether the host hears of it through on_closed (not for
  // a close it asked for). Takes ownership of |status|.
  void Close(weft_status_t status, bool notify) {
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

  void Fail(boost::system::error_code ec, const char* during, uint64_t got, uint64_t want) {
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

  template <class Buffers, class Condition, class Handler>
  void Read(const Buffers& buffers, Condition condition, Handler&& handler) {
    if (tls) {
      asio::async_read(*tls, buffers, condition, std::forward<Handler>(handler));
    } else {
      asio::async_read(socket, buffers, condition, std::forward<Handler>(handler));
    }
  }
  template <class Buffers, class Condition, class Handler>
  void Write(const Buffers& buffers, Condition condition, Handler&& handler) {
    if (tls) {
      asio::async_write(*tls, buffers, condition, std::forward<Handler>(handler));
    } else {
      asio::async_write(socket, buffers, condition, std::forward<Handler>(handler));
    }
  }

  void StartRead() {
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

  void OnPreamble() {
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

  void Deliver() {
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

  void Enqueue(std::unique_ptr<SendOp> op) {
    if (closed) {
      op->Finish(NewStatus(WEFT_UNAVAILABLE, "connection to " + peer + " is closed"));
      return;
    }
    queue.push_back(std::move(op));
    if (!writing) WriteNext();
  }

  void WriteNext() {
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
};

EndpointState* StateOf(weft_endpoint_t endpoint) { return endpoint->state.get(); }

// Hands an accepted connection to the host, then reads from it (not
// before: the host may limit its first message in on_accept).
void Admit(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn) {
  conn->handle = new weft_connection_s{conn};
  state->callbacks.on_accept(state->callbacks.user, conn->handle, conn->peer.c_str());
  conn->StartRead();
}

std::string TlsError(const boost::system::error_code& ec) {
  std::string what = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    // OpenSSL's reason, e.g. "certificate verify failed".
    if (const char* reason = ERR_reason_error_string(ec.value()); reason != nullptr) what = reason;
  }
  return what;
}

// The server's side of the TLS handshake; the host hears of the
// connection only once it succeeded. A peer that fails it, or says
// nothing for tls_handshake_timeout_ms, is logged and dropped.
void AcceptTls(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn) {
  conn->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(conn->socket, *state->tls);
  const int64_t timeout_ms = g_options.tls_handshake_timeout_ms.load(std::memory_order_relaxed);
  auto timer = std::make_shared<asio::steady_timer>(state->io, std::chrono::milliseconds(timeout_ms));
  auto timed_out = std::make_shared<bool>(false);
  timer->async_wait([conn, timed_out](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the handshake ended first
    *timed_out = true;
    boost::system::error_code ignored;
    conn->socket.close(ignored);
  });
  conn->tls->async_handshake(
      asio::ssl::stream_base::server, [state, conn, timer, timed_out, timeout_ms](const boost::system::error_code& ec) {
        timer->cancel();
        if (conn->closed || state->closing) return;
        if (ec) {
          WEFT_SDK_LOG(WARNING) << "refused a connection from " << conn->peer << ": "
                                << (*timed_out ? "no TLS handshake within " + std::to_string(timeout_ms) +
                                                     " ms ([transports.tcp] tls_handshake_timeout_ms)"
                                               : "the TLS handshake failed: " + TlsError(ec))
                                << "; nothing was read from it";
          conn->Close(nullptr, /*notify=*/false);
          return;
        }
        Admit(state, conn);
      });
}

void StartAccept(const std::shared_ptr<EndpointState>& ep) {
  if (!ep->acceptor || ep->closing) return;
  ep->acceptor->async_accept(
      [weak = std::weak_ptr<EndpointState>(ep)](const boost::system::error_code& ec, tcp::socket socket) {
        auto state = weak.lock();
        if (!state || state->closing) return;
        if (!ec) {
          boost::system::error_code peer_ec;
          const tcp::endpoint remote = socket.remote_endpoint(peer_ec);
          const std::string peer = peer_ec ? std::string("an unknown peer") : FormatEndpoint(remote);
          auto conn = std::make_shared<Conn>(state, peer);
          conn->socket = std::move(socket);
          conn->Configure();
          state->conns.insert(conn);
          if (state->tls) {
            AcceptTls(state, conn);
          } else {
            Admit(state, conn);
          }
        } else if (ec == asio::error::operation_aborted) {
          return;
        } else {
          WEFT_SDK_LOG(WARNING) << "accept failed: " << ec.message();
          if (ec == asio::error::no_descriptors) {
            // Out of file descriptors: pause instead of spinning.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }
        StartAccept(state);
      });
}

void CheckCallbacks(const weft_transport_callbacks_t* callbacks, bool listening) {
  if (callbacks == nullptr || callbacks->struct_size < WEFT_TRANSPORT_CALLBACKS_SIZE_V1_0) {
    Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: callbacks missing or smaller than ABI 1.0");
  }
  if (callbacks->on_message == nullptr || callbacks->on_closed == nullptr) {
    Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: on_message and on_closed are required");
  }
  if (listening && callbacks->on_accept == nullptr) {
    Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: a listening endpoint needs on_accept");
  }
}

weft_status_t EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                           weft_endpoint_t* out_endpoint) {
  return sdk::Guard([&] {
    if (out_endpoint == nullptr) Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: out_endpoint is null");
    *out_endpoint = nullptr;
    CheckCallbacks(callbacks, listen_address != nullptr);
    auto state = std::make_shared<EndpointState>();
    state->tls = CurrentTls();
    std::memcpy(&state->callbacks, callbacks, std::min(sizeof(weft_transport_callbacks_t), callbacks->struct_size));
    state->callbacks.struct_size = sizeof(weft_transport_callbacks_t);
    if (listen_address != nullptr) {
      const HostPort hp = ParseAddress(listen_address, /*allow_port_zero=*/true);
      boost::system::error_code ec;
      tcp::resolver resolver(state->io);
      auto results = resolver.resolve(hp.host, hp.port, tcp::resolver::passive | tcp::resolver::numeric_service, ec);
      if (ec || results.empty()) {
        Fail(WEFT_INVALID_ARGUMENT, "cannot listen on '" + std::string(listen_address) + "': host '" + hp.host +
                                        "' does not resolve (" + ec.message() + ")");
      }
      const tcp::endpoint where = results.begin()->endpoint();
      tcp::acceptor acceptor(state->io);
      acceptor.open(where.protocol(), ec);
      if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
      if (!ec) acceptor.bind(where, ec);
      if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        std::string message = "cannot listen on " + FormatEndpoint(where) + ": " + ec.message();
        if (ec == asio::error::address_in_use) {
          message +=
              " (another process, perhaps a task of another cluster, listens there; "
              "choose another port)";
        }
        Fail(ec == asio::error::address_in_use ? WEFT_ALREADY_EXISTS : WEFT_UNAVAILABLE, message);
      }
      state->acceptor.emplace(std::move(acceptor));
    }
    state->work.emplace(state->io.get_executor());
    std::promise<void> started;
    auto started_future = started.get_future();
    state->thread = std::thread([raw = state.get(), &started] {
      raw->io_thread_id = std::this_thread::get_id();
      started.set_value();
      for (;;) {
        try {
          raw->io.run();
          break;
        } catch (const std::exception& e) {
          // A callback threw through the guard-free path: log and go on.
          WEFT_SDK_LOG(ERROR) << "tcp transport I/O thread: " << e.what();
        }
      }
    });
    started_future.wait();
    asio::post(state->io, [state] { StartAccept(state); });
    *out_endpoint = new weft_endpoint_s{std::move(state)};
  });
}

void EndpointClose(weft_endpoint_t endpoint) {
  sdk::GuardVoid("tcp endpoint_close", [&] {
    if (endpoint == nullptr) return;
    std::shared_ptr<EndpointState> state = endpoint->state;
    state->RunAndWait([&] {
      state->closing = true;
      boost::system::error_code ignored;
      if (state->acceptor) state->acceptor->close(ignored);
      std::set<std::shared_ptr<Conn>> conns;
      conns.swap(state->conns);
      for (const auto& conn : conns) conn->Close(nullptr, /*notify=*/false);
      state->work.reset();
      state->io.stop();
    });
    if (state->OnIoThread()) {
      // Closed from one of its own callbacks: the thread ends when the
      // callback returns.
      state->thread.detach();
    } else {
      if (state->thread.joinable()) state->thread.join();
      // Handlers still queued hold their connections, and through them
      // this state: run them out here (their sockets are closed, so they
      // only end, and a send posted before the close finishes with an
      // error), before endpoint_close returns.
      state->io.restart();
      state->io.poll();
    }
    {
      std::lock_guard<std::mutex> lock(state->post_mu);
      state->stopped = true;
    }
    if (!state->OnIoThread()) {
      // Sends posted between the run above and |stopped|.
      state->io.restart();
      state->io.poll();
    }
    delete endpoint;
  });
}

weft_status_t EndpointAddress(weft_endpoint_t endpoint, char* buffer, size_t size) {
  return sdk::Guard([&] {
    if (endpoint == nullptr || buffer == nullptr) Fail(WEFT_INVALID_ARGUMENT, "endpoint_address: null argument");
    EndpointState* state = StateOf(endpoint);
    if (!state->acceptor) Fail(WEFT_FAILED_PRECONDITION, "the endpoint does not listen (opened with no address)");
    boost::system::error_code ec;
    const std::string address = FormatEndpoint(state->acceptor->local_endpoint(ec));
    if (ec) Fail(WEFT_UNAVAILABLE, "cannot read the listening address: " + ec.message());
    if (address.size() + 1 > size) {
      Fail(WEFT_RESOURCE_EXHAUSTED, "the address '" + address + "' needs " + std::to_string(address.size() + 1) +
                                        " bytes, the buffer has " + std::to_string(size));
    }
    std::memcpy(buffer, address.c_str(), address.size() + 1);
  });
}

// The client's side of the TLS handshake, on the endpoint's thread; the
// caller waits until |deadline|.
void ConnectTls(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn, const char* address,
                std::chrono::steady_clock::time_point deadline, int64_t timeout_ms) {
  conn->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(conn->socket, *state->tls);
  auto done = std::make_shared<std::promise<boost::system::error_code>>();
  auto future = done->get_future();
  asio::post(state->io, [conn, done] {
    conn->tls->async_handshake(asio::ssl::stream_base::client,
                               [done, conn](const boost::system::error_code& ec) { done->set_value(ec); });
  });
  if (future.wait_until(deadline) != std::future_status::ready) {
    state->RunAndWait([&] {
      boost::system::error_code ignored;
      conn->socket.close(ignored);
    });
    // The handshake ends with the socket (unless the endpoint's thread is
    // gone, and the handler with it).
    future.wait_for(std::chrono::seconds(1));
    Fail(WEFT_DEADLINE_EXCEEDED, "timed out after " + std::to_string(timeout_ms) + " ms in the TLS handshake with " +
                                     std::string(address) + " (does it have tls = true in [transports.tcp]?)");
  }
  const boost::system::error_code ec = future.get();
  if (ec) {
    state->RunAndWait([&] {
      boost::system::error_code ignored;
      conn->socket.close(ignored);
    });
    const bool closed =
        ec == asio::error::eof || ec == asio::ssl::error::stream_truncated || ec == asio::error::connection_reset;
    // A certificate refused either way is final; a task that hung up may
    // be busy, and is tried again.
    Fail(closed ? WEFT_UNAVAILABLE : WEFT_UNAUTHENTICATED,
         "the TLS handshake with " + std::string(address) + " failed: " + TlsError(ec) +
             (closed ? " (the task closed the connection: does it have tls = true, and a certificate from the same "
                       "CA?)"
                     : ""));
  }
}

// Connects on a private io_context in the caller's thread (so it works
// from a callback too), then hands the socket to the endpoint's thread.
weft_status_t ConnectionOpen(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                             weft_connection_t* out_connection) {
  return sdk::Guard([&] {
    if (endpoint == nullptr || address == nullptr || out_connection == nullptr) {
      Fail(WEFT_INVALID_ARGUMENT, "connection_open: null argument");
    }
    *out_connection = nullptr;
    const HostPort hp = ParseAddress(address, /*allow_port_zero=*/false);
    std::shared_ptr<EndpointState> state = endpoint->state;
    if (state->closing) Fail(WEFT_FAILED_PRECONDITION, "connection_open on a closed endpoint");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));

    asio::io_context io(1);
    tcp::resolver resolver(io);
    tcp::socket socket(io);
    boost::system::error_code result = asio::error::would_block;
    bool resolved = false;
    resolver.async_resolve(hp.host, hp.port, tcp::resolver::numeric_service,
                           [&](const boost::system::error_code& ec, tcp::resolver::results_type results) {
                             if (ec) {
                               result = ec;
                               return;
                             }
                             resolved = true;
                             asio::async_connect(
                                 socket, results,
                                 [&](const boost::system::error_code& cec, const tcp::endpoint&) { result = cec; });
                           });
    io.run_until(deadline);
    if (result == asio::error::would_block) {
      const std::string phase = resolved ? "connecting to" : "resolving";
      Fail(WEFT_DEADLINE_EXCEEDED, "timed out after " + std::to_string(timeout_ms) + " ms " + phase + " " +
                                       std::string(address) + " (is the task up, and the address right?)");
    }
    if (result) {
      if (!resolved) {
        Fail(WEFT_UNAVAILABLE,
             "cannot resolve host '" + hp.host + "' of " + std::string(address) + ": " + result.message());
      }
      Fail(WEFT_UNAVAILABLE, "cannot connect to " + std::string(address) + ": " + result.message() +
                                 (result == asio::error::connection_refused ? " (nothing listens there yet?)" : ""));
    }
    boost::system::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    const auto protocol = remote.protocol();
    const int fd = socket.release(ec);
    if (ec) Fail(WEFT_INTERNAL, "cannot take the connected socket: " + ec.message());
    auto conn = std::make_shared<Conn>(state, std::string(address));
    conn->socket.assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      Fail(WEFT_INTERNAL, "cannot adopt the connected socket: " + ec.message());
    }
    conn->Configure();
    if (state->tls) {
      // However little of the caller's time is left, the handshake gets a
      // second: a connection attempt cut short mid-handshake helps nobody.
      const auto tls_deadline = std::max(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      ConnectTls(state, conn, address, tls_deadline,
                 std::chrono::duration_cast<std::chrono::milliseconds>(tls_deadline - std::chrono::steady_clock::now())
                     .count());
    }
    auto* handle = new weft_connection_s{conn};
    conn->handle = handle;
    bool registered = false;
    state->RunAndWait([&] {
      if (state->closing) return;
      state->conns.insert(conn);
      conn->StartRead();
      registered = true;
    });
    if (!registered) {
      conn->handle = nullptr;
      delete handle;
      Fail(WEFT_FAILED_PRECONDITION, "the endpoint was closed while connecting to " + std::string(address));
    }
    *out_connection = handle;
  });
}

weft_status_t ConnectionSetMaxMessage(weft_connection_t connection, uint64_t max_bytes) {
  return sdk::Guard([&] {
    if (connection == nullptr) Fail(WEFT_INVALID_ARGUMENT, "connection_set_max_message: connection is NULL");
    // Read by the I/O thread at the next preamble; on_accept runs before
    // the first read, so a limit set there covers the first message.
    connection->conn->max_message.store(max_bytes, std::memory_order_relaxed);
  });
}

void ConnectionClose(weft_connection_t connection) {
  sdk::GuardVoid("tcp connection_close", [&] {
    if (connection == nullptr) return;
    std::shared_ptr<Conn> conn = connection->conn;
    conn->dead = true;
    conn->ep->RunAndWait([&] {
      conn->handle = nullptr;
      conn->Close(nullptr, /*notify=*/false);
    });
    delete connection;
  });
}

weft_status_t Send(weft_connection_t connection, const weft_message_t* message, weft_done_fn done, void* user) {
  return sdk::Guard([&] {
    if (connection == nullptr || message == nullptr || done == nullptr) {
      Fail(WEFT_INVALID_ARGUMENT, "send: null argument");
    }
    if (message->struct_size < WEFT_MESSAGE_SIZE_V1_0) {
      Fail(WEFT_INVALID_ARGUMENT, "send: weft_message_t is smaller than ABI 1.0");
    }
    std::shared_ptr<Conn> conn = connection->conn;
    if (conn->dead.load()) Fail(WEFT_UNAVAILABLE, "connection to " + conn->peer + " is closed");
    if (message->header_size > 0 && message->header == nullptr) Fail(WEFT_INVALID_ARGUMENT, "send: header is null");
    if (message->num_slices > 0 && (message->slice_data == nullptr || message->slice_sizes == nullptr)) {
      Fail(WEFT_INVALID_ARGUMENT, "send: slices are null");
    }
    uint64_t payload = 0;
    const uint64_t limit = g_options.max_message_bytes.load(std::memory_order_relaxed);
    for (size_t i = 0; i < message->num_slices; ++i) {
      const uint64_t n = message->slice_sizes[i];
      if (n > 0 && message->slice_data[i] == nullptr) {
        Fail(WEFT_INVALID_ARGUMENT, "send: slice " + std::to_string(i) + " is null");
      }
      if (n > limit - payload) {
        Fail(WEFT_INVALID_ARGUMENT, "send: the payload exceeds the limit of " + std::to_string(limit) +
                                        " bytes ([transports.tcp] max_message_mb)");
      }
      payload += n;
    }
    if (message->header_size > limit - payload || message->header_size > UINT32_MAX) {
      Fail(WEFT_INVALID_ARGUMENT,
           "send: the header of " + std::to_string(message->header_size) + " bytes makes the message exceed the limit");
    }
    auto op = std::make_unique<SendOp>();
    EncodePreamble(static_cast<uint32_t>(message->header_size), payload, op->preamble);
    op->buffers.reserve(2 + message->num_slices);
    op->buffers.emplace_back(op->preamble, kPreambleSize);
    if (message->header_size > 0) op->buffers.emplace_back(message->header, message->header_size);
    for (size_t i = 0; i < message->num_slices; ++i) {
      if (message->slice_sizes[i] > 0) op->buffers.emplace_back(message->slice_data[i], message->slice_sizes[i]);
    }
    op->done = done;
    op->user = user;
    EndpointState* state = conn->ep.get();
    if (state->OnIoThread()) {
      conn->Enqueue(std::move(op));
    } else {
      std::lock_guard<std::mutex> lock(state->post_mu);
      if (state->stopped.load()) {
        Fail(WEFT_UNAVAILABLE, "connection to " + conn->peer + " is closed (its endpoint was closed)");
      }
      asio::post(state->io, [conn, raw = op.release()] { conn->Enqueue(std::unique_ptr<SendOp>(raw)); });
    }
  });
}

const weft_option_def_t kOptions[] = {
    {sizeof(weft_option_def_t), "max_message_mb", WEFT_OPTION_INT, "4096",
     "The largest message (header and payload) accepted or sent, in MiB; a peer announcing a larger one is "
     "disconnected before anything is allocated.",
     1, 1, 1, 1 << 20, nullptr, 0},
    {sizeof(weft_option_def_t), "socket_buffer_kb", WEFT_OPTION_INT, "0",
     "SO_SNDBUF and SO_RCVBUF of every connection, in KiB; 0 leaves them to the kernel's autotuning "
     "(measured fastest on loopback, see BENCHMARKS.md).",
     1, 0, 1, 1 << 20, nullptr, 0},
    {sizeof(weft_option_def_t), "tls", WEFT_OPTION_BOOL, "false",
     "Encrypt every connection with TLS 1.3 (OpenSSL), both sides presenting a certificate the cluster's CA "
     "signed (tls_certificate, tls_private_key, tls_ca). Every task and client of a cluster must agree.",
     0, 0, 0, 0, nullptr, 0},
    {sizeof(weft_option_def_t), "tls_certificate", WEFT_OPTION_STRING, "\"\"",
     "tls: this machine's certificate chain, PEM.", 0, 0, 0, 0, nullptr, 0},
    {sizeof(weft_option_def_t), "tls_private_key", WEFT_OPTION_STRING, "\"\"",
     "tls: the private key of tls_certificate, PEM; only its owner may read it.", 0, 0, 0, 0, nullptr, 0},
    {sizeof(weft_option_def_t), "tls_ca", WEFT_OPTION_STRING, "\"\"",
     "tls: the CA certificate(s), PEM, that a peer's certificate must chain to.", 0, 0, 0, 0, nullptr, 0},
    {sizeof(weft_option_def_t), "tls_handshake_timeout_ms", WEFT_OPTION_INT, "10000",
     "tls: an accepted connection that has not completed its TLS handshake by then is dropped.", 1, 1, 0, 0, nullptr,
     0},
};

// The TLS context of tls = true, or why it cannot be made (naming the
// option and the file).
std::shared_ptr<asio::ssl::context> MakeTls(const std::string& certificate, const std::string& key,
                                            const std::string& ca) {
  for (const auto& [option, path] : {std::pair<const char*, const std::string&>{"tls_certificate", certificate},
                                     {"tls_private_key", key},
                                     {"tls_ca", ca}}) {
    if (path.empty()) {
      Fail(WEFT_INVALID_ARGUMENT, std::string("[transports.tcp] tls = true needs ") + option +
                                      " (a PEM file); docs/distributed.md, \"Security\", shows how to make them");
    }
    if (::access(path.c_str(), R_OK) != 0) {
      Fail(WEFT_INVALID_ARGUMENT,
           std::string("[transports.tcp] ") + option + " '" + path + "' cannot be read: " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::stat(key.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    Fail(WEFT_PERMISSION_DENIED, "[transports.tcp] tls_private_key '" + key + "' may be read by others (mode " + mode +
                                     "); run `chmod 600 " + key + "`");
  }
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_3_VERSION);
  boost::system::error_code ec;
  auto check = [&](const char* option, const std::string& path) {
    if (ec) {
      Fail(WEFT_INVALID_ARGUMENT,
           std::string("[transports.tcp] ") + option + " '" + path + "' is not usable: " + TlsError(ec));
    }
  };
  context->use_certificate_chain_file(certificate, ec);
  check("tls_certificate", certificate);
  context->use_private_key_file(key, asio::ssl::context::pem, ec);
  check("tls_private_key", key);
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    Fail(WEFT_INVALID_ARGUMENT,
         "[transports.tcp] tls_private_key '" + key + "' is not the key of tls_certificate '" + certificate + "'");
  }
  context->load_verify_file(ca, ec);
  check("tls_ca", ca);
  context->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  return context;
}

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    g_options.max_message_bytes.store(static_cast<uint64_t>(sdk::GetInt(options, "max_message_mb")) << 20,
                                      std::memory_order_relaxed);
    g_options.socket_buffer_bytes.store(static_cast<int>(sdk::GetInt(options, "socket_buffer_kb") * 1024),
                                        std::memory_order_relaxed);
    g_options.tls_handshake_timeout_ms.store(sdk::GetInt(options, "tls_handshake_timeout_ms"),
                                             std::memory_order_relaxed);
    std::shared_ptr<asio::ssl::context> tls;
    if (sdk::GetBool(options, "tls")) {
      tls = MakeTls(sdk::GetString(options, "tls_certificate"), sdk::GetString(options, "tls_private_key"),
                    sdk::GetString(options, "tls_ca"));
    }
    std::lock_guard<std::mutex> lock(g_options.tls_mutex);
    g_options.tls = std::move(tls);
  });
}

const weft_plugin_t* Describe() {
  static const weft_transport_plugin_t transport = [] {
    auto t = sdk::Make<weft_transport_plugin_t>();
    t.scheme = "tcp";
    t.endpoint_open = EndpointOpen;
    t.endpoint_close = EndpointClose;
    t.endpoint_address = EndpointAddress;
    t.connection_open = ConnectionOpen;
    t.connection_close = ConnectionClose;
    t.send = Send;
    t.connection_set_max_message = ConnectionSetMaxMessage;
    return t;
  }();
  static const weft_plugin_t plugin = [] {
    auto p = sdk::Make<weft_plugin_t>();
    p.abi_major = WEFT_ABI_VERSION_MAJOR;
    p.abi_minor = WEFT_ABI_VERSION_MINOR;
    p.name = "tcp";
    p.version = "0.1.0";
    p.description = "TCP over Boost.Asio: scatter/gather sends, zero-copy receives into aligned buffers";
    p.kind = WEFT_PLUGIN_TRANSPORT;
    p.transport = &transport;
    p.options = kOptions;
    p.num_options = sizeof kOptions / sizeof kOptions[0];
    p.configure = Configure;
    return p;
  }();
  return &plugin;
}

}  // namespace
}  // namespace weft::transports::tcp

WEFT_SDK_DEFINE_PLUGIN(weft::transports::tcp::Describe)
