// Weft SDK for C++ plugins: errors as exceptions inside, statuses outside.
//
// Inside a plugin, C++ code throws weft::sdk::Error (or anything derived
// from std::exception); at the boundary weft::sdk::Guard (guard.h) turns it
// into a weft_status_t. Statuses coming back from the host are turned into
// exceptions with ThrowIfError, or held with the move-only Status.
//
//   void Configure(const weft_options_t* options) {
//     int64_t count = 0;
//     weft::sdk::ThrowIfError(weft::sdk::host()->option_get_int(options, "count", &count));
//     if (count > 64) throw weft::sdk::Error(WEFT_INVALID_ARGUMENT, "count must be <= 64");
//   }
#ifndef WEFT_SDK_STATUS_H_
#define WEFT_SDK_STATUS_H_

#include <stdexcept>
#include <string>
#include <utility>

#include "weft/sdk/host.h"

namespace weft::sdk {

// An error with a canonical code. Guard turns it into a status with the same
// code and message.
class Error : public std::runtime_error {
 public:
  Error(weft_code_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  weft_code_t code() const noexcept { return code_; }

 private:
  weft_code_t code_;
};

// Makes a status through the host. NULL for WEFT_OK.
inline weft_status_t MakeStatus(weft_code_t code, const char* message) noexcept {
  return host()->status_new(code, message);
}

// Owns a weft_status_t and frees it through the host.
class Status {
 public:
  Status() noexcept = default;
  explicit Status(weft_status_t status) noexcept : status_(status) {}
  Status(Status&& other) noexcept : status_(std::exchange(other.status_, nullptr)) {}
  Status& operator=(Status&& other) noexcept {
    if (this != &other) {
      reset();
      status_ = std::exchange(other.status_, nullptr);
    }
    return *this;
  }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  ~Status() { reset(); }

  bool ok() const noexcept { return status_ == nullptr; }
  weft_code_t code() const noexcept { return host()->status_code(status_); }
  const char* message() const noexcept { return host()->status_message(status_); }
  // Gives up ownership, e.g. to return the status across the ABI.
  [[nodiscard]] weft_status_t release() noexcept { return std::exchange(status_, nullptr); }

 private:
  void reset() noexcept {
    if (status_ != nullptr) host()->status_free(std::exchange(status_, nullptr));
  }
  weft_status_t status_ = nullptr;
};

// Throws Error with the code and message of |status| (which it frees) when
// it is not OK.
inline void ThrowIfError(weft_status_t status) {
  if (status == nullptr) return;
  Status owned(status);
  throw Error(owned.code(), owned.message());
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_STATUS_H_
