#include "core/base/status.h"

namespace weft {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kCancelled: return "CANCELLED";
    case Code::kUnknown: return "UNKNOWN";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kAlreadyExists: return "ALREADY_EXISTS";
    case Code::kPermissionDenied: return "PERMISSION_DENIED";
    case Code::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kAborted: return "ABORTED";
    case Code::kOutOfRange: return "OUT_OF_RANGE";
    case Code::kUnimplemented: return "UNIMPLEMENTED";
    case Code::kInternal: return "INTERNAL";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kDataLoss: return "DATA_LOSS";
    case Code::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

Status::Status(Code code, std::string message) : code_(code) {
  if (code_ != Code::kOk) message_ = std::move(message);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return StrCat(CodeName(code_), ": ", message_);
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, StrCat(context, ": ", message_));
}

}  // namespace weft
