#include "core/runtime/trace.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

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
  std::vector<Event> events = this->events();
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (const Event& e : events) {
    if (!first) out += ",\n";
    first = false;
    out += StrCat("{\"name\":", Quote(e.name), ",\"cat\":", Quote(e.op), ",\"ph\":\"X\",\"ts\":", e.start_us,
                  ",\"dur\":", std::max<int64_t>(e.duration_us, 0), ",\"pid\":1,\"tid\":", e.thread,
                  ",\"args\":{\"op\":", Quote(e.op), ",\"device\":", Quote(e.device), ",\"step\":", e.step_id, "}}");
  }
  out += "\n]}\n";
  return out;
}

Status TraceRecorder::WriteJson(const std::string& path) const {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot write trace file ", Quote(path), ": ", std::strerror(errno));
  out << ToJson();
  if (!out) return InvalidArgumentError("cannot write trace file ", Quote(path), ": ", std::strerror(errno));
  return Status();
}

}  // namespace weft::runtime
