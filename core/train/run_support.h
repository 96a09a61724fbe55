// The training run's small shared pieces (docs/training.md): the clock,
// the scalar and status helpers its strategies share, and what runs a
// step (a session in this process, or a distributed one on a cluster).
// Internal to core/train.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/base/status.h"
#include "core/base/strings.h"
#include "core/distributed/dist_session.h"
#include "core/distributed/task_service.h"
#include "core/runtime/session.h"
#include "core/tensor/tensor.h"

namespace weft::train::internal {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline
    // A fetched float scalar (the loss, a metric).
    double
    ScalarValue(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kF32: return t.scalar<float>();
    case DType::kF64: return t.scalar<double>();
    default: return kNaN;
  }
}

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

inline
    // What recovery = "auto" waits out: a task that was lost, is restarting or
    // lost its variables; never bad input, a bug or a diverging loss.
    bool
    IsRecoverable(const Status& s) {
  switch (s.code()) {
    case Code::kUnavailable:
    case Code::kDeadlineExceeded:
    case Code::kAborted:
    case Code::kCancelled: return true;
    case Code::kFailedPrecondition:
      return s.message().find("is read before it was assigned a value") != std::string::npos;
    case Code::kNotFound: return s.message().find(" has no graph registered as ") != std::string::npos;
    default: return false;
  }
}

inline
    // Sync mode, recovery = "auto": what a worker's step also meets while the
    // chief recovers: accumulators not yet back at the chief's step, or not
    // yet made again on a restarted ps task.
    bool
    IsSyncRecoverable(const Status& s) {
  if (IsRecoverable(s)) return true;
  const std::string_view m = s.message();
  return (s.code() == Code::kFailedPrecondition && m.find(" but the accumulator of ") != std::string_view::npos) ||
         (s.code() == Code::kNotFound &&
          m.find("there is no gradient accumulator for variable") != std::string_view::npos);
}

inline
    // Sync mode, recovery = "auto": a restarted worker's gradients for its
    // step were kept before it was lost.
    bool
    IsKeptAlready(const Status& s) {
  return s.code() == Code::kInvalidArgument &&
         s.message().find(" sent a second gradient for step ") != std::string::npos;
}

inline
    // The chief's key, in its own store, once a synchronous run with
    // recovery = "auto" ended: a worker started again after that finishes.
    constexpr char kSyncEndedKey[] = "recovery/sync_ended";

inline
    // A step a worker recorded in a task's store (RecordProgress); -1 when
    // the value is not a number.
    int64_t
    RecordedStepValue(const std::string& value) {
  char* end = nullptr;
  const long long step = std::strtoll(value.c_str(), &end, 10);
  return end != value.c_str() && *end == '\0' ? step : -1;
}

inline
    // Whole seconds left of |timeout_s| from |start| at |now|, at least 0.
    int64_t
    SecondsLeft(Clock::time_point start, int64_t timeout_s, Clock::time_point now) {
  const int64_t spent = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
  return std::max<int64_t>(0, timeout_s - spent);
}

// --- What runs the steps
// ----------------------------------------------------------

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A session in this process, or a distributed session over a cluster.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  Status Run(const Feeds& feeds, const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
             std::vector<Tensor>* outputs, const runtime::RunOptions& options = {}) {
    return RunWith(feeds, fetches, targets, outputs, options);
  }
  virtual Status RunWith(const Feeds& feeds, const std::vector<std::string>& fetches,
                         const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                         const runtime::RunOptions& options) = 0;
  // For the first progress line: "2 threads".
  virtual std::string Describe() const = 0;
};

class LocalRunner : public StepRunner {
 public:
  explicit LocalRunner(std::unique_ptr<runtime::Session> session) : session_(std::move(session)) {}
  Status RunWith(const Feeds& feeds, const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                 std::vector<Tensor>* outputs, const runtime::RunOptions& options) override {
    return session_->Run(feeds, fetches, targets, outputs, options);
  }
  std::string Describe() const override { return StrCat(session_->intra_op_threads(), " threads"); }

 private:
  std::unique_ptr<runtime::Session> session_;
};

// A worker of a cluster: it serves its own task (the parameter servers
// pull gradients from it) and runs its steps through a distributed session
// whose variables live on the ps tasks.
class ClusterRunner : public StepRunner {
 public:
  ClusterRunner(std::unique_ptr<dist::TaskService> service, std::unique_ptr<dist::DistSession> session,
                std::string description)
      : service_(std::move(service)), session_(std::move(session)), description_(std::move(description)) {}
  ~ClusterRunner() override {
    session_.reset();  // deregisters its graphs while this task still serves
    service_.reset();
  }
  Status RunWith(const Feeds& feeds, const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                 std::vector<Tensor>* outputs, const runtime::RunOptions& options) override {
    return session_->Run(feeds, fetches, targets, outputs, options);
  }
  std::string Describe() const override { return description_; }
  Status StopTasks(const std::vector<std::string>& names, const std::string& reason) {
    return session_->StopTasks(names, reason);
  }
  Status Ping(const std::string& name, int64_t timeout_ms) { return service_->Ping(name, timeout_ms); }
  dist::TaskService& service() { return *service_; }

 private:
  std::unique_ptr<dist::TaskService> service_;
  std::unique_ptr<dist::DistSession> session_;
  std::string description_;
};

}  // namespace weft::train::internal
