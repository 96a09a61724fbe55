// Addresses of the rdma transport:
//
//   rdma://HOST:PORT           the first RDMA device
//   rdma://DEVICE/HOST:PORT    a named device ("mlx5_0", "rxe0")
//
// HOST:PORT is where the TCP side channel listens (or connects); HOST may be
// a name, an IPv4 address or a bracketed IPv6 address ("[::1]:7072"). A
// listening endpoint may ask for port 0 (any free port).
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_ADDRESS_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_ADDRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "rdma/result.h"

namespace weft::rdma {

struct RdmaAddress {
  std::string device;  // empty: the first device
  std::string host;    // without brackets
  uint16_t port = 0;

  bool operator==(const RdmaAddress&) const = default;
};

// Parses |text|. INVALID_ARGUMENT naming the address and what is wrong.
Result<RdmaAddress> ParseAddress(std::string_view text);

// "rdma://DEVICE/HOST:PORT" (or without DEVICE/), bracketing an IPv6 host.
std::string FormatAddress(const RdmaAddress& address);

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_ADDRESS_H_
