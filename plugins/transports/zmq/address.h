// Addresses of the zmq transport: "zmq+tcp://HOST:PORT", or "zmq://HOST:PORT"
// meaning the same. HOST is an IPv4 address, a name, or a bracketed IPv6
// address ("[::1]"); PORT is 0..65535, where 0 (when listening) lets the
// system pick a free port.
#ifndef WEFT_PLUGINS_TRANSPORTS_ZMQ_ADDRESS_H_
#define WEFT_PLUGINS_TRANSPORTS_ZMQ_ADDRESS_H_

#include <string>
#include <string_view>

namespace weft::zmq_transport {

struct Address {
  std::string host;  // as written, brackets included for IPv6
  std::string port;
  bool ipv6 = false;

  // "tcp://HOST:PORT", what ZeroMQ binds or connects to.
  std::string ZmqEndpoint() const { return "tcp://" + host + ":" + port; }
  // "zmq+tcp://HOST:PORT", the canonical form used in messages.
  std::string Url() const { return "zmq+tcp://" + host + ":" + port; }
};

// Parses |url|; throws sdk::Error(INVALID_ARGUMENT) naming the address and
// what is wrong with it.
Address ParseAddress(std::string_view url);

// "tcp://1.2.3.4:5" (ZeroMQ's ZMQ_LAST_ENDPOINT) -> "zmq+tcp://1.2.3.4:5".
std::string UrlFromZmqEndpoint(std::string_view endpoint);

}  // namespace weft::zmq_transport

#endif  // WEFT_PLUGINS_TRANSPORTS_ZMQ_ADDRESS_H_
