// Weft SDK for C++ plugins: logging through the host.
//
//   void Opened(const std::string& name, int mib) {
//     WEFT_SDK_LOG(INFO) << "opened " << name << " with " << mib << " MiB";
//   }
//
// The message goes to the host's log with the plugin's name and the source
// position; it is only formatted when the host would write it.
#ifndef WEFT_SDK_LOG_H_
#define WEFT_SDK_LOG_H_

#include <sstream>
#include <string>

#include "weft/sdk/host.h"

namespace weft::sdk {

class LogMessage {
 public:
  LogMessage(weft_log_level_t level, const char* file, int line) : level_(level), file_(file), line_(line) {}
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage() {
    try {
      const std::string text = stream_.str();
      host()->log(level_, plugin_name(), file_, line_, text.c_str());
    } catch (...) {
      // Logging must never take the plugin down.
    }
  }
  std::ostream& stream() { return stream_; }

 private:
  weft_log_level_t level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

inline bool LogEnabled(weft_log_level_t level) noexcept { return host() != nullptr && host()->log_enabled(level) != 0; }

}  // namespace weft::sdk

#define WEFT_SDK_LOG(level)                         \
  if (!::weft::sdk::LogEnabled(WEFT_LOG_##level)) { \
  } else                                            \
    ::weft::sdk::LogMessage(WEFT_LOG_##level, __FILE__, __LINE__).stream()

#endif  // WEFT_SDK_LOG_H_
