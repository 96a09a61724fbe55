// The zmq transport plugin: its description, its one option and the
// transport table. Everything else is in endpoint.cc (see wire.h for the
// protocol on top of ZeroMQ).
//
// Built against the Weft SDK alone; every entry point runs inside the
// SDK's guard.
#include <zmq.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include "address.h"
#include "endpoint.h"
#include "weft/sdk/option_defs.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/tables.h"

#ifndef WEFT_ZMQ_PLUGIN_VERSION
#define WEFT_ZMQ_PLUGIN_VERSION "0.0.0"
#endif

namespace weft::zmq_transport {
namespace {

Settings g_settings;

Endpoint* AsEndpoint(weft_endpoint_t endpoint) { return reinterpret_cast<Endpoint*>(endpoint); }
ConnectionHandle* AsConnection(weft_connection_t connection) { return reinterpret_cast<ConnectionHandle*>(connection); }

// The Z85 secret key in |path| (an owner-only file), checked against
// |public_key|.
std::string ReadCurveSecret(const std::string& path, const std::string& public_key) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT,
                     "[transports.zmq] curve_secret_key_file '" + path + "' cannot be read: " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw sdk::Error(WEFT_PERMISSION_DENIED, "[transports.zmq] curve_secret_key_file '" + path +
                                                 "' may be read by others (mode " + mode + "); run `chmod 600 " + path +
                                                 "`");
  }
  std::ifstream in(path);
  std::string secret;
  in >> secret;
  uint8_t raw[32];
  if (secret.size() != 40 || zmq_z85_decode(raw, secret.c_str()) == nullptr) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "[transports.zmq] curve_secret_key_file '" + path +
                                                "' does not hold a Z85 CURVE secret key (40 characters)");
  }
  char derived[41] = {};
  if (zmq_curve_public(derived, secret.c_str()) != 0 || public_key != derived) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT,
                     "[transports.zmq] curve_public_key is not the public key of the secret "
                     "key in '" +
                         path + "'");
  }
  return secret;
}

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    Settings settings;
    settings.max_message_bytes = sdk::GetInt(options, "max_message_mb") << 20;
    const std::string public_key = sdk::GetString(options, "curve_public_key");
    const std::string secret_file = sdk::GetString(options, "curve_secret_key_file");
    if (public_key.empty() != secret_file.empty()) {
      throw sdk::Error(WEFT_INVALID_ARGUMENT,
                       "[transports.zmq] CURVE needs both curve_public_key and curve_secret_key_file");
    }
    if (!public_key.empty()) {
      if (!zmq_has("curve")) {
        throw sdk::Error(WEFT_UNAVAILABLE,
                         "[transports.zmq] curve_public_key is set, but this libzmq was built "
                         "without CURVE");
      }
      uint8_t raw[32];
      if (public_key.size() != 40 || zmq_z85_decode(raw, public_key.c_str()) == nullptr) {
        throw sdk::Error(WEFT_INVALID_ARGUMENT, "[transports.zmq] curve_public_key '" + public_key +
                                                    "' is not a Z85 CURVE key (40 characters)");
      }
      settings.curve_public_key = public_key;
      settings.curve_secret_key = ReadCurveSecret(secret_file, public_key);
    }
    g_settings = std::move(settings);
  });
}

