// weft.Session and weft.InferenceSession: runs with NumPy arrays in and out,
// the GIL released while a step runs, and Ctrl-C cancelling the step
// (docs/python.md).
#include "python/src/session.h"

#include <pybind11/stl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "capi/inference.h"
#include "core/base/strings.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/cancellation.h"
#include "core/runtime/device_set.h"
#include "core/runtime/trace.h"

namespace weft::python {
namespace {

// --- Ctrl-C -----------------------------------------------------------------
//
// While a step runs, Python's own SIGINT handler only notes the signal, to
// raise KeyboardInterrupt when the main thread runs Python again: after the
// step. So the module puts a handler of its own in front of Python's: it
// tells a watcher thread (through an eventfd, which a signal handler may
// write), which cancels the steps running, then calls Python's handler as
// before. The run then returns CANCELLED and raises KeyboardInterrupt.

std::atomic<int> g_running{0};
int g_wake_fd = -1;
struct sigaction g_python_handler {};

void OnSigint(int sig, siginfo_t* info, void* context) {
  const int saved = errno;
  if (g_running.load() > 0 && g_wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(g_wake_fd, &one, sizeof one);
  }
  if ((g_python_handler.sa_flags & SA_SIGINFO) != 0) {
    g_python_handler.sa_sigaction(sig, info, context);
  } else if (g_python_handler.sa_handler != SIG_DFL && g_python_handler.sa_handler != SIG_IGN) {
    g_python_handler.sa_handler(sig);
  } else if (g_python_handler.sa_handler == SIG_DFL) {
    sigaction(SIGINT, &g_python_handler, nullptr);
    raise(SIGINT);
  }
  errno = saved;
}

class RunningSteps {
 public:
  static RunningSteps& Get() {
    static auto* steps = new RunningSteps();  // lives to the end of the process
    return *steps;
  }
  // No allocation on a run's path: a few slots, kept.
  void Add(runtime::CancellationManager* cancel) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.push_back(cancel);
  }
  void Remove(runtime::CancellationManager* cancel) {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.erase(std::find(running_.begin(), running_.end(), cancel));
  }

 private:
  RunningSteps() {
    running_.reserve(16);
    g_wake_fd = eventfd(0, EFD_CLOEXEC);
    if (g_wake_fd < 0) return;
    std::thread([this] { Watch(); }).detach();
    struct sigaction ours {};
    ours.sa_sigaction = OnSigint;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    sigaction(SIGINT, &ours, &g_python_handler);
  }
  void Watch() {
    for (;;) {
      uint64_t count;
      if (read(g_wake_fd, &count, sizeof count) < 0 && errno != EINTR) return;
      std::lock_guard<std::mutex> lock(mutex_);
      for (runtime::CancellationManager* cancel : running_) cancel->StartCancel();
    }
  }

  std::mutex mutex_;
  std::vector<runtime::CancellationManager*> running_;
};

}  // namespace

std::thread::id MainThread() {
  static const std::thread::id main = [] {
    // The interpreter's main thread is the one that imported the module.
    return std::this_thread::get_id();
  }();
  return main;
}

void InstallInterruptHandler() { RunningSteps::Get(); }

Interruptible::Interruptible() : enabled_(std::this_thread::get_id() == MainThread()) {
  if (!enabled_) return;
  RunningSteps::Get().Add(&cancel_);
  g_running.fetch_add(1);
}

Interruptible::~Interruptible() {
  if (!enabled_) return;
  g_running.fetch_sub(1);
  RunningSteps::Get().Remove(&cancel_);
}

void Interruptible::RaiseIfInterrupted(bool seen, const std::string& why) {
  if (!interrupted() && !seen) return;
  // Python's handler has noted the signal: let it run (a handler of the
  // user's may raise something else).
  if (PyErr_CheckSignals() != 0) {
    if (why.empty() || !PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) throw py::error_already_set();
    PyErr_Clear();
  }
  if (why.empty()) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  } else {
    PyErr_SetString(PyExc_KeyboardInterrupt, why.c_str());
  }
  throw py::error_already_set();
}

