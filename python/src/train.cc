// weft.train and weft.cluster.status: `weft train` and `weft cluster
// status` from Python, with the progress streamed to a callback as dicts
// and Ctrl-C stopping the run at a step boundary (docs/python.md,
// "Training" and "Clusters").
#include <pybind11/stl.h>
#include <signal.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/base/strings.h"
#include "core/distributed/cluster.h"
#include "core/distributed/cluster_status.h"
#include "core/onnx/onnx.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/step_profile.h"
#include "core/runtime/trace.h"
#include "core/train/trainer.h"
#include "python/src/convert.h"
#include "python/src/graph.h"
#include "python/src/session.h"

namespace weft::python {
namespace {

py::object ToPython(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return py::none();
    case Json::value_t::boolean: return py::bool_(j.get<bool>());
    case Json::value_t::number_integer: return py::int_(j.get<int64_t>());
    case Json::value_t::number_unsigned: return py::int_(j.get<uint64_t>());
    case Json::value_t::number_float: return py::float_(j.get<double>());
    case Json::value_t::string: {
      // A note may carry a path that is not UTF-8: replaced, as DumpJson does.
      const auto& text = j.get_ref<const std::string&>();
      PyObject* str = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
      if (str == nullptr) throw py::error_already_set();
      return py::reinterpret_steal<py::str>(str);
    }
    case Json::value_t::array: {
      py::list out;
      for (const Json& item : j) out.append(ToPython(item));
      return out;
    }
    case Json::value_t::object: {
      py::dict out;
      for (auto it = j.begin(); it != j.end(); ++it) out[py::str(it.key())] = ToPython(it.value());
      return out;
    }
    default: return py::none();
  }
}

// The trainer's messages name the CLI's flag (--resume); from Python the
// same choice is train()'s argument.
std::string ForPython(std::string message) {
  for (std::size_t at = message.find("--resume"); at != std::string::npos; at = message.find("--resume", at)) {
    message.replace(at, 8, "resume=True");
  }
  return message;
}

using StepRange = std::pair<int64_t, int64_t>;

struct TrainArgs {
  int64_t steps = 0;
  bool resume = false;
  std::string trace_path;
  StepRange trace_steps{10, 10};
  std::optional<StepRange> profile_steps;
  std::optional<std::string> job;
  std::optional<int64_t> task;
};

// The run's progress records to |callback|, with the GIL, from the
// training thread. A callback that raises stops the run at the next step;
// its exception is raised when Train returns. KeyboardInterrupt (Ctrl-C
// noticed while the callback ran Python) stops the run the same way but
// the records go on being delivered: the checkpoint saved on the way out
// is still reported.
class Records {
 public:
  Records(py::object callback, std::atomic<int>* stop) : callback_(std::move(callback)), stop_(stop) {}
  void operator()(const Json& record) {
    py::gil_scoped_acquire gil;
    if (callback_.is_none() || error_ || !failure_.empty()) return;
    try {
      callback_(ToPython(record));
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_KeyboardInterrupt)) {
        interrupted_ = true;
      } else {
        error_ = std::make_unique<py::error_already_set>(std::move(e));
      }
      stop_->store(SIGINT);
    } catch (const std::exception& e) {
      failure_ = e.what();
      stop_->store(SIGINT);
    }
  }
  bool interrupted() const { return interrupted_; }
  void RethrowIfFailed() {
    if (error_) throw std::move(*error_);
    if (!failure_.empty()) Raise(InternalError("weft.train: passing a record to the callback failed: ", failure_));
  }
  ~Records() {
    py::gil_scoped_acquire gil;
    error_.reset();
    callback_ = py::none();
  }

 private:
  py::object callback_;
  std::atomic<int>* stop_;
  std::unique_ptr<py::error_already_set> error_;
  std::string failure_;
  bool interrupted_ = false;
};

py::dict ResultDict(const train::TrainResult& r) {
  py::dict d;
  d["step"] = r.step;
  d["loss"] = r.loss;
  d["test_loss"] = r.test_loss;
  d["test_accuracy"] = r.test_accuracy;
  d["examples_per_sec"] = r.examples_per_sec;
  d["input_wait_fraction"] = r.input_wait_fraction;
  d["checkpoint"] = r.checkpoint.empty() ? py::object(py::none()) : py::object(py::str(r.checkpoint));
  if (r.wire_bytes_per_step > 0) d["wire_bytes_per_step"] = r.wire_bytes_per_step;
  if (r.aggregated >= 0) {
    d["aggregated"] = r.aggregated;
    d["stale_dropped"] = r.stale_dropped;
  }
  if (r.late_gradients >= 0) d["late_gradients"] = r.late_gradients;
  return d;
}

StepRange CheckRange(const StepRange& range, const char* what) {
  if (range.first < 1 || range.second < range.first) {
    Raise(InvalidArgumentError(what, ": (", range.first, ", ", range.second,
                               ") is not a range of steps (first, last), from 1, first <= last"));
  }
  return range;
}