// The transport table's entry points (weft/sdk/tables.h). TCP
// needs no registration: there is no MemoryRegister.
struct Entry {
  static weft_status_t EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                                    weft_endpoint_t* out_endpoint) {
    return sdk::Guard([&] {
      if (out_endpoint == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: out_endpoint is NULL");
      *out_endpoint = nullptr;
      if (callbacks == nullptr || callbacks->struct_size < WEFT_TRANSPORT_CALLBACKS_SIZE_V1_0) {
        throw sdk::Error(WEFT_INVALID_ARGUMENT,
                         "zmq transport: the callbacks are NULL or smaller than weft_transport_callbacks_t of ABI 1.0");
      }
      if (callbacks->on_message == nullptr || callbacks->on_closed == nullptr) {
        throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: on_message and on_closed are required");
      }
      if (listen_address != nullptr && callbacks->on_accept == nullptr) {
        throw sdk::Error(WEFT_INVALID_ARGUMENT,
                         std::string("zmq transport: listening on ") + listen_address + " needs an on_accept callback");
      }
      std::optional<Address> listen;
      if (listen_address != nullptr) listen = ParseAddress(listen_address);
      auto copy = sdk::Make<weft_transport_callbacks_t>();
      copy.user = callbacks->user;
      copy.on_accept = callbacks->on_accept;
      copy.on_message = callbacks->on_message;
      copy.on_closed = callbacks->on_closed;
      *out_endpoint = reinterpret_cast<weft_endpoint_t>(new Endpoint(listen, copy, g_settings));
    });
  }

  static void EndpointClose(weft_endpoint_t endpoint) {
    sdk::GuardVoid("zmq transport: endpoint_close", [&] {
      if (endpoint != nullptr) AsEndpoint(endpoint)->Close();
    });
  }

  static weft_status_t EndpointAddress(weft_endpoint_t endpoint, char* buffer, size_t size) {
    return sdk::Guard([&] {
      if (endpoint == nullptr)
        throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: endpoint_address: NULL endpoint");
      const std::string& address = AsEndpoint(endpoint)->address();
      if (buffer == nullptr || address.size() + 1 > size) {
        throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, "zmq transport: the address " + address + " needs " +
                                                      std::to_string(address.size() + 1) + " bytes, the buffer has " +
                                                      std::to_string(buffer == nullptr ? 0 : size));
      }
      address.copy(buffer, address.size());
      buffer[address.size()] = '\0';
    });
  }

  static weft_status_t ConnectionOpen(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                                      weft_connection_t* out_connection) {
    return sdk::Guard([&] {
      if (out_connection == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: out_connection is NULL");
      *out_connection = nullptr;
      if (endpoint == nullptr || address == nullptr) {
        throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: connection_open: NULL endpoint or address");
      }
      const Address parsed = ParseAddress(address);
      *out_connection = reinterpret_cast<weft_connection_t>(AsEndpoint(endpoint)->Connect(parsed, timeout_ms));
    });
  }

  static void ConnectionClose(weft_connection_t connection) {
    sdk::GuardVoid("zmq transport: connection_close", [&] {
      if (connection != nullptr) CloseConnection(AsConnection(connection));
    });
  }

  static weft_status_t Send(weft_connection_t connection, const weft_message_t* message, weft_done_fn done,
                            void* user) {
    return sdk::Guard([&]() -> weft_status_t {
      if (connection == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: send: NULL connection");
      return SendMessage(AsConnection(connection), message, done, user);
    });
  }

  static weft_status_t ConnectionSetMaxMessage(weft_connection_t connection, uint64_t max_bytes) {
    return sdk::Guard([&] {
      if (connection == nullptr) {
        throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: connection_set_max_message: NULL connection");
      }
      AsConnection(connection)->connection->max_message.store(max_bytes, std::memory_order_relaxed);
    });
  }
};

constexpr weft_option_def_t kOptions[] = {
    sdk::IntOption("max_message_mb", "2048",
                   "The largest message (header and payload) accepted, in MiB; a peer sending more is disconnected "
                   "with an error (ZMQ_MAXMSGSIZE per frame).",
                   1, 1 << 20),
    sdk::StringOption("curve_public_key", "\"\"",
                      "Encrypt every link with CURVE: the cluster's public key, Z85 (40 characters); every task and "
                      "client uses the same key pair. Unset: links are not encrypted."),
    sdk::StringOption("curve_secret_key_file", "\"\"",
                      "CURVE: a file (chmod 600) holding the Z85 secret key of curve_public_key."),
};

const weft_plugin_t* Describe() {
  static const std::string description = [] {
    int major = 0, minor = 0, patch = 0;
    zmq_version(&major, &minor, &patch);
    return "ZeroMQ " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) +
           " over TCP (zmq+tcp://HOST:PORT), zero-copy sends";
  }();
  static const weft_transport_plugin_t table = sdk::TransportTableOf<Entry>("zmq");
  static const weft_plugin_t plugin =
      sdk::DescribePlugin("zmq", WEFT_ZMQ_PLUGIN_VERSION, description.c_str(), &table, kOptions, Configure);
  return &plugin;
}

}  // namespace
}  // namespace weft::zmq_transport

WEFT_SDK_DEFINE_PLUGIN(weft::zmq_transport::Describe)
