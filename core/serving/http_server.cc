#include "core/serving/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/serving/codec.h"

namespace weft::serving {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr uint32_t kHeaderLimit = 16 * 1024;
constexpr std::size_t kReadChunk = 64 * 1024;

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// The TLS context of [serving] tls_certificate, tls_private_key and tls_ca,
// with the checks the tcp transport's TLS makes (docs/serving.md, "HTTPS"):
// each file readable, the key the certificate's and readable by its owner
// only; a CA asks every client for a certificate it signed.
Expected<std::unique_ptr<net::ssl::context>> MakeTlsContext(const HttpServerOptions& o) {
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 | net::ssl::context::no_sslv3 |
                   net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1);
  if (o.tls_private_key.empty())
    return InvalidArgumentError("[serving] tls_certificate is set but tls_private_key is not");
  // Boost's own message for a file it cannot open is "asio.ssl error".
  for (const auto& [key, path] : {std::pair<const char*, const std::string&>{"tls_certificate", o.tls_certificate},
                                  {"tls_private_key", o.tls_private_key},
                                  {"tls_ca", o.tls_ca}}) {
    if (!path.empty() && access(path.c_str(), R_OK) != 0) {
      return InvalidArgumentError("[serving] ", key, " ", Quote(path), ": ", std::strerror(errno));
    }
  }
  beast::error_code ec;
  ctx->use_certificate_chain_file(o.tls_certificate, ec);
  if (ec) return InvalidArgumentError("[serving] tls_certificate ", Quote(o.tls_certificate), ": ", ec.message());
  struct stat st {};
  if (stat(o.tls_private_key.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return InvalidArgumentError("[serving] tls_private_key ", Quote(o.tls_private_key),
                                " may be read by others than its owner: chmod 600 it");
  }
  ctx->use_private_key_file(o.tls_private_key, net::ssl::context::pem, ec);
  // OpenSSL 3 compares a key of the certificate's type with it right here.
  const bool mismatch = ec && ec.category() == net::error::get_ssl_category() &&
                        ERR_GET_LIB(static_cast<unsigned long>(ec.value())) == ERR_LIB_X509 &&
                        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
  if (ec && !mismatch) {
    return InvalidArgumentError("[serving] tls_private_key ", Quote(o.tls_private_key), ": ", ec.message());
  }
  if (mismatch || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    return InvalidArgumentError("[serving] tls_private_key ", Quote(o.tls_private_key),
                                " is not the key of tls_certificate ", Quote(o.tls_certificate));
  }
  if (!o.tls_ca.empty()) {
    ctx->load_verify_file(o.tls_ca, ec);
    if (ec) return InvalidArgumentError("[serving] tls_ca ", Quote(o.tls_ca), ": ", ec.message());
    ctx->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
    // OpenSSL refuses to resume a TLS 1.2 session of a verified client
    // without a session id context.
    static constexpr unsigned char kSessionContext[] = "weft-model-server";
    SSL_CTX_set_session_id_context(ctx->native_handle(), kSessionContext, sizeof(kSessionContext) - 1);
  }
  return ctx;
}

// The TLS context, or nullptr for plain HTTP.
Expected<std::unique_ptr<net::ssl::context>> TlsContextFor(const HttpServerOptions& o) {
  if (!o.tls_certificate.empty()) return MakeTlsContext(o);
  if (!o.tls_private_key.empty() || !o.tls_ca.empty()) {
    return InvalidArgumentError("[serving] tls_private_key and tls_ca need tls_certificate");
  }
  return std::unique_ptr<net::ssl::context>();
}

Expected<net::ip::address> AddressOf(const HttpServerOptions& o) {
  beast::error_code ec;
  auto address = net::ip::make_address(o.host, ec);
  if (ec) return InvalidArgumentError("[serving] host ", Quote(o.host), " is not an IP address: ", ec.message());
  return address;
}

}  // namespace

Status HttpServer::CheckOptions(const HttpServerOptions& options) {
  if (auto tls = TlsContextFor(options); !tls.ok()) return tls.status();
  return AddressOf(options).status();
}

// What Shutdown asks of every open connection.
class Drainable {
 public:
  virtual ~Drainable() = default;
  virtual void Drain() = 0;
};

