#include "received.h"

#include <cstring>

#include "weft/sdk/guard.h"

namespace weft::zmq_transport {

Received::Received(weft_connection_t from, std::vector<zmq::message_t>& frames, std::size_t first,
                   uint64_t total_payload)
    : weft_received_t{} {
  struct_size = sizeof(weft_received_t);
  connection = from;
  header_frame_.move(frames[first]);
  header_size = header_frame_.size();
  header = header_size != 0 ? header_frame_.data() : nullptr;
  const std::size_t num_payload = frames.size() - first - 1;
  if (num_payload == 1) {
    payload_frame_.move(frames[first + 1]);
    payload_size = payload_frame_.size();
    payload = payload_size != 0 ? payload_frame_.data() : nullptr;
  } else if (num_payload > 1 && total_payload != 0) {
    joined_.reset(new unsigned char[total_payload]);
    std::size_t at = 0;
    for (std::size_t i = first + 1; i < frames.size(); ++i) {
      if (frames[i].size() != 0) std::memcpy(joined_.get() + at, frames[i].data(), frames[i].size());
      at += frames[i].size();
    }
    payload_size = total_payload;
    payload = joined_.get();
  }
  retain = &Received::Retain;
  release = &Received::Release;
}

void Received::Unref() noexcept {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void* Received::Retain(const weft_received_t* message) noexcept {
  void* token = nullptr;
  sdk::GuardVoid("zmq transport: retain", [&] {
    auto* self = static_cast<Received*>(const_cast<weft_received_t*>(message));
    self->refs_.fetch_add(1, std::memory_order_relaxed);
    token = self;
  });
  return token;
}

void Received::Release(void* token) noexcept {
  sdk::GuardVoid("zmq transport: release", [&] {
    if (token != nullptr) static_cast<Received*>(token)->Unref();
  });
}

}  // namespace weft::zmq_transport
