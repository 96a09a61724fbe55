// The rdma transport's table entries (rdma_transport.h): the options, and
// the C entry points, each a guard around the endpoint (endpoint.h) or
// connection (connection.h) it is given.
//
// NOT RUN ON REAL HARDWARE: everything past the argument checks calls
// code that has never executed (no RDMA device where it was written).
#include "rdma/rdma_transport.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "rdma/address.h"
#include "rdma/connection.h"
#include "rdma/device.h"
#include "rdma/endpoint.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/status.h"

namespace weft::rdma {
namespace {

std::mutex g_options_mutex;
Options g_options;

Options CurrentOptions() {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  return g_options;
}

Endpoint* AsEndpoint(weft_endpoint_t endpoint) { return reinterpret_cast<Endpoint*>(endpoint); }

}  // namespace

void SetOptions(const Options& options) {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  g_options = options;
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