namespace {

// Runs |run| with the GIL released and Ctrl-C cancelling it; on an
// interrupt, raises KeyboardInterrupt (Python's handler has noted it).
Status RunInterruptibly(const std::function<Status(runtime::RunOptions)>& run) {
  Interruptible interruptible;
  runtime::RunOptions options;
  options.cancel = interruptible.cancel();
  Status status;
  {
    py::gil_scoped_release release;
    status = run(options);
  }
  interruptible.RaiseIfInterrupted();
  return status;
}

// --- Feeds and fetches -------------------------------------------------------

bool IsPlaceholder(const std::string& op) { return op == "Placeholder" || op == "PlaceholderWithDefault"; }

// "x" -> "x:0"-style endpoint of the session's graph, or NOT_FOUND saying
// why (absent, or added to the Python graph after the session was made).
Endpoint Resolve(const Graph& graph, const std::string& name, const char* what, const PyGraph* source) {
  Expected<Endpoint> end = graph.ResolveTensor(name);
  if (end.ok()) return *end;
  if (source != nullptr && source->builder().Resolve(name).ok()) {
    Raise(NotFoundError(what, " ", Quote(name),
                        ": the node was added to the graph after this session was made; "
                        "make the session once the graph is built"));
  }
  Raise(end.status().WithContext(StrCat(what, " ", Quote(name))));
}

}  // namespace

// --- weft.Session -------------------------------------------------------------

PySession::PySession(std::shared_ptr<PyGraph> graph, const config::Config& config) : source_(std::move(graph)) {
  Graph snapshot = source_->Snapshot();
  plugin::PluginHostOptions host_options;
  host_options.defer_device_count = true;
  host_options.skip_kinds = {plugin::PluginKind::kTransport, plugin::PluginKind::kCollectives};
  auto host = std::make_shared<plugin::PluginHost>(config, host_options);
  Check(host->LoadAll());
  auto devices = Check(runtime::DeviceSet::Open(*host, runtime::DeviceSet::Opening::kLazy));
  session_ = Check(
      runtime::Session::Create(std::move(snapshot), std::move(devices), runtime::SessionOptions::FromConfig(config)));
  // The session goes first, then its plugins; whoever drops the last
  // reference (an output array's capsule, close(), a run after a
  // concurrent close()), the session's threads end without the GIL.
  using Held = std::pair<std::shared_ptr<plugin::PluginHost>, std::shared_ptr<runtime::Session>>;
  keepalive_ = std::shared_ptr<const Held>(new Held(std::move(host), session_), [](const Held* held) {
    std::optional<py::gil_scoped_release> release;
    if (Py_IsInitialized() && PyGILState_Check() != 0) release.emplace();
    delete held;
  });
  InstallInterruptHandler();
}

PySession::~PySession() { Close(); }

void PySession::Close() {
  std::shared_ptr<runtime::Session> session;
  std::shared_ptr<const void> keepalive;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    session.swap(session_);
    keepalive.swap(keepalive_);
  }
  // Variables may hold fed arrays, whose release takes the GIL.
  py::gil_scoped_release release;
  session.reset();
  keepalive.reset();
}

std::pair<std::shared_ptr<runtime::Session>, std::shared_ptr<const void>> PySession::Open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (session_ == nullptr) Raise(FailedPreconditionError("this weft.Session was closed"));
  return {session_, keepalive_};
}

