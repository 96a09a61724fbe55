#include "rdma/address.h"

namespace weft::rdma {

Result<RdmaAddress> ParseAddress(std::string_view text) {
  const std::string quoted = "rdma address '" + std::string(text) + "': ";
  auto bad = [&](const char* what) { return Fail(WEFT_INVALID_ARGUMENT, quoted + what); };
  constexpr std::string_view kScheme = "rdma://";
  if (text.substr(0, kScheme.size()) != kScheme) return bad("must start with rdma://");
  std::string_view rest = text.substr(kScheme.size());
  RdmaAddress address;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    address.device = std::string(rest.substr(0, slash));
    rest = rest.substr(slash + 1);
    if (address.device.empty()) return bad("empty device name before '/'");
    if (rest.find('/') != std::string_view::npos) return bad("expected rdma://DEVICE/HOST:PORT, found a second '/'");
  }
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 host needs its closing ']'");
    address.host = std::string(rest.substr(1, close - 1));
    if (close + 1 >= rest.size() || rest[close + 1] != ':') return bad("missing ':PORT' after the IPv6 host");
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':PORT'");
    address.host = std::string(rest.substr(0, colon));
    if (address.host.find(':') != std::string::npos) return bad("an IPv6 host must be written in brackets");
    port = rest.substr(colon + 1);
  }
  if (address.host.empty()) return bad("empty host");
  if (port.empty() || port.size() > 5) return bad("the port must be a number from 0 to 65535");
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("the port must be a number from 0 to 65535");
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return bad("the port must be a number from 0 to 65535");
  address.port = static_cast<uint16_t>(value);
  return address;
}

std::string FormatAddress(const RdmaAddress& address) {
  std::string out = "rdma://";
  if (!address.device.empty()) out += address.device + "/";
  if (address.host.find(':') != std::string::npos) {
    out += "[" + address.host + "]";
  } else {
    out += address.host;
  }
  return out + ":" + std::to_string(address.port);
}

}  // namespace weft::rdma
