// Status and Expected<T>: how the core reports failure.
//
// Every fallible core function returns a Status (OK or a canonical code
// plus a message for a person) or an Expected<T> (a T or a non-OK Status).
// Both are [[nodiscard]]. Propagate with the macros at the end:
//
//   Expected<Config> LoadConfig(const std::string& path) {
//     WEFT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     WEFT_RETURN_IF_ERROR(CheckNotEmpty(text, path));
//     return ParseConfig(text, path);
//   }
//
// Messages name what failed and where: "configs/a.toml:3:20:
// runtime.inter_op_threads: expected an integer >= 1, got \"two\"", not
// "parse error". The codes are those of weft/weft_status.h.
#ifndef WEFT_CORE_BASE_STATUS_H_
#define WEFT_CORE_BASE_STATUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/base/strings.h"

namespace weft {

enum class Code : int32_t {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// "INVALID_ARGUMENT" for kInvalidArgument; "UNKNOWN" for an unnamed value.
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  // OK.
  Status() = default;
  // A status with |code| and |message|. A kOk code gives OK and drops the
  // message.
  Status(Code code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "INVALID_ARGUMENT: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  Status WithContext(std::string_view context) const;

  // Explicitly ignores a status whose failure does not matter here.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) { return a.code_ == b.code_ && a.message_ == b.message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Builders for the common codes; the arguments are concatenated (StrCat).
template <class... Args>
Status InvalidArgumentError(const Args&... args) {
  return Status(Code::kInvalidArgument, StrCat(args...));
}
template <class... Args>
Status NotFoundError(const Args&... args) {
  return Status(Code::kNotFound, StrCat(args...));
}
template <class... Args>
Status AlreadyExistsError(const Args&... args) {
  return Status(Code::kAlreadyExists, StrCat(args...));
}
template <class... Args>
Status FailedPreconditionError(const Args&... args) {
  return Status(Code::kFailedPrecondition, StrCat(args...));
}
template <class... Args>
Status UnavailableError(const Args&... args) {
  return Status(Code::kUnavailable, StrCat(args...));
}
template <class... Args>
Status InternalError(const Args&... args) {
  return Status(Code::kInternal, StrCat(args...));
}
template <class... Args>
Status UnimplementedError(const Args&... args) {
  return Status(Code::kUnimplemented, StrCat(args...));
}
template <class... Args>
Status OutOfRangeError(const Args&... args) {
  return Status(Code::kOutOfRange, StrCat(args...));
}
template <class... Args>
Status ResourceExhaustedError(const Args&... args) {
  return Status(Code::kResourceExhausted, StrCat(args...));
}
template <class... Args>
Status CancelledError(const Args&... args) {
  return Status(Code::kCancelled, StrCat(args...));
}
template <class... Args>
Status AbortedError(const Args&... args) {
  return Status(Code::kAborted, StrCat(args...));
}
template <class... Args>
Status DataLossError(const Args&... args) {
  return Status(Code::kDataLoss, StrCat(args...));
}

// A T, or the Status saying why there is none.
template <class T>
class [[nodiscard]] Expected {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): returning a T is the point.
  Expected(T value) : value_(std::move(value)) {}
  // |status| must not be OK; an OK status becomes an INTERNAL error.
  // NOLINTNEXTLINE(google-explicit-constructor)
  Expected(Status status) : value_(std::move(status)) {
    if (std::get<Status>(value_).ok()) {
      value_ = Status(Code::kInternal, "Expected constructed from an OK status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  explicit operator bool() const { return ok(); }

  // The status: OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(value_); }

  // The value; only when ok().
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The value, or |fallback| when there is none.
  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> value_;
};

namespace internal {
inline Status AsStatus(Status status) { return status; }
template <class T>
Status AsStatus(const Expected<T>& expected) {
  return expected.status();
}
}  // namespace internal

}  // namespace weft

#define WEFT_STATUS_CONCAT_INNER_(a, b) a##b
#define WEFT_STATUS_CONCAT_(a, b) WEFT_STATUS_CONCAT_INNER_(a, b)

// Returns the status of |expr| (a Status or an Expected) from the enclosing
// function when it is not OK.
#define WEFT_RETURN_IF_ERROR(expr)                                    \
  do {                                                                \
    ::weft::Status weft_status_ = ::weft::internal::AsStatus((expr)); \
    if (!weft_status_.ok()) return weft_status_;                      \
  } while (false)

// Evaluates |expr| (an Expected<T>); returns its status when not OK,
// otherwise moves the value into |lhs| (a declaration or an lvalue).
#define WEFT_ASSIGN_OR_RETURN(lhs, expr) \
  WEFT_ASSIGN_OR_RETURN_IMPL_(WEFT_STATUS_CONCAT_(weft_expected_, __LINE__), lhs, expr)
#define WEFT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // WEFT_CORE_BASE_STATUS_H_
