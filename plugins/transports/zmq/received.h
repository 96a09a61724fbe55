// A message handed to on_message: the header frame and the payload, kept
// as ZeroMQ's own frames so that a single payload frame reaches the host
// without a copy. Reference-counted: the loop holds one reference during
// on_message, and every retain adds one until its release.
#ifndef WEFT_PLUGINS_TRANSPORTS_ZMQ_RECEIVED_H_
#define WEFT_PLUGINS_TRANSPORTS_ZMQ_RECEIVED_H_

#include <zmq.hpp>

#include <atomic>
#include <memory>
#include <vector>

#include "weft/weft_transport.h"

namespace weft::zmq_transport {

class Received : public weft_received_t {
 public:
  // Takes |frames|[first] as the header and the rest as the payload:
  // one frame is kept as it is, several are joined into one buffer of
  // |total_payload| bytes (throws std::bad_alloc when that fails).
  Received(weft_connection_t connection, std::vector<zmq::message_t>& frames, std::size_t first,
           uint64_t total_payload);

  // Drops the loop's reference.
  void Unref() noexcept;

 private:
  ~Received() = default;
  static void* Retain(const weft_received_t* message) noexcept;
  static void Release(void* token) noexcept;

  std::atomic<int> refs_{1};
  zmq::message_t header_frame_;
  zmq::message_t payload_frame_;
  std::unique_ptr<unsigned char[]> joined_;
};

}  // namespace weft::zmq_transport

#endif  // WEFT_PLUGINS_TRANSPORTS_ZMQ_RECEIVED_H_
