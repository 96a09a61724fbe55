// What the tcp transport's files share: the options, an endpoint's and a
// connection's state, a send and a received message's memory, and the
// functions one file calls in another.
//
// The tcp transport: weft_transport.h over TCP with Boost.Asio.
//
// One I/O thread per endpoint owns every socket of the endpoint; a
// connection's state is touched on that thread only, so callbacks for one
// connection never run concurrently, apart from its send queue, which is
// under Conn::send_mu because any thread may write a message directly.
// connection_close and endpoint_close run on the I/O thread (posted to it
// and waited for).
//
// Sending: the preamble, the header and every payload slice go out in one
// scatter/gather write (writev), with no copy of the payload. When nothing
// else is queued or being written on the connection (and it has no TLS),
// the sending thread writes the message itself, without waiting: a small
// message then costs one sendmsg and no hand-off to the I/O thread. What
// the socket does not take at once goes to the I/O thread's queue, which
// writes it and everything sent after it, in order (Conn::Submit).
// Receiving: each read takes what the socket has, up to 64 KiB, into the
// connection's staging buffer; messages are cut from it, each preamble
// checked (framing.h) before anything is allocated for its message, so a
// small message costs one recv and several that arrive together one for
// all. What a message has beyond the staged bytes is read straight into its
// final buffers, the payload 64-byte aligned from the host's allocator, so
// the host can retain it and use it as a tensor's memory without a copy.
//
// TLS ([transports.tcp] tls = true): every connection runs a mutual TLS
// handshake (Boost.Asio's ssl::stream over OpenSSL, TLS 1.3 at least, both
// sides presenting a certificate that the cluster's CA signed) before the
// host hears of it; reads and writes then go through the stream, which
// encrypts in records of 16 KiB (so a send is no longer zero-copy). See
// docs/distributed.md, "Security".
//
// The files: a connection's reads and writes are in connection.cc,
// endpoints and connecting in endpoint.cc, send in send.cc, TLS in tls.cc,
// addresses in address.cc and the plugin's table in tcp_plugin.cc.
#ifndef WEFT_PLUGINS_TRANSPORTS_TCP_TCP_INTERNAL_H_
#define WEFT_PLUGINS_TRANSPORTS_TCP_TCP_INTERNAL_H_

// Boost 1.74's asio uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
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
#include "weft/sdk/host.h"
#include "weft/sdk/status.h"
#include "weft/weft_transport.h"

namespace weft::transports::tcp {

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
extern Options g_options;  // defined in tcp_plugin.cc

[[noreturn]] inline void Fail(weft_code_t code, const std::string& message) { throw sdk::Error(code, message); }

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

}  // namespace weft::transports::tcp

struct weft_connection_s {
  std::shared_ptr<weft::transports::tcp::Conn> conn;
};
struct weft_endpoint_s {
  std::shared_ptr<weft::transports::tcp::EndpointState> state;
};

namespace weft::transports::tcp {

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
  // The sends not yet written, and whether the I/O thread's write loop
  // owns them (|writing|: a write is in flight or posted). Under send_mu,
  // which is also held while the socket is closed, so that a thread
  // writing directly never writes to a descriptor closed under it.
  std::mutex send_mu;
  std::deque<std::unique_ptr<SendOp>> queue;
  bool writing = false;
  // Bytes read but not yet taken by a message: stage[stage_begin,
  // stage_end).
  static constexpr std::size_t kStageBytes = std::size_t{64} << 10;
  std::unique_ptr<unsigned char[]> stage{new unsigned char[kStageBytes]};
  std::size_t stage_begin = 0, stage_end = 0;
  // With TLS, every read and write goes through this stream over |socket|.
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;
  std::shared_ptr<RecvBuffer> incoming;
  uint64_t incoming_size = 0;  // its header and payload bytes
  uint64_t incoming_have = 0;  // how many of them arrived
  // connection_set_max_message's limit; 0: the plugin's max_message_mb.
  std::atomic<uint64_t> max_message{0};

  void Configure();

  // Ends the connection: no more reads or writes; pending sends fail.
  // |notify| says whether the host hears of it through on_closed (not for
  // a close it asked for). Takes ownership of |status|.
  void Close(weft_status_t status, bool notify);

  void Fail(boost::system::error_code ec, const char* during, uint64_t got, uint64_t want);

  template <class Buffers, class Condition, class Handler>
  void Read(const Buffers& buffers, Condition condition, Handler&& handler) {
    if (tls) {
      asio::async_read(*tls, buffers, condition, std::forward<Handler>(handler));
    } else {
      asio::async_read(socket, buffers, condition, std::forward<Handler>(handler));
    }
  }
  template <class Handler>
  void ReadSome(asio::mutable_buffer buffer, Handler&& handler) {
    if (tls) {
      tls->async_read_some(buffer, std::forward<Handler>(handler));
    } else {
      socket.async_read_some(buffer, std::forward<Handler>(handler));
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

  // Cuts every whole message from the staged bytes and delivers it, then
  // reads more: into the stage, or straight into the buffers of a message
  // whose beginning is staged.
  void StartRead();
  // Begins the message whose preamble starts the staged bytes; false when
  // the connection was closed (a bad preamble, no memory).
  bool BeginMessage();
  // Copies staged bytes into the incoming message; true when it is whole.
  bool FillFromStage();
  void Deliver();
  // Sends |op| from any thread: written at once by this thread when the
  // connection is idle and the socket takes it whole, else queued for the
  // I/O thread. Messages leave in the order of Submit calls.
  void Submit(std::unique_ptr<SendOp> op);
  // The I/O thread's write loop: writes the queue's first message, then
  // the next, until the queue is empty.
  void WriteNext();
  // One non-blocking sendmsg of what is left of |op|; what was written is
  // dropped from its buffers. True when all of it went.
  bool WriteNow(SendOp& op);
};

// In connection.cc.
void Admit(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn);

// In tls.cc.
std::shared_ptr<asio::ssl::context> CurrentTls();
void AcceptTls(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn);
void ConnectTls(const std::shared_ptr<EndpointState>& state, const std::shared_ptr<Conn>& conn, const char* address,
                std::chrono::steady_clock::time_point deadline, int64_t timeout_ms);
std::shared_ptr<asio::ssl::context> MakeTls(const std::string& certificate, const std::string& key,
                                            const std::string& ca);

// The transport table's entry points (weft/sdk/tables.h).
struct Entry {
  // In endpoint.cc ...
  static weft_status_t EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                                    weft_endpoint_t* out_endpoint);
  static void EndpointClose(weft_endpoint_t endpoint);
  static weft_status_t EndpointAddress(weft_endpoint_t endpoint, char* buffer, size_t size);
  static weft_status_t ConnectionOpen(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                                      weft_connection_t* out_connection);
  // ... and in send.cc.
  static weft_status_t ConnectionSetMaxMessage(weft_connection_t connection, uint64_t max_bytes);
  static void ConnectionClose(weft_connection_t connection);
  static weft_status_t Send(weft_connection_t connection, const weft_message_t* message, weft_done_fn done, void* user);
};

}  // namespace weft::transports::tcp

#endif  // WEFT_PLUGINS_TRANSPORTS_TCP_TCP_INTERNAL_H_
