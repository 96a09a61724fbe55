// Logging for the core and, through the host table, for plugins.
//
//   WEFT_LOG(WARNING) << "plugin " << path << " refused: " << reason;
//
// Each record has a level, a source (the component or plugin name), the
// message, and, at debug levels, the file and line. Records go to stderr
// by default, as text (`[W 02:17:28.123 plugins] message`) or JSON lines;
// [logging] in the config chooses the level, format and file. Safe to call
// from any thread.
#ifndef WEFT_CORE_BASE_LOGGING_H_
#define WEFT_CORE_BASE_LOGGING_H_

#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace weft {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4, kOff = 5 };
enum class LogFormat { kText, kJson };

// "trace", "debug", "info", "warning", "error", "off".
std::string_view LogLevelName(LogLevel level);
std::optional<LogLevel> ParseLogLevel(std::string_view name);

struct LogRecord {
  LogLevel level;
  std::string_view source;
  std::string_view file;  // empty when unknown
  int line;               // 0 when unknown
  std::string_view message;
};

// Where records go. The default sink writes text to stderr.
using LogSink = std::function<void(const LogRecord&)>;

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);

// Sends records to stderr (|path| empty) or appends them to |path|, in
// |format|. An unwritable file is an error naming it.
Status SetLogDestination(const std::string& path, LogFormat format);

// Replaces the sink (tests capture records with this); returns the old one.
LogSink SetLogSink(LogSink sink);

void Log(const LogRecord& record);

class LogMessage {
 public:
  LogMessage(LogLevel level, std::string_view source, const char* file, int line)
      : level_(level), source_(source), file_(file), line_(line) {}
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::string_view source_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace weft

#define WEFT_LOG_LEVEL_TRACE ::weft::LogLevel::kTrace
#define WEFT_LOG_LEVEL_DEBUG ::weft::LogLevel::kDebug
#define WEFT_LOG_LEVEL_INFO ::weft::LogLevel::kInfo
#define WEFT_LOG_LEVEL_WARNING ::weft::LogLevel::kWarning
#define WEFT_LOG_LEVEL_ERROR ::weft::LogLevel::kError

// Logs from the core, attributed to source "weft".
#define WEFT_LOG(level) WEFT_LOG_FROM(level, "weft")
// Logs from the core at a level chosen at run time (a LogLevel value,
// evaluated once).
#define WEFT_LOG_AT(level_value)                                                                      \
  if (const ::weft::LogLevel weft_log_level_ = (level_value); !::weft::LogEnabled(weft_log_level_)) { \
  } else                                                                                              \
    ::weft::LogMessage(weft_log_level_, "weft", __FILE__, __LINE__).stream()
// Logs attributed to |source| (a component such as "plugins").
#define WEFT_LOG_FROM(level, source)                 \
  if (!::weft::LogEnabled(WEFT_LOG_LEVEL_##level)) { \
  } else                                             \
    ::weft::LogMessage(WEFT_LOG_LEVEL_##level, source, __FILE__, __LINE__).stream()

#endif  // WEFT_CORE_BASE_LOGGING_H_