py::dict Train(const py::object& model, const config::Config& config, const TrainArgs& args,
               const py::object& callback) {
  if (config.source.rfind("<embedded", 0) == 0) {
    Raise(
        InvalidArgumentError("weft.train needs a training config: a TOML file or a dict with [model], [data], "
                             "[training] and [optimizer] (see configs/fashion_mlp.toml)"));
  }
  train::TrainerOptions options;
  if (py::isinstance<PyGraph>(model)) {
    std::shared_ptr<PyGraph> graph = model.cast<std::shared_ptr<PyGraph>>();
    GraphDef def = graph->Snapshot().ToGraphDef();
    options.model_path = "<weft.Graph>";
    options.read_model = [def](const std::string&) -> Expected<GraphDef> { return def; };
  } else {
    options.model_path = py::str(model).cast<std::string>();
    options.read_model = [](const std::string& path) { return onnx_io::ReadModelFile(path); };
  }
  const dist::ClusterSpec cluster =
      Check(dist::ResolveCluster(config, args.job, args.task, dist::ProcessEnvironment()));
  plugin::PluginHostOptions host_options;
  if (cluster.distributed()) {
    if (!cluster.self || cluster.self->job != "worker") {
      Raise(
          InvalidArgumentError("weft.train on a cluster trains as a worker: give job=\"worker\" and its task "
                               "(the ps tasks serve with `weft serve`; docs/distributed.md)"));
    }
    options.cluster = &cluster;
  } else {
    host_options.skip_kinds = {plugin::PluginKind::kTransport, plugin::PluginKind::kCollectives};
  }
  auto host = std::make_shared<plugin::PluginHost>(config, host_options);
  Check(host->LoadAll());
  options.resume = args.resume;
  options.steps = args.steps;
  runtime::TraceRecorder trace;
  if (!args.trace_path.empty()) {
    options.trace = &trace;
    std::tie(options.trace_first, options.trace_last) = CheckRange(args.trace_steps, "trace_steps");
  }
  runtime::StepProfile profile;
  if (args.profile_steps) {
    options.profile = &profile;
    std::tie(options.profile_first, options.profile_last) = CheckRange(*args.profile_steps, "profile_steps");
  }
  std::atomic<int> stop{0};
  options.stop_signal = &stop;
  Records records(callback, &stop);
  options.on_record = [&records](const Json& record) { records(record); };
  InstallInterruptHandler();
  Interruptible interruptible;
  runtime::CancellationManager::Token token = runtime::CancellationManager::kInvalidToken;
  if (interruptible.cancel() != nullptr) {
    token = interruptible.cancel()->Register([&stop] { stop.store(SIGINT); });
    // Ctrl-C came between the registrations: stop before the first step.
    if (token == runtime::CancellationManager::kInvalidToken) stop.store(SIGINT);
  }
  Expected<train::TrainResult> result = InternalError("not run");
  {
    py::gil_scoped_release release;
    result = train::Train(config, *host, options);
  }
  if (token != runtime::CancellationManager::kInvalidToken) interruptible.cancel()->Deregister(token);
  // A failed run's trace helps too; its own failure is raised last, so
  // that it hides nothing.
  const Status traced = args.trace_path.empty() ? Status() : trace.WriteJson(args.trace_path);
  records.RethrowIfFailed();
  // KeyboardInterrupt with the run's word on where it stopped and what it
  // saved.
  if (records.interrupted() || interruptible.interrupted()) {
    interruptible.RaiseIfInterrupted(
        true, ForPython(result.ok() ? std::string("stopped at the end of the run") : result.status().message()));
  }
  if (!result.ok()) Raise(Status(result.status().code(), ForPython(result.status().message())));
  Check(traced);
  py::dict out = ResultDict(*result);
  if (args.profile_steps) out["profile"] = profile.empty() ? std::string() : profile.Format();
  return out;
}

py::list ClusterStatus(const config::Config& config, int64_t timeout_ms) {
  if (timeout_ms < 1) Raise(InvalidArgumentError("timeout_ms: ", timeout_ms, " is not a positive number"));
  const dist::ClusterSpec cluster =
      Check(dist::ResolveCluster(config, std::nullopt, std::nullopt, dist::ProcessEnvironment()));
  plugin::PluginHost host(config);
  Check(host.LoadAll());
  std::vector<dist::TaskAnswer> answers;
  {
    py::gil_scoped_release release;
    auto asked = dist::AskClusterStatus(cluster, host, timeout_ms, "weft.cluster.status");
    if (!asked.ok()) {
      py::gil_scoped_acquire gil;
      Raise(asked.status());
    }
    answers = std::move(*asked);
  }
  py::list out;
  for (const dist::TaskAnswer& a : answers) out.append(ToPython(dist::TaskAnswerJson(a)));
  return out;
}

}  // namespace

void BindTrain(py::module_& m) {
  m.def("_train", [](const py::object& model, const config::Config& config, int64_t steps, bool resume,
                     const py::object& callback, const std::string& trace, const StepRange& trace_steps,
                     const std::optional<StepRange>& profile_steps, const std::optional<std::string>& job,
                     const std::optional<int64_t>& task) {
    TrainArgs args;
    args.steps = steps;
    args.resume = resume;
    args.trace_path = trace;
    args.trace_steps = trace_steps;
    args.profile_steps = profile_steps;
    args.job = job;
    args.task = task;
    return Train(model, config, args, callback);
  });
  m.def("_cluster_status", &ClusterStatus);
}

}  // namespace weft::python
