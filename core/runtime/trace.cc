#include "core/runtime/trace.h"

#include <algorithm>
#include <atomic>

#include "core/base/file_util.h"
#include "core/base/json.h"

namespace weft::runtime {

uint64_t TraceThreadId() {
  static std::atomic<uint64_t> next{1};
  thread_local const uint64_t id = next.fetch_add(1);
  return id;
}

void TraceRecorder::Record(Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

std::vector<TraceRecorder::Event> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::string TraceRecorder::ToJson() const {
  Json events = Json::array();
  for (const Event& e : this->events()) {
    events.push_back({{"name", e.name},
                      {"cat", e.op},
                      {"ph", "X"},
                      {"ts", e.start_us},
                      {"dur", std::max<int64_t>(e.duration_us, 0)},
                      {"pid", 1},
                      {"tid", e.thread},
                      {"args", {{"op", e.op}, {"device", e.device}, {"step", e.step_id}}}});
  }
  return DumpJson(Json{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}}) + "\n";
}

Status TraceRecorder::WriteJson(const std::string& path) const {
  return WriteFileAtomically(path, ToJson()).WithContext("writing the trace");
}

}  // namespace weft::runtime
