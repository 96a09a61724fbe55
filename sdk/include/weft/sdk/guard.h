// Weft SDK for C++ plugins: the exception guard.
//
// No C++ exception may cross the C ABI. Every function a C++ plugin hands to
// the host runs its body inside Guard, which returns the body's status (or
// NULL when it returns void) and turns anything thrown into a status:
//
//  weft::sdk::Error(code, msg)  -> that code and message
//  std::bad_alloc               -> RESOURCE_EXHAUSTED
//  other std::exception         -> INTERNAL, with what()
//  anything else                -> UNKNOWN
//
//   static weft_status_t BufferAlloc(weft_device_t, uint64_t size, weft_buffer_t* out) {
//     return weft::sdk::Guard([&] { *out = reinterpret_cast<weft_buffer_t>(new char[size + 1]); });
//   }
//
// For entry points that return nothing (buffer_free, destroy), GuardVoid
// logs what was thrown at ERROR level instead.
#ifndef WEFT_SDK_GUARD_H_
#define WEFT_SDK_GUARD_H_

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <type_traits>

#include "weft/sdk/host.h"
#include "weft/sdk/status.h"

namespace weft::sdk {
namespace internal {

// Builds the status without allocating in C++, so that reporting an
// exception cannot throw another one.
inline weft_status_t StatusFromException(weft_code_t code, const char* prefix, const char* what) noexcept {
  if (host() == nullptr) {
    // Only reachable when a plugin calls into the SDK before its entry
    // point ran: a programming error with no way to report it.
    std::fprintf(stderr, "weft sdk: exception before the plugin was initialised: %s\n", what != nullptr ? what : "");
    std::abort();
  }
  char message[1024];
  std::snprintf(message, sizeof message, "%s%s", prefix, what != nullptr ? what : "");
  return host()->status_new(code, message);
}

inline weft_status_t StatusFromCurrentException() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return StatusFromException(e.code(), "", e.what());
  } catch (const std::bad_alloc& e) {
    return StatusFromException(WEFT_RESOURCE_EXHAUSTED, "out of memory: ", e.what());
  } catch (const std::exception& e) {
    return StatusFromException(WEFT_INTERNAL, "uncaught C++ exception: ", e.what());
  } catch (...) {
    return StatusFromException(WEFT_UNKNOWN, "uncaught C++ exception of unknown type", "");
  }
}

}  // namespace internal

// Runs |body| and returns its status; see the file comment.
template <class F>
[[nodiscard]] weft_status_t Guard(F&& body) noexcept {
  using Result = std::invoke_result_t<F>;
  static_assert(std::is_void_v<Result> || std::is_same_v<Result, weft_status_t>,
                "a guarded body returns void or weft_status_t (use Status::release())");
  try {
    if constexpr (std::is_same_v<std::invoke_result_t<F>, weft_status_t>) {
      return body();
    } else {
      body();
      return nullptr;
    }
  } catch (...) {
    return internal::StatusFromCurrentException();
  }
}

// Runs |body|, which returns nothing; logs anything it throws at ERROR
// level as "<what>: <message>".
template <class F>
void GuardVoid(const char* what, F&& body) noexcept {
  weft_status_t status = Guard(static_cast<F&&>(body));
  if (status == nullptr) return;
  char message[1200];
  std::snprintf(message, sizeof message, "%s: %s", what != nullptr ? what : "(unnamed)",
                host()->status_message(status));
  host()->log(WEFT_LOG_ERROR, plugin_name(), nullptr, 0, message);
  host()->status_free(status);
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_GUARD_H_
