// The model server's HTTP/1.1 front (docs/serving.md): Boost.Beast on
// Boost.Asio, keep-alive, a bounded body, a read deadline per request (a
// slow or half-sent request is dropped without holding a thread), a cap on
// connections, an optional bearer token, optional TLS, and a graceful stop: accept no
// more, answer what is in flight, then return.
//
// Handlers answer asynchronously: they get the request and a Reply they
// may call from any thread, once.
#ifndef WEFT_CORE_SERVING_HTTP_SERVER_H_
#define WEFT_CORE_SERVING_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/base/status.h"

namespace weft::serving {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // the path and query, as sent
  std::string body;
  // Header values the handlers read ("" when absent).
  std::string content_type;
  std::string inference_header_length;  // Inference-Header-Content-Length
  std::string request_timeout_ms;       // Request-Timeout-Ms
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Extra headers (Retry-After, Inference-Header-Content-Length).
  std::vector<std::pair<std::string, std::string>> headers;
};

using Reply = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest&&, Reply)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: a free one
  int threads = 1;
  uint64_t max_body_bytes = 64ull << 20;
  int64_t read_timeout_ms = 30000;
  int64_t max_connections = 4096;
  std::string bearer_token;  // empty: none asked
  // TLS ([serving] tls_*, docs/serving.md): PEM files; an empty certificate
  // serves plain HTTP. With a CA, every client must present a certificate
  // it signed.
  std::string tls_certificate;
  std::string tls_private_key;
  std::string tls_ca;
};

class HttpServer {
 public:
  // Binds and listens (an error names the address when it cannot).
  static Expected<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandler handler);
  // What Start checks before it binds: the TLS files (readable, the key the
  // certificate's and its owner's only) and the host, so that a mistake is
  // found before the models load.
  static Status CheckOptions(const HttpServerOptions& options);
  ~HttpServer();

  int port() const;
  // Stops accepting, closes idle connections, waits up to |grace_ms| for
  // the requests in flight to be answered, then stops every thread.
  void Shutdown(int64_t grace_ms);
  // Blocks until Shutdown has finished.
  void Wait();

  int64_t open_connections() const;
  int64_t requests_in_flight() const;

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_HTTP_SERVER_H_
