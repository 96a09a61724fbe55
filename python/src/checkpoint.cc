// weft.Session.save and .restore: every variable of the session's graph to
// and from a checkpoint bundle, named by its VarHandle node as `weft train`
// names them, so that either reads the other's checkpoints
// (docs/python.md, "Checkpoints").
#include <filesystem>
#include <map>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/checkpoint/bundle.h"
#include "core/checkpoint/manager.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "core/runtime/resource_mgr.h"
#include "python/src/session.h"

namespace weft::python {
namespace {

struct SessionVariable {
  std::string name;  // the VarHandle node's
  std::shared_ptr<runtime::Variable> variable;
  const runtime::RuntimeDevice* device = nullptr;  // whose memory holds it
};

// Every variable of |session|'s graph, created where the session places it
// when no run has touched it yet (running its VarHandle node).
std::vector<SessionVariable> Variables(runtime::Session& session, const char* what) {
  std::vector<std::string> handles;
  for (const Graph::Node& n : session.graph().nodes()) {
    if (n.op_name() == "VarHandle") handles.push_back(n.name());
  }
  if (handles.empty()) Raise(InvalidArgumentError(what, ": the session's graph has no variables"));
  std::vector<Tensor> outputs;
  Status ran;
  {
    py::gil_scoped_release release;
    ran = session.Run({}, handles, {}, &outputs);
  }
  Check(ran.WithContext(what));
  std::map<const runtime::Variable*, const runtime::RuntimeDevice*> device_of;
  for (const runtime::RuntimeDevice* d : session.devices().devices()) {
    for (const auto& [key, v] : d->resources().All()) device_of[v.get()] = d;
  }
  std::vector<SessionVariable> out;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    runtime::Variable* v = runtime::HandleVariable(outputs[i]);
    const auto found = device_of.find(v);
    if (v == nullptr || found == device_of.end()) {
      Raise(InternalError(what, ": variable ", Quote(handles[i]), " was not found on any device"));
    }
    for (const auto& [key, shared] : found->second->resources().All()) {
      if (shared.get() == v) out.push_back({handles[i], shared, found->second});
    }
  }
  return out;
}

template <class T>
T CheckIn(Expected<T> value, const char* what) {
  if (!value.ok()) Raise(value.status().WithContext(what));
  return std::move(*value);
}

}  // namespace

std::string PySession::Save(const std::string& prefix) {
  auto [session, keepalive] = Open();
  if (prefix.empty()) Raise(InvalidArgumentError("save: give the checkpoint's path prefix (\"ckpt/model\")"));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const SessionVariable& sv : Variables(*session, "save")) {
    Tensor value;
    {
      std::shared_lock<std::shared_mutex> lock(sv.variable->mutex());
      if (!sv.variable->initialized()) {
        Raise(FailedPreconditionError("save: variable ", Quote(sv.name),
                                      " has no value yet; run its initializer first "
                                      "(weft.global_variables_initializer()), or restore it"));
      }
      value = sv.variable->value();
    }
    tensors.emplace_back(sv.name, Check(sv.device->CopyToHost(value)));
  }
  const std::filesystem::path dir = std::filesystem::path(prefix).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) Raise(UnavailableError("save: cannot create the directory ", Quote(dir.string()), ": ", ec.message()));
  Status written;
  {
    py::gil_scoped_release release;
    written = checkpoint::WriteBundle(prefix, tensors, {{"writer", "weft.Session.save"}});
  }
  Check(written.WithContext("save"));
  return prefix;
}

std::string PySession::Restore(const std::string& path) {
  auto [session, keepalive] = Open();
  auto reader = CheckIn(checkpoint::OpenNewestBundle(path), "restore");
  const std::vector<SessionVariable> variables = Variables(*session, "restore");
  // Every value is read and checked before any variable changes.
  std::vector<Tensor> values;
  for (const SessionVariable& sv : variables) {
    const checkpoint::TensorEntry* entry = reader->Find(sv.name);
    if (entry == nullptr) {
      Raise(NotFoundError("restore: variable ", Quote(sv.name), " is not in the checkpoint ", Quote(reader->prefix()),
                          " (`weft ckpt inspect ", reader->prefix(), "` lists what it holds)"));
    }
    const DType dtype = sv.variable->dtype();
    const Shape& shape = sv.variable->declared_shape();
    if (entry->dtype != dtype || !shape.IsCompatibleWith(entry->shape)) {
      Raise(InvalidArgumentError("restore: variable ", Quote(sv.name), " is ", DTypeName(dtype), shape.ToString(),
                                 "; the checkpoint ", Quote(reader->prefix()), " holds ", DTypeName(entry->dtype),
                                 entry->shape.ToString()));
    }
    Tensor host_value = CheckIn(reader->Read(sv.name), "restore");
    values.push_back(Check(sv.device->CopyFromHost(host_value)));
  }
  for (std::size_t i = 0; i < variables.size(); ++i) {
    std::unique_lock<std::shared_mutex> lock(variables[i].variable->mutex());
    variables[i].variable->set_value(std::move(values[i]));
  }
  return reader->prefix();
}

}  // namespace weft::python