// The io_context is declared after what connections use in their
// destructors: handlers still queued when it goes hold connections.
struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> draining{false};
  std::mutex live_mutex;
  std::unordered_map<Drainable*, std::weak_ptr<Drainable>> live;
  std::mutex stop_mutex;
  std::condition_variable stopped_cv;
  bool stopped = false;
  net::io_context ioc;
  // Keeps the threads running while every connection waits for an answer
  // from a batch thread (no I/O pending): until Shutdown's wait is over.
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  tcp::acceptor acceptor{ioc};
  std::unique_ptr<net::ssl::context> tls;  // null: plain HTTP
  std::vector<std::thread> threads;

  void Accept();
};

// One client's connection, over a plain (beast::tcp_stream) or a TLS
// (TlsStream) stream.
template <class Stream>
class Connection : public Drainable, public std::enable_shared_from_this<Connection<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  Connection(tcp::socket&& socket, HttpServer::Impl* server) requires(!kTls)
      : peer_(PeerOf(socket)), stream_(std::move(socket)), server_(server) {
    buffer_.reserve(kReadChunk);
  }
  Connection(tcp::socket&& socket, HttpServer::Impl* server) requires(kTls)
      : peer_(PeerOf(socket)), stream_(std::move(socket), *server->tls), server_(server) {
    // Beast reads at most the buffer's free capacity at a time (512 bytes
    // for a new buffer, which the parser empties as it goes): a 600 KB
    // image then took 1,200 reads and 15 ms. 64 KiB takes ten.
    buffer_.reserve(kReadChunk);
  }
  ~Connection() override {
    std::lock_guard<std::mutex> lock(server_->live_mutex);
    server_->live.erase(this);
    server_->connections.fetch_sub(1);
  }

  void Start() {
    {
      std::lock_guard<std::mutex> lock(server_->live_mutex);
      server_->live[this] = this->weak_from_this();
    }
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->Lowest().expires_after(std::chrono::milliseconds(self->server_->options.read_timeout_ms));
        self->stream_.async_handshake(net::ssl::stream_base::server, [self](beast::error_code ec) {
          if (!ec) return self->Read();
          WEFT_LOG(INFO) << "model-server: refused a connection from " << self->peer_
                         << ": the TLS handshake failed: " << ec.message();
          self->Lowest().close();
        });
      } else {
        self->Read();
      }
    });
  }

  // From Shutdown: an idle connection closes now; a busy one after its
  // answer.
  void Drain() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (!self->busy_) self->Lowest().cancel();
    });
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // "IP:PORT", taken while the socket is open (a timed-out handshake has
  // closed it by the time it is logged).
  static std::string PeerOf(const tcp::socket& socket) {
    beast::error_code ec;
    const auto peer = socket.remote_endpoint(ec);
    return ec ? std::string("an unknown address") : StrCat(peer.address().to_string(), ":", peer.port());
  }

  void Read() {
    if (server_->draining.load()) return Close();
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(kHeaderLimit);
    Lowest().expires_after(std::chrono::milliseconds(server_->options.read_timeout_ms));
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Connection::OnRead, this->shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec == http::error::body_limit) {
      return Fail(413, StrCat("the request body is larger than the server's limit of ",
                              server_->options.max_body_bytes >> 20, " MiB ([serving] max_body_mb)"));
    }
    if (ec == http::error::header_limit) return Fail(431, "the request's headers are larger than 16 KiB");
    if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Fail(400, StrCat("malformed HTTP request: ", ec.message()));
    }
    if (ec) return Close();  // closed, reset, timed out (beast closed the socket) or cancelled
    Lowest().expires_never();
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.content_type = std::string(req[http::field::content_type]);
    request.inference_header_length = std::string(req["Inference-Header-Content-Length"]);
    request.request_timeout_ms = std::string(req["Request-Timeout-Ms"]);
    if (!server_->options.bearer_token.empty() &&
        req[http::field::authorization] != "Bearer " + server_->options.bearer_token) {
      HttpResponse res;
      res.status = 401;
      res.body = WriteError("this server asks for a bearer token: send the header Authorization: Bearer TOKEN");
      res.headers.emplace_back("WWW-Authenticate", "Bearer");
      return Write(std::move(res), false);
    }
    request.body = std::move(req.body());
    busy_ = true;
    server_->in_flight.fetch_add(1);
    server_->handler(std::move(request), [self = this->shared_from_this()](HttpResponse res) {
      net::post(self->stream_.get_executor(),
                [self, res = std::move(res)]() mutable { self->Write(std::move(res), true); });
    });
  }

  // An answer to a request that could not be read: then the connection
  // closes, since what follows on it cannot be trusted.
  void Fail(int status, const std::string& message) {
    keep_alive_ = false;
    linger_ = true;
    HttpResponse res;
    res.status = status;
    res.body = WriteError(message);
    Write(std::move(res), false);
  }

  void Write(HttpResponse res, bool handled) {
    response_.emplace();
    response_->version(11);
    response_->result(static_cast<unsigned>(res.status));
    response_->set(http::field::content_type, res.content_type);
    for (auto& [name, value] : res.headers) response_->set(name, value);
    response_->keep_alive(keep_alive_ && !server_->draining.load());
    response_->body() = std::move(res.body);
    response_->prepare_payload();
    http::async_write(
        stream_, *response_,
        [self = this->shared_from_this(), handled](beast::error_code ec, std::size_t) { self->OnWrite(ec, handled); });
  }

  void OnWrite(beast::error_code ec, bool handled) {
    const bool keep = response_->keep_alive();
    response_.reset();
    if (handled) {
      busy_ = false;
      server_->in_flight.fetch_sub(1);
    }
    if (ec || !keep) return linger_ && !ec ? Linger() : Close();
    Read();
  }

  // After refusing a request whose body is still arriving: stop sending,
  // then read and drop what the client still sends (up to 8 MiB or 1 s)
  // before closing, so that the kernel does not reset the connection
  // under the answer before the client has read it.
  void Linger() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().expires_after(std::chrono::seconds(1));
    Discard();
  }

  void Discard() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t bytes) {
                              self->discarded_ += bytes;
                              if (ec || self->discarded_ > (8u << 20)) return self->Lowest().close();
                              self->Discard();
                            });
  }

  void Close() {
    if constexpr (kTls) {
      // close_notify, then the socket (at most a second later).
      Lowest().expires_after(std::chrono::seconds(1));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) { self->Lowest().close(); });
    } else {
      beast::error_code ignored;
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      Lowest().close();
    }
  }

  std::string peer_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
  HttpServer::Impl* server_;
  bool keep_alive_ = true;
  bool busy_ = false;
  bool linger_ = false;
  std::size_t discarded_ = 0;
};

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      WEFT_LOG(WARNING) << "model-server: accept failed: " << ec.message();
    } else if (connections.load() >= options.max_connections) {
      beast::error_code ignored;
      socket.close(ignored);  // over [serving] max_connections: refused
    } else {
      connections.fetch_add(1);
      if (tls != nullptr) {
        std::make_shared<Connection<TlsStream>>(std::move(socket), this)->Start();
      } else {
        std::make_shared<Connection<beast::tcp_stream>>(std::move(socket), this)->Start();
      }
    }
    Accept();
  });
}

