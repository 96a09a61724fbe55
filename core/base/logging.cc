#include "core/base/logging.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>

#include "core/base/json.h"

namespace weft {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

struct SinkState {
  std::mutex mutex;
  LogSink sink;  // empty: the built-in writer below
  std::FILE* file = stderr;
  bool owns_file = false;
  LogFormat format = LogFormat::kText;
};

SinkState& State() {
  static auto* state = new SinkState();  // never destroyed: logging at exit stays safe
  return *state;
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return 'T';
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
    case LogLevel::kOff: break;
  }
  return '?';
}

std::string Timestamp(bool iso) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char buffer[64];
  if (iso) {
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  } else {
    std::strftime(buffer, sizeof buffer, "%H:%M:%S", &tm);
  }
  char out[80];
  std::snprintf(out, sizeof out, "%s.%03d", buffer, static_cast<int>(millis));
  return out;
}

std::string_view BaseName(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

void WriteRecord(SinkState& state, const LogRecord& record) {
  std::string line;
  if (state.format == LogFormat::kJson) {
    Json json = {
        {"time", Timestamp(true)}, {"level", std::string(LogLevelName(record.level))}, {"source", record.source}};
    if (!record.file.empty()) {
      json["file"] = std::string(BaseName(record.file));
      json["line"] = record.line;
    }
    json["message"] = record.message;
    line = DumpJson(json) + "\n";
  } else {
    line = StrCat("[", LevelLetter(record.level), " ", Timestamp(false), " ", record.source);
    if (GetLogLevel() <= LogLevel::kDebug && !record.file.empty()) {
      line += StrCat(" ", BaseName(record.file), ":", record.line);
    }
    line += StrCat("] ", record.message, "\n");
  }
  std::fwrite(line.data(), 1, line.size(), state.file);
  std::fflush(state.file);
}

}  // namespace

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "trace";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "info";
}

std::optional<LogLevel> ParseLogLevel(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(LogLevel::kOff); ++i) {
    const auto level = static_cast<LogLevel>(i);
    if (LogLevelName(level) == name) return level;
  }
  return std::nullopt;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
bool LogEnabled(LogLevel level) {
  return level != LogLevel::kOff && static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

Status SetLogDestination(const std::string& path, LogFormat format) {
  std::FILE* file = stderr;
  if (!path.empty()) {
    file = std::fopen(path.c_str(), "a");
    if (file == nullptr) {
      return InvalidArgumentError("cannot open log file ", Quote(path), " for appending: ", std::strerror(errno));
    }
  }
  SinkState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.owns_file) std::fclose(state.file);
  state.file = file;
  state.owns_file = !path.empty();
  state.format = format;
  return Status();
}

LogSink SetLogSink(LogSink sink) {
  SinkState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  std::swap(state.sink, sink);
  return sink;
}

void Log(const LogRecord& record) {
  if (!LogEnabled(record.level)) return;
  SinkState& state = State();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.sink) {
    state.sink(record);
  } else {
    WriteRecord(state, record);
  }
}

LogMessage::~LogMessage() {
  const std::string text = stream_.str();
  Log(LogRecord{level_, source_, file_ != nullptr ? file_ : "", line_, text});
}

}  // namespace weft
