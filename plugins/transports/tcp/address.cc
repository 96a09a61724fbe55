// Parsing an address to connect to or listen on, and writing one out.
#include "address.h"

#include <cstddef>
#include <string>

#include "tcp_internal.h"

namespace weft::transports::tcp {

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

}  // namespace weft::transports::tcp
