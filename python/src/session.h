// weft.Session and weft.InferenceSession of the Python module
// (docs/python.md).
#ifndef WEFT_PYTHON_SRC_SESSION_H_
#define WEFT_PYTHON_SRC_SESSION_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "capi/inference.h"
#include "core/config/config.h"
#include "core/runtime/cancellation.h"
#include "core/runtime/session.h"
#include "python/src/convert.h"
#include "python/src/graph.h"

namespace weft::plugin {
class PluginHost;
}

namespace weft::python {

// The thread that imported the module: the only one Python delivers
// signals to, so the only one whose runs Ctrl-C cancels.
std::thread::id MainThread();
// Puts the module's SIGINT handler in front of Python's (once).
void InstallInterruptHandler();

// A long call's registration with the Ctrl-C watcher, on the main thread
// (elsewhere it does nothing): cancel() is cancelled when SIGINT arrives
// while it lives. Make it holding the GIL; release the GIL for the work.
class Interruptible {
 public:
  Interruptible();
  ~Interruptible();
  Interruptible(const Interruptible&) = delete;
  Interruptible& operator=(const Interruptible&) = delete;
  runtime::CancellationManager* cancel() { return enabled_ ? &cancel_ : nullptr; }
  bool interrupted() const { return enabled_ && cancel_.IsCancelled(); }
  // With the GIL: raises KeyboardInterrupt (through Python's handler,
  // which has noted the signal) when Ctrl-C came, or when the caller |seen|
  // it another way; with |why| as its message when given.
  void RaiseIfInterrupted(bool seen = false, const std::string& why = "");

 private:
  bool enabled_;
  runtime::CancellationManager cancel_;
};

class PySession {
 public:
  PySession(std::shared_ptr<PyGraph> graph, const config::Config& config);
  ~PySession();
  PySession(const PySession&) = delete;
  PySession& operator=(const PySession&) = delete;

  // weft.Session.run: |fetches| a tensor, a name or a weft.Variable, or a
  // list, tuple or dict of them; the values come back in that structure.
  py::object RunAny(const py::object& fetches, const py::object& feed_dict, const py::object& trace);
  // Runs one step: |names| are tensor names (names of nodes without
  // outputs run as targets: None in their place); |feed_dict| (a dict or
  // None) maps placeholders (tensors or names) to values. With
  // |trace_path|, a Chrome trace of the step is written there.
  py::list Run(std::vector<std::string> names, const py::object& feed_dict, const std::string& trace_path);
  void Close();
  // Writes every variable of the session's graph (its VarHandle nodes, by
  // node name, as `weft train` names them) as the checkpoint bundle
  // |prefix| (python/src/checkpoint.cc); returns the prefix.
  std::string Save(const std::string& prefix);
  // Sets every variable of the graph from the bundle |path| (a prefix, or
  // a checkpoint directory: its newest bundle); returns the prefix read.
  std::string Restore(const std::string& path);
  // For the python_run_overhead benchmark: microseconds per C++ Session::Run
  // of |fetch| with one feed, |iterations| runs in each of 5 blocks (the
  // median block), with no Python in the loop.
  double TimeCppRuns(const std::string& fetch, const std::string& feed, const py::handle& value, int iterations);
  bool closed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return session_ == nullptr;
  }

 private:
  // The session and what keeps it and its plugins alive (what output
  // arrays hold), or FAILED_PRECONDITION when closed.
  std::pair<std::shared_ptr<runtime::Session>, std::shared_ptr<const void>> Open() const;

  std::shared_ptr<PyGraph> source_;
  mutable std::mutex mutex_;  // guards the pointers, not the steps
  std::shared_ptr<runtime::Session> session_;
  std::shared_ptr<const void> keepalive_;  // the plugin host and the session
};

class PyInferenceSession {
 public:
  PyInferenceSession(const std::string& path, const config::Config& config);
  ~PyInferenceSession();
  PyInferenceSession(const PyInferenceSession&) = delete;
  PyInferenceSession& operator=(const PyInferenceSession&) = delete;

  // ONNX Runtime's InferenceSession.run: |output_names| (None: all), feeds
  // by input name.
  py::list Run(const std::optional<std::vector<std::string>>& output_names, const py::dict& feeds);
  const inference::Session& session() const { return *session_; }

 private:
  std::shared_ptr<inference::Session> session_;  // output arrays hold it too
};

void BindSession(py::module_& m);
// weft.train and weft.cluster.status (python/src/train.cc).
void BindTrain(py::module_& m);

}  // namespace weft::python

#endif  // WEFT_PYTHON_SRC_SESSION_H_