namespace {

// A fetch or feed key's tensor name: a weft.Tensor's, or a string.
std::string NameOf(const py::handle& item, const char* what) {
  if (PyUnicode_Check(item.ptr())) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
    if (text == nullptr) throw py::error_already_set();
    return std::string(text, static_cast<std::size_t>(size));
  }
  py::detail::make_caster<PyTensor> tensor;
  if (tensor.load(item, false)) return py::detail::cast_op<const PyTensor&>(tensor).name();
  // A weft.Variable (python/weft/graph.py) is fetched as its value.
  if (py::hasattr(item, "initializer") && py::hasattr(item, "value")) return NameOf(item.attr("value")(), what);
  Raise(
      InvalidArgumentError(what, ": ", py::repr(item).cast<std::string>(), " is not a weft.Tensor or a tensor's name"));
}

}  // namespace

py::object PySession::RunAny(const py::object& fetches, const py::object& feed_dict, const py::object& trace) {
  std::string trace_path;
  if (!trace.is_none()) trace_path = py::module_::import("os").attr("fspath")(trace).cast<std::string>();
  if (py::isinstance<py::dict>(fetches)) {
    // The keys as they are now: another thread may change the dict while
    // the step runs.
    std::vector<py::object> keys;
    std::vector<std::string> names;
    for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(fetches)) {
      keys.push_back(py::reinterpret_borrow<py::object>(key));
      names.push_back(NameOf(value, "fetch"));
    }
    py::list values = Run(std::move(names), feed_dict, trace_path);
    py::dict out;
    for (std::size_t i = 0; i < keys.size(); ++i) out[keys[i]] = values[i];
    return out;
  }
  if (py::isinstance<py::list>(fetches) || py::isinstance<py::tuple>(fetches)) {
    std::vector<std::string> names;
    for (const py::handle& item : fetches) names.push_back(NameOf(item, "fetch"));
    return Run(std::move(names), feed_dict, trace_path);
  }
  // One tensor, name or variable (the common case).
  return Run({NameOf(fetches, "fetch")}, feed_dict, trace_path)[0];
}

