// Per-step execution traces in the Chrome trace-event format, loadable in
// Perfetto (ui.perfetto.dev) and chrome://tracing: one complete event per
// node, on the thread that ran it.
#ifndef WEFT_CORE_RUNTIME_TRACE_H_
#define WEFT_CORE_RUNTIME_TRACE_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace weft::runtime {

class TraceRecorder {
 public:
  struct Event {
    std::string name;  // node name
    std::string op;
    std::string device;
    int64_t step_id;
    uint64_t thread;
    int64_t start_us;  // since the recorder was created
    int64_t duration_us;
  };

  TraceRecorder() : origin_(std::chrono::steady_clock::now()) {}

  int64_t NowMicros() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin_).count();
  }
  void Record(Event event);
  std::vector<Event> events() const;

  // The events as a Chrome trace JSON document.
  std::string ToJson() const;
  Status WriteJson(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

// A small stable number for the calling thread, for trace "tid"s.
uint64_t TraceThreadId();

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_TRACE_H_
