// The log records of the process, captured while the object lives, for
// tests that check what the code under test logged.
#ifndef WEFT_TESTS_SUPPORT_LOG_CAPTURE_H_
#define WEFT_TESTS_SUPPORT_LOG_CAPTURE_H_

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/logging.h"

namespace weft::testing {

// Thread-safe: the code under test may log from any thread. The previous
// sink is restored when the object goes.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Every record so far as "<level>: <message>" ("warning: plugin ...").
  std::vector<std::string> Lines() const;
  // The messages so far, one a line.
  std::string All() const;
  // How many messages contain |text|.
  std::size_t Count(const std::string& text) const;
  // Waits up to |timeout| for a message with every one of |texts|.
  bool WaitFor(const std::vector<std::string>& texts,
               std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;

 private:
  struct Record {
    std::string level;
    std::string message;
  };
  mutable std::mutex mutex_;
  std::vector<Record> records_;
  LogSink old_;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_LOG_CAPTURE_H_