Expected<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  { WEFT_ASSIGN_OR_RETURN(impl->tls, TlsContextFor(options)); }
  WEFT_ASSIGN_OR_RETURN(const auto address, AddressOf(options));
  beast::error_code ec;
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return UnavailableError("cannot listen on ", options.host, ":", options.port, ": ", ec.message(),
                            ec == net::error::address_in_use ? " (another process has the port: choose another "
                                                               "with --http-port)"
                                                             : "");
  }
  impl->work.emplace(impl->ioc.get_executor());
  impl->Accept();
  Impl* raw = impl.get();
  for (int i = 0; i < std::max(1, options.threads); ++i) raw->threads.emplace_back([raw] { raw->ioc.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Shutdown(0); }

int HttpServer::port() const {
  beast::error_code ec;
  const auto endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

int64_t HttpServer::open_connections() const { return impl_->connections.load(); }
int64_t HttpServer::requests_in_flight() const { return impl_->in_flight.load(); }

void HttpServer::Shutdown(int64_t grace_ms) {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mutex);
    if (impl_->stopped) return;
  }
  impl_->draining.store(true);
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
  std::vector<std::shared_ptr<Drainable>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->live_mutex);
    for (auto& [raw, weak] : impl_->live) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) c->Drain();
  live.clear();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (impl_->in_flight.load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Let the last answers leave before the threads stop.
  const auto flush_until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min<int64_t>(grace_ms, 500));
  while (impl_->connections.load() > 0 && std::chrono::steady_clock::now() < flush_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  impl_->work.reset();
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  std::lock_guard<std::mutex> lock(impl_->stop_mutex);
  impl_->stopped = true;
  impl_->stopped_cv.notify_all();
}

void HttpServer::Wait() {
  std::unique_lock<std::mutex> lock(impl_->stop_mutex);
  impl_->stopped_cv.wait(lock, [this] { return impl_->stopped; });
}

}  // namespace weft::serving
