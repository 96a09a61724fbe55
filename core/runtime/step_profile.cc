#include "core/runtime/step_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "core/base/strings.h"

namespace weft::runtime {
namespace {

using Interval = std::pair<int64_t, int64_t>;

// Sorts |intervals| and merges those that overlap or touch.
std::vector<Interval> Merge(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end());
  std::vector<Interval> merged;
  for (const Interval& i : intervals) {
    if (!merged.empty() && i.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, i.second);
    } else {
      merged.push_back(i);
    }
  }
  return merged;
}

int64_t Length(const std::vector<Interval>& merged) {
  int64_t total = 0;
  for (const Interval& i : merged) total += i.second - i.first;
  return total;
}

// How much of |a| (merged) lies outside |b| (merged).
int64_t LengthOutside(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t total = 0;
  std::size_t j = 0;
  for (const Interval& i : a) {
    int64_t at = i.first;
    while (j < b.size() && b[j].second <= at) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < i.second; ++k) {
      if (b[k].first > at) total += b[k].first - at;
      at = std::max(at, b[k].second);
    }
    if (at < i.second) total += i.second - at;
  }
  return total;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

std::string Ms(double ms) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", ms);
  return buffer;
}

std::string PadLeft(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string PadRight(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

}  // namespace

BusyTime SummarizeBusy(const std::vector<TraceRecorder::Event>& events) {
  std::vector<Interval> compute, wait;
  for (const TraceRecorder::Event& e : events) {
    (e.op == "_Recv" ? wait : compute).push_back({e.start_us, e.start_us + std::max<int64_t>(e.duration_us, 0)});
  }
  const std::vector<Interval> busy = Merge(std::move(compute));
  BusyTime out;
  out.compute_us = Length(busy);
  out.wait_us = LengthOutside(Merge(std::move(wait)), busy);
  return out;
}

void StepProfile::Add(StepTime step) {
  std::lock_guard<std::mutex> lock(mutex_);
  steps_.push_back(std::move(step));
}

std::vector<StepTime> StepProfile::steps() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_;
}

bool StepProfile::empty() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return steps_.empty();
}

std::string StepProfile::Format() const {
  const std::vector<StepTime> all = steps();
  if (all.empty()) return "";
  // Per task, in the order tasks first appear: the mean of each figure
  // over the steps (means, unlike medians, add up the way the figures do).
  std::vector<std::string> order;
  std::map<std::string, std::vector<TaskStepTime>> by_task;
  std::vector<double> step_ms;
  for (const StepTime& s : all) {
    step_ms.push_back(s.step_ms);
    for (const TaskStepTime& t : s.tasks) {
      if (!by_task.count(t.task)) order.push_back(t.task);
      by_task[t.task].push_back(t);
    }
  }
  struct Row {
    std::string task;
    double round_trip, run, compute, wait, serialization, queued, other;
  };
  std::vector<Row> rows;
  bool remote = false;
  for (const std::string& task : order) {
    const auto& times = by_task[task];
    auto mean = [&](double TaskStepTime::*field) {
      std::vector<double> v;
      for (const TaskStepTime& t : times) v.push_back(t.*field);
      return Mean(v);
    };
    Row r{task.empty() ? "this process" : task, mean(&TaskStepTime::round_trip_ms),
          mean(&TaskStepTime::run_ms),          mean(&TaskStepTime::compute_ms),
          mean(&TaskStepTime::wait_ms),         mean(&TaskStepTime::serialization_ms),
          mean(&TaskStepTime::queued_ms),       0};
    r.other = std::max(0.0, r.run - r.compute - r.wait - r.serialization - r.queued);
    remote = remote || !task.empty();
    rows.push_back(r);
  }
  const double step = Mean(step_ms);
  std::string out = StrCat("where the time of ", all.size(), " step", all.size() == 1 ? "" : "s",
                           " went (means, ms per step; docs/distributed.md, \"Where a step's time goes\"):\n");
  out += StrCat("  step ", Ms(step), " ms\n");
  std::size_t width = 6;
  for (const Row& r : rows) width = std::max(width, r.task.size() + 2);
  const std::vector<std::string> heads = {"round trip", "on task", "compute", "waiting",
                                          "serialize",  "queued",  "other"};
  out += "  " + PadRight("task", width);
  for (const std::string& h : heads) out += PadLeft(h, 12);
  out += "\n";
  for (const Row& r : rows) {
    out += "  " + PadRight(r.task, width);
    for (double v : {r.round_trip, r.run, r.compute, r.wait, r.serialization, r.queued, r.other}) {
      out += PadLeft(Ms(v), 12);
    }
    out += "\n";
  }
  // What it says: the task that computed longest is what the others wait
  // for; the rest of the step is the wire, serialization and scheduling.
  const Row* busiest = &rows.front();
  const Row* slowest = &rows.front();
  for (const Row& r : rows) {
    if (r.compute > busiest->compute) busiest = &r;
    if (r.round_trip > slowest->round_trip) slowest = &r;
  }
  out += StrCat("  ", busiest->task, " computed longest: ", Ms(busiest->compute), " of the step's ", Ms(step), " ms");
  if (remote) {
    out += StrCat("; the last task to answer, ", slowest->task, ", took ",
                  Ms(std::max(0.0, slowest->round_trip - slowest->run)),
                  " ms beyond its own part to be asked and answered, and the caller ",
                  Ms(std::max(0.0, step - slowest->round_trip)), " ms of its own around the calls");
  }
  out += "\n";
  return out;
}

}  // namespace weft::runtime
