// Per-step execution traces in the Chrome trace-event format, loadable in
// Perfetto (ui.perfetto.dev) and chrome://tracing: one complete event per
// node, on a track of its own per device and thread. A cluster's trace
// (core/distributed/dist_session.h) holds the events of every task, each task a
// process of the trace with its devices as tracks, and flows from each
// _Send to its _Recv.
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
    // The task that ran it ("/job:ps/task:0"); empty: this process.
    std::string process;
  };
  // An arrow from one event to another (a tensor sent from a _Send to its
  // _Recv): from inside the first, to the end of the second.
  struct Flow {
    uint64_t id;
    std::string name;
    std::string from_process, from_device;
    uint64_t from_thread;
    int64_t from_us;
    std::string to_process, to_device;
    uint64_t to_thread;
    int64_t to_us;
  };

  TraceRecorder() : origin_(std::chrono::steady_clock::now()) {}

  int64_t NowMicros() const {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - origin_).count();
  }
  // The origin on the steady clock, in ns since its epoch (how another
  // process's events are put on this recorder's clock).
  int64_t origin_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(origin_.time_since_epoch()).count();
  }
  void Record(Event event);
  std::vector<Event> events() const;
  void AddFlow(Flow flow);
  // How far the clock of |process| was from this one's when its events
  // were shifted onto it, and how sure that is (written as otherData).
  void SetClockOffset(const std::string& process, double offset_us, double uncertainty_us);

  // The events as a Chrome trace JSON document.
  std::string ToJson() const;
  Status WriteJson(const std::string& path) const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<Flow> flows_;
  std::vector<std::pair<std::string, std::pair<double, double>>> clock_offsets_;
};

// A small stable number for the calling thread, for trace "tid"s.
uint64_t TraceThreadId();

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_TRACE_H_
