#include "core/runtime/trace.h"

#include <algorithm>
#include <atomic>
#include <tuple>

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

void TraceRecorder::AddFlow(Flow flow) {
  std::lock_guard<std::mutex> lock(mutex_);
  flows_.push_back(std::move(flow));
}

void TraceRecorder::SetClockOffset(const std::string& process, double offset_us, double uncertainty_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [name, value] : clock_offsets_) {
    if (name == process) {
      value = {offset_us, uncertainty_us};
      return;
    }
  }
  clock_offsets_.push_back({process, {offset_us, uncertainty_us}});
}

namespace {

// "/job:ps/task:0/device:CPU:0" or "/device:CPU:0" -> "CPU:0".
std::string ShortDevice(const std::string& device) {
  const std::size_t at = device.rfind("/device:");
  return at == std::string::npos ? device : device.substr(at + 8);
}

}  // namespace

std::string TraceRecorder::ToJson() const {
  std::vector<Event> events;
  std::vector<Flow> flows;
  std::vector<std::pair<std::string, std::pair<double, double>>> offsets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events = events_;
    flows = flows_;
    offsets = clock_offsets_;
  }
  // A process per task (this process first), a track per device and
  // thread within it.
  std::vector<std::string> processes;
  auto pid_of = [&](const std::string& process) {
    auto it = std::find(processes.begin(), processes.end(), process);
    if (it == processes.end()) {
      processes.push_back(process);
      return static_cast<int64_t>(processes.size());
    }
    return static_cast<int64_t>(it - processes.begin()) + 1;
  };
  for (const Event& e : events) {
    if (e.process.empty()) pid_of(e.process);
  }
  std::vector<std::pair<std::tuple<std::string, std::string, uint64_t>, int64_t>> tracks;
  auto tid_of = [&](const std::string& process, const std::string& device, uint64_t thread) {
    const auto key = std::make_tuple(process, device, thread);
    int64_t in_process = 0;
    for (const auto& [k, tid] : tracks) {
      if (k == key) return tid;
      if (std::get<0>(k) == process) ++in_process;
    }
    tracks.push_back({key, in_process + 1});
    return in_process + 1;
  };
  Json out = Json::array();
  for (const Event& e : events) {
    out.push_back({{"name", e.name},
                   {"cat", e.op},
                   {"ph", "X"},
                   {"ts", e.start_us},
                   {"dur", std::max<int64_t>(e.duration_us, 0)},
                   {"pid", pid_of(e.process)},
                   {"tid", tid_of(e.process, e.device, e.thread)},
                   {"args", {{"op", e.op}, {"device", e.device}, {"step", e.step_id}}}});
  }
  for (const Flow& f : flows) {
    out.push_back({{"name", f.name},
                   {"cat", "transfer"},
                   {"ph", "s"},
                   {"id", f.id},
                   {"ts", f.from_us},
                   {"pid", pid_of(f.from_process)},
                   {"tid", tid_of(f.from_process, f.from_device, f.from_thread)}});
    out.push_back({{"name", f.name},
                   {"cat", "transfer"},
                   {"ph", "f"},
                   {"bp", "e"},
                   {"id", f.id},
                   {"ts", f.to_us},
                   {"pid", pid_of(f.to_process)},
                   {"tid", tid_of(f.to_process, f.to_device, f.to_thread)}});
  }
  // Names for the tracks (metadata events).
  for (std::size_t p = 0; p < processes.size(); ++p) {
    if (processes[p].empty()) continue;
    out.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", static_cast<int64_t>(p) + 1},
                   {"args", {{"name", processes[p]}}}});
  }
  for (const auto& [key, tid] : tracks) {
    const auto& [process, device, thread] = key;
    out.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", pid_of(process)},
                   {"tid", tid},
                   {"args", {{"name", StrCat(ShortDevice(device), " thread ", thread)}}}});
  }
  Json doc = {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(out)}};
  if (!offsets.empty()) {
    Json clocks = Json::object();
    for (const auto& [process, value] : offsets) clocks[process] = {value.first, value.second};
    doc["otherData"] = {{"clock_offsets_us", std::move(clocks)}};
  }
  return DumpJson(doc) + "\n";
}

Status TraceRecorder::WriteJson(const std::string& path) const {
  return WriteFileAtomically(path, ToJson()).WithContext("writing the trace");
}

}  // namespace weft::runtime
