#include "tests/support/log_capture.h"

#include <thread>

#include "core/base/strings.h"

namespace weft::testing {

LogCapture::LogCapture() {
  old_ = SetLogSink([this](const LogRecord& r) {
    std::lock_guard<std::mutex> lock(mutex_);
    records_.push_back({std::string(LogLevelName(r.level)), std::string(r.message)});
  });
}

LogCapture::~LogCapture() { SetLogSink(old_); }

std::vector<std::string> LogCapture::Lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> lines;
  for (const Record& r : records_) lines.push_back(StrCat(r.level, ": ", r.message));
  return lines;
}

std::string LogCapture::All() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const Record& r : records_) out += r.message + "\n";
  return out;
}

std::size_t LogCapture::Count(const std::string& text) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t n = 0;
  for (const Record& r : records_) n += r.message.find(text) != std::string::npos ? 1 : 0;
  return n;
}

bool LogCapture::WaitFor(const std::vector<std::string>& texts, std::chrono::milliseconds timeout) const {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const Record& r : records_) {
        bool all = true;
        for (const std::string& t : texts) all = all && r.message.find(t) != std::string::npos;
        if (all) return true;
      }
    }
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace weft::testing
