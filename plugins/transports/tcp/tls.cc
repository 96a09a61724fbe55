// TLS ([transports.tcp] tls = true): the context made from the options,
// and the server's and the client's side of the handshake.
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "tcp_internal.h"
#include "weft/sdk/log.h"

namespace weft::transports::tcp {
namespace {

std::string TlsError(const boost::system::error_code& ec) {
  std::string what = ec.message();
  if (ec.category() == asio::error::get_ssl_category()) {
    // OpenSSL's reason, e.g. "certificate verify failed".
    if (const char* reason = ERR_reason_error_string(ec.value()); reason != nullptr) what = reason;
  }
  return what;
}

}  // namespace

std::shared_ptr<asio::ssl::context> CurrentTls() {
  std::lock_guard<std::mutex> lock(g_options.tls_mutex);
  return g_options.tls;
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

}  // namespace weft::transports::tcp
