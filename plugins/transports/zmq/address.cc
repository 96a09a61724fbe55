#include "address.h"

#include <cctype>

#include "weft/sdk/status.h"

namespace weft::zmq_transport {
namespace {

[[noreturn]] void Bad(std::string_view url, const std::string& why) {
  throw sdk::Error(WEFT_INVALID_ARGUMENT,
                   "zmq transport: bad address '" + std::string(url) + "': " + why + " (expected zmq+tcp://HOST:PORT)");
}

}  // namespace

Address ParseAddress(std::string_view url) {
  std::string_view rest;
  for (std::string_view prefix : {std::string_view("zmq+tcp://"), std::string_view("zmq://")}) {
    if (url.substr(0, prefix.size()) == prefix) {
      rest = url.substr(prefix.size());
      break;
    }
  }
  if (rest.empty()) Bad(url, "the scheme must be zmq+tcp:// or zmq://, with a host and port after it");
  Address address;
  std::string_view port;
  if (rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) Bad(url, "an IPv6 address misses its ']'");
    address.host = std::string(rest.substr(0, close + 1));
    address.ipv6 = true;
    rest = rest.substr(close + 1);
    if (rest.empty() || rest.front() != ':') Bad(url, "no ':PORT' after the host");
    port = rest.substr(1);
  } else {
    const auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) Bad(url, "no ':PORT' after the host");
    address.host = std::string(rest.substr(0, colon));
    port = rest.substr(colon + 1);
    if (address.host.find(':') != std::string::npos) Bad(url, "write an IPv6 host in brackets, [::1]");
  }
  if (address.host.empty() || address.host == "[]") Bad(url, "the host is empty");
  for (char c : address.host) {
    if (c == '/' || std::isspace(static_cast<unsigned char>(c))) Bad(url, "the host has a '/' or a space");
  }
  if (port.empty() || port.size() > 5) Bad(url, "the port must be a number from 0 to 65535");
  unsigned value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') Bad(url, "the port must be a number from 0 to 65535");
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) Bad(url, "the port must be a number from 0 to 65535");
  address.port = std::to_string(value);
  return address;
}

std::string UrlFromZmqEndpoint(std::string_view endpoint) {
  constexpr std::string_view kTcp = "tcp://";
  if (endpoint.substr(0, kTcp.size()) == kTcp) endpoint.remove_prefix(kTcp.size());
  return "zmq+tcp://" + std::string(endpoint);
}

}  // namespace weft::zmq_transport