py::list PySession::Run(std::vector<std::string> names, const py::object& feed_dict, const std::string& trace_path) {
  // The session's plugins stay loaded while it runs (|keepalive|).
  auto [session, keepalive] = Open();
  const Graph& graph = session->graph();
  std::vector<std::pair<std::string, Tensor>> feeds;
  if (!feed_dict.is_none()) {
    py::dict feed_items;
    if (py::isinstance<py::dict>(feed_dict)) {
      feed_items = py::reinterpret_borrow<py::dict>(feed_dict);
    } else if (py::hasattr(feed_dict, "keys") && py::hasattr(feed_dict, "__getitem__")) {
      feed_items = py::dict(feed_dict);  // another mapping
    } else {
      Raise(InvalidArgumentError("feed_dict is a ", py::type::of(feed_dict).attr("__name__").cast<std::string>(),
                                 "; give a dict of placeholders (or their names) to arrays"));
    }
    for (const auto& [key, item] : feed_items) {
      std::string name = NameOf(key, "feed_dict key");
      const Endpoint end = Resolve(graph, name, "feed", source_.get());
      const Graph::Node& node = graph.node(end.node);
      auto what = [&name] { return StrCat("feed ", Quote(name)); };
      if (!IsPlaceholder(node.op_name())) {
        Raise(InvalidArgumentError(what(), ": node ", Quote(node.name()), " is a ", node.op_name(),
                                   ", not a Placeholder; only placeholders are fed"));
      }
      const DType want = node.output_types[static_cast<std::size_t>(end.index)];
      const Shape& shape = node.output_shapes[static_cast<std::size_t>(end.index)];
      // An array of the right dtype is lent without building a message.
      Tensor value = BorrowArray(item, want);
      if (!value.valid()) value = ToTensor(item, what(), want);
      if (value.dtype() != want) {
        Raise(InvalidArgumentError(what(), ": the array is ", DTypeName(value.dtype()), " and the placeholder ",
                                   DTypeName(want), "; convert it (array.astype(\"", DTypeName(want), "\"))"));
      }
      if (!shape.IsCompatibleWith(value.shape())) {
        Raise(InvalidArgumentError(what(), ": shape ", value.shape().ToString(), " does not fit the placeholder's ",
                                   shape.ToString()));
      }
      feeds.emplace_back(std::move(name), std::move(value));
    }
  }
  // A name of a node without outputs is a target (None in the results).
  std::vector<std::string> fetches, targets;
  std::vector<int> slot;  // each name's index in fetches, -1 for a target
  for (const std::string& n : names) {
    const Graph::Node* node = n.find(':') == std::string::npos ? graph.Find(n) : nullptr;
    if (node != nullptr && node->output_types.empty()) {
      if (std::find(targets.begin(), targets.end(), n) == targets.end()) targets.push_back(n);
      slot.push_back(-1);
      continue;
    }
    // A tensor fetched twice is computed once.
    auto seen = std::find(fetches.begin(), fetches.end(), n);
    slot.push_back(static_cast<int>(seen - fetches.begin()));
    if (seen == fetches.end()) fetches.push_back(n);
  }
  std::vector<Tensor> outputs;
  std::optional<runtime::TraceRecorder> trace;
  if (!trace_path.empty()) trace.emplace();
  Status status = RunInterruptibly([&](runtime::RunOptions options) {
    if (trace) options.trace = &*trace;
    return session->Run(feeds, fetches, targets, &outputs, options);
  });
  // With the GIL: a fed array's buffer may go with the last reference.
  feeds.clear();
  // A failed step's trace helps too: written either way, its own failure
  // raised only after the step's.
  const Status traced = trace ? trace->WriteJson(trace_path).WithContext("trace") : Status();
  // A fetch the step could not find is named here in the session's terms
  // (absent, or added to the graph after the session was made); looked up
  // only when the step failed, to keep it off the path of every run.
  if (!status.ok()) {
    for (const std::string& f : fetches) Resolve(graph, f, "fetch", source_.get());
  }
  Check(status);
  Check(traced);
  // The arrays keep the session and its plugins alive: their buffers are
  // the device's memory.
  py::list result;
  for (int s : slot) {
    if (s < 0) {
      result.append(py::none());
      continue;
    }
    // A tensor fetched twice gives one array, twice.
    result.append(ToNumpy(outputs[static_cast<std::size_t>(s)], keepalive));
  }
  return result;
}

double PySession::TimeCppRuns(const std::string& fetch, const std::string& feed, const py::handle& value,
                              int iterations) {
  auto [session, keepalive] = Open();
  if (iterations < 1) Raise(InvalidArgumentError("iterations must be at least 1"));
  std::vector<std::pair<std::string, Tensor>> feeds = {{feed, Check(ToTensor(value, "feed").DeepCopy())}};
  std::vector<double> blocks;
  Status status;
  {
    py::gil_scoped_release release;
    std::vector<Tensor> outputs;
    for (int block = 0; block < 6 && status.ok(); ++block) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < iterations && status.ok(); ++i) status = session->Run(feeds, {fetch}, {}, &outputs);
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
      if (block > 0) blocks.push_back(took.count() / iterations);  // the first warms up
    }
  }
  Check(status);
  std::sort(blocks.begin(), blocks.end());
  return blocks[blocks.size() / 2];
}

// --- weft.InferenceSession ---------------------------------------------------------

PyInferenceSession::PyInferenceSession(const std::string& path, const config::Config& config) {
  inference::Model model = Check(inference::Model::Load(path));
  inference::SessionSettings settings;
  settings.config = config;
  settings.session = runtime::SessionOptions::FromConfig(config);
  session_ = std::shared_ptr<inference::Session>(Check(inference::Session::Create(model, settings)));
  InstallInterruptHandler();
}

PyInferenceSession::~PyInferenceSession() = default;

