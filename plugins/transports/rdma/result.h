// The rdma plugin's pure-logic result type.
//
// The parts of the plugin that touch no hardware (framing, the handshake
// codec, the connection state machine, the registration cache, address
// parsing) return Result<T> instead of throwing, so that a unit test can
// check every failure's code and message without a host table. The verbs
// code turns a failure into weft::sdk::Error at the boundary.
//
//   Result<FrameView> frame = DecodeFrame(bytes, limits);
//   if (!frame.ok()) return Fail(frame.failure());
//   Use(frame->header);
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_RESULT_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_RESULT_H_

#include <optional>
#include <string>
#include <utility>

#include "weft/weft_status.h"

namespace weft::rdma {

// What went wrong: a canonical code and a message for a person.
struct Failure {
  weft_code_t code = WEFT_UNKNOWN;
  std::string message;
};

// The value of a Result<Ok>: success with nothing to return.
struct Ok {};

// A T or a Failure. Reading the value of a failed result (or the failure
// of a successful one) is a programming error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}              // NOLINT: implicit by design
  Result(Failure failure) : failure_(std::move(failure)) {}  // NOLINT: implicit by design

  bool ok() const noexcept { return value_.has_value(); }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const Failure& failure() const { return *failure_; }

 private:
  std::optional<T> value_;
  std::optional<Failure> failure_;
};

inline Failure Fail(weft_code_t code, std::string message) { return Failure{code, std::move(message)}; }

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_RESULT_H_
