// The tcp transport plugin: its options, configure, and the table of the
// transport's entry points. The transport itself is described in
// tcp_internal.h.
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "tcp_internal.h"
#include "weft/sdk/option_defs.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/tables.h"

namespace weft::transports::tcp {

Options g_options;

namespace {

constexpr weft_option_def_t kOptions[] = {
    sdk::IntOption("max_message_mb", "4096",
                   "The largest message (header and payload) accepted or sent, in MiB; a peer announcing a larger "
                   "one is disconnected before anything is allocated.",
                   1, 1 << 20),
    sdk::IntOption("socket_buffer_kb", "0",
                   "SO_SNDBUF and SO_RCVBUF of every connection, in KiB; 0 leaves them to the kernel's autotuning "
                   "(measured fastest on loopback, see BENCHMARKS.md).",
                   0, 1 << 20),
    sdk::BoolOption("tls", "false",
                    "Encrypt every connection with TLS 1.3 (OpenSSL), both sides presenting a certificate the "
                    "cluster's CA signed (tls_certificate, tls_private_key, tls_ca). Every task and client of a "
                    "cluster must agree."),
    sdk::StringOption("tls_certificate", "\"\"", "tls: this machine's certificate chain, PEM."),
    sdk::StringOption("tls_private_key", "\"\"",
                      "tls: the private key of tls_certificate, PEM; only its owner may read it."),
    sdk::StringOption("tls_ca", "\"\"", "tls: the CA certificate(s), PEM, that a peer's certificate must chain to."),
    sdk::IntOption("tls_handshake_timeout_ms", "10000",
                   "tls: an accepted connection that has not completed its TLS handshake by then is dropped.", 1),
};

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
  static const weft_transport_plugin_t transport = sdk::TransportTableOf<Entry>("tcp");
  static const weft_plugin_t plugin = sdk::DescribePlugin(
      "tcp", "0.1.0", "TCP over Boost.Asio: scatter/gather sends, zero-copy receives into aligned buffers", &transport,
      kOptions, Configure);
  return &plugin;
}

}  // namespace
}  // namespace weft::transports::tcp

WEFT_SDK_DEFINE_PLUGIN(weft::transports::tcp::Describe)
