// Addresses of the tcp transport: "tcp://HOST:PORT" or "HOST:PORT", HOST a
// name, an IPv4 address or a bracketed IPv6 address ("[::1]").
#ifndef WEFT_PLUGINS_TRANSPORTS_TCP_ADDRESS_H_
#define WEFT_PLUGINS_TRANSPORTS_TCP_ADDRESS_H_

// Boost 1.74's asio uses std::exchange without including <utility>.
#include <utility>

#include <boost/asio/ip/tcp.hpp>

#include <string>

namespace weft::transports::tcp {

// "tcp://host:port", "host:port", "[::1]:port" -> host and port.
struct HostPort {
  std::string host;
  std::string port;
};
HostPort ParseAddress(const std::string& address, bool allow_port_zero);

std::string FormatEndpoint(const boost::asio::ip::tcp::endpoint& e);

}  // namespace weft::transports::tcp

#endif  // WEFT_PLUGINS_TRANSPORTS_TCP_ADDRESS_H_