py::list PyInferenceSession::Run(const std::optional<std::vector<std::string>>& output_names, const py::dict& feeds) {
  std::vector<std::string> fetches;
  if (output_names) {
    fetches = *output_names;
  } else {
    for (const inference::Port& p : session_->outputs()) fetches.push_back(p.name);
  }
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const auto& [key, value] : feeds) {
    const std::string name = key.cast<std::string>();
    const inference::Port* port = session_->FindInput(name);
    if (port == nullptr) {
      Raise(InvalidArgumentError("the model has no input ", Quote(name),
                                 " (its inputs: ", inference::PortNames(session_->inputs()), ")"));
    }
    Tensor t = ToTensor(value, StrCat("input ", Quote(name)), port->dtype);
    inputs.emplace_back(name, std::move(t));
  }
  std::vector<Tensor> outputs;
  Status status = RunInterruptibly(
      [&](runtime::RunOptions options) { return session_->Run(inputs, fetches, {}, &outputs, options); });
  {
    py::gil_scoped_release release;
    inputs.clear();
  }
  Check(status);
  py::list result;
  for (const Tensor& t : outputs) result.append(ToNumpy(t, session_));
  return result;
}

namespace {

// ONNX Runtime's names of element types, for NodeArg.type.
std::string OrtType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "tensor(float)";
    case DType::kF64: return "tensor(double)";
    case DType::kF16: return "tensor(float16)";
    case DType::kBF16: return "tensor(bfloat16)";
    case DType::kI8: return "tensor(int8)";
    case DType::kI16: return "tensor(int16)";
    case DType::kI32: return "tensor(int32)";
    case DType::kI64: return "tensor(int64)";
    case DType::kU8: return "tensor(uint8)";
    case DType::kBool: return "tensor(bool)";
    case DType::kString: return "tensor(string)";
    default: return StrCat("tensor(", DTypeName(dtype), ")");
  }
}

py::list Ports(const std::vector<inference::Port>& ports) {
  py::list out;
  for (const inference::Port& p : ports) {
    py::dict arg;
    arg["name"] = p.name;
    arg["type"] = OrtType(p.dtype);
    arg["dtype"] = std::string(DTypeName(p.dtype));
    if (p.rank < 0) {
      arg["shape"] = py::none();
    } else {
      py::list dims;
      for (int64_t d : p.dims) dims.append(d < 0 ? py::object(py::none()) : py::object(py::int_(d)));
      arg["shape"] = dims;
    }
    out.append(arg);
  }
  return out;
}

}  // namespace

void BindSession(py::module_& m) {
  py::class_<PySession>(m, "_Session", py::dynamic_attr())
      .def(py::init<std::shared_ptr<PyGraph>, const config::Config&>())
      .def("run", &PySession::RunAny, py::arg("fetches"), py::arg("feed_dict") = py::none(),
           py::arg("trace") = py::none(),
           "Runs one step and returns the fetches' values as NumPy arrays, in the fetches' structure: a tensor "
           "(or a name, or a weft.Variable: its value) gives an array, a list or tuple a list, a dict a dict. A "
           "node without outputs (an initializer, an update) runs and gives None. ``feed_dict`` maps "
           "placeholders (tensors or names) to arrays, which must have the placeholder's dtype and fit its "
           "shape. With ``trace``, a Chrome trace of the step (open it in ui.perfetto.dev) is written to that "
           "path.")
      .def("close", &PySession::Close, "Frees the session (its variables too); later runs raise.")
      .def("_save", &PySession::Save)
      .def("_restore", &PySession::Restore)
      .def("_time_cpp_runs", &PySession::TimeCppRuns)
      .def_property_readonly("closed", &PySession::closed, "Whether close() was called.");
  py::class_<PyInferenceSession>(m, "_InferenceSession")
      .def(py::init<const std::string&, const config::Config&>())
      .def("_run", &PyInferenceSession::Run)
      .def("_inputs", [](const PyInferenceSession& s) { return Ports(s.session().inputs()); })
      .def("_outputs", [](const PyInferenceSession& s) { return Ports(s.session().outputs()); });
}

}  // namespace weft::python
