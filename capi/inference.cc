// The inference path shared by the C API and `weft run` (inference.h,
// docs/embedding.md).
#include "capi/inference.h"

#include <algorithm>

#include "core/base/strings.h"
#include "core/graph/graph_walk.h"
#include "core/graph/serialize.h"
#if !defined(WEFT_LITE)
#include "core/onnx/onnx.h"
#endif
#include "core/plugin/linked_plugins.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"

#if defined(WEFT_LITE)
// The CPU plugin, linked in (plugins/devices/cpu, WEFT_SDK_LINKED_PLUGIN).
extern "C" weft_status_t weft_linked_plugin_init_cpu(const weft_host_t* host, const weft_plugin_t** out_plugin);
#endif

namespace weft::inference {
namespace {

Expected<Port> PortOf(const Graph& graph, const std::string& name, const std::string& tensor) {
  WEFT_ASSIGN_OR_RETURN(Endpoint end, graph.ResolveTensor(tensor));
  const Graph::Node& node = graph.node(end.node);
  const Shape& shape = node.output_shapes[static_cast<std::size_t>(end.index)];
  Port port;
  port.name = name;
  port.tensor = tensor;
  port.dtype = node.output_types[static_cast<std::size_t>(end.index)];
  if (!shape.unknown_rank()) {
    port.rank = static_cast<int32_t>(shape.rank());
    port.dims = shape.dims();
  }
  return port;
}

const Port* Find(const std::vector<Port>& ports, std::string_view name) {
  for (const Port& p : ports) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

#if defined(WEFT_LITE)
// The lite build (docs/lite.md) reads .wg graphs only, which the full
// build's `weft optimize` writes.
constexpr const char* kLiteOnly =
    "this is a lite build, which reads .wg graphs only; convert and optimize the model with the full build's "
    "`weft optimize MODEL -o MODEL.wg` (docs/lite.md)";
#endif

// Whether a loaded plugin has a device of |type|.
Status HasDevice(const runtime::DeviceSet& devices, const std::string& type) {
  const auto& types = devices.types();
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    return NotFoundError("device type ", Quote(type), ": no loaded plugin has it (loaded: ",
                         types.empty() ? std::string("none") : StrJoin(types, ", "), ")");
  }
  WEFT_ASSIGN_OR_RETURN(auto opened, devices.Devices({type}));
  const bool any = std::any_of(opened.begin(), opened.end(), [&](const auto* d) { return d->type() == type; });
  if (!any) return UnavailableError("device type ", Quote(type), ": its plugin is loaded but finds no device here");
  return Status();
}

}  // namespace

Status CheckFeed(const Port& port, DType dtype, const Shape& shape) {
  const std::string what = StrCat("input ", Quote(port.name));
  if (dtype != port.dtype) return InvalidArgumentError(what, " is ", DTypeName(port.dtype), ", not ", DTypeName(dtype));
  if (port.rank >= 0 && !Shape(port.dims).IsCompatibleWith(shape)) {
    return InvalidArgumentError(what, ": shape ", shape.ToString(), " does not fit the model's ",
                                Shape(port.dims).ToString());
  }
  return Status();
}

std::string PortNames(const std::vector<Port>& ports) {
  std::vector<std::string> names;
  for (const Port& p : ports) names.push_back(Quote(p.name));
  return names.empty() ? std::string("none") : StrJoin(names, ", ");
}

// --- Model ------------------------------------------------------------------

Expected<Model> Model::Make(std::string source, Graph graph, std::vector<std::string> input_names,
                            std::vector<std::string> input_tensors, std::vector<std::string> output_names,
                            std::vector<std::string> output_tensors) {
  // Without names of its own, a model's outputs are the nodes nothing
  // reads, and its inputs the Placeholders they need.
  if (output_names.empty()) output_names = output_tensors = UnreadOutputs(graph);
  if (input_names.empty()) {
    std::vector<Endpoint> ends;
    for (const std::string& t : output_tensors) {
      WEFT_ASSIGN_OR_RETURN(Endpoint end, graph.ResolveTensor(t));
      ends.push_back(end);
    }
    input_names = input_tensors = PlaceholdersFeeding(graph, ends);
  }
  Model model;
  model.source_ = std::move(source);
  for (std::size_t i = 0; i < input_names.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Port port, PortOf(graph, input_names[i], input_tensors[i]));
    model.inputs_.push_back(std::move(port));
  }
  for (std::size_t i = 0; i < output_names.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Port port, PortOf(graph, output_names[i], output_tensors[i]));
    model.outputs_.push_back(std::move(port));
  }
  model.graph_ = std::move(graph);
  return model;
}

Expected<Model> Model::FromGraph(std::string source, Graph graph) {
  auto model = Make(source, std::move(graph), {}, {}, {}, {});
  if (!model.ok()) return model.status().WithContext(source);
  return model;
}

#if !defined(WEFT_LITE)
Expected<Model> Model::FromOnnx(onnx_io::ImportedModel m, std::string source) {
  auto graph = Graph::FromGraphDef(std::move(m.def));
  if (!graph.ok()) return graph.status().WithContext(source);
  auto model = Make(source, std::move(*graph), std::move(m.input_names), std::move(m.inputs), std::move(m.output_names),
                    std::move(m.outputs));
  if (!model.ok()) return model.status().WithContext(source);
  return model;
}
#endif

Expected<Model> Model::WithGraph(Graph graph) const {
  Model model = *this;
  for (const std::vector<Port>* ports : {&inputs_, &outputs_}) {
    for (const Port& p : *ports) {
      if (!graph.ResolveTensor(p.tensor).ok()) {
        return InvalidArgumentError(source_, ": the new graph has no ", Quote(p.tensor), " for ", Quote(p.name));
      }
    }
  }
  model.graph_ = std::move(graph);
  return model;
}

Expected<Model> Model::Load(const std::string& path, bool freeze, TensorReading reading) {
#if defined(WEFT_LITE)
  (void)freeze;
  if (!std::string_view(path).ends_with(".wg")) return UnimplementedError(Quote(path), ": ", kLiteOnly);
#else
  if (onnx_io::IsOnnxPath(path)) {
    onnx_io::ImportOptions import;
    import.freeze = freeze;
    WEFT_ASSIGN_OR_RETURN(onnx_io::ImportedModel m, onnx_io::ImportOnnxFile(path, import));
    return FromOnnx(std::move(m), path);
  }
#endif
  WEFT_ASSIGN_OR_RETURN(GraphDef def, ReadGraphFile(path, reading));
  auto graph = Graph::FromGraphDef(std::move(def));
  if (!graph.ok()) return graph.status().WithContext(path);
  return FromGraph(path, std::move(*graph));
}

Expected<Model> Model::FromMemory(std::string_view bytes, std::string_view format) {
  const std::string source = "<memory>";
#if defined(WEFT_LITE)
  if (format != "wg") return UnimplementedError("format ", Quote(format), ": ", kLiteOnly);
#else
  if (format == "onnx") {
    onnx_io::ImportOptions import;
    import.freeze = true;
    WEFT_ASSIGN_OR_RETURN(onnx_io::ImportedModel m, onnx_io::ImportOnnxBytes(bytes, source, "", import));
    return FromOnnx(std::move(m), source);
  }
  if (format != "wg" && format != "wgt") {
    return InvalidArgumentError("format ", Quote(format), " is not \"onnx\", \"wg\" or \"wgt\"");
  }
#endif
  WEFT_ASSIGN_OR_RETURN(GraphDef def,
                        ParseGraphDef(bytes, format == "wg" ? GraphFormat::kBinary : GraphFormat::kText, source));
  auto graph = Graph::FromGraphDef(std::move(def));
  if (!graph.ok()) return graph.status().WithContext(source);
  return FromGraph(source, std::move(*graph));
}

// --- Session ----------------------------------------------------------------

Expected<SessionSettings> SessionSettings::Defaults() {
  SessionSettings settings;
#if defined(WEFT_LITE)
  // The lite build has no TOML, so its defaults are Config's own, and no
  // graph optimizer (docs/lite.md).
  settings.session = runtime::SessionOptions::FromConfig(settings.config);
  settings.session.optimizer.level = 0;
#else
  WEFT_ASSIGN_OR_RETURN(settings.config, config::DefaultConfig());
  settings.session = runtime::SessionOptions::FromConfig(settings.config);
#endif
  return settings;
}

Session::~Session() = default;

Expected<std::unique_ptr<Session>> Session::Create(const Model& model, const SessionSettings& settings,
                                                   plugin::PluginHost* host) {
  std::unique_ptr<Session> s(new Session());
  s->source_ = model.source();
  s->any_tensor_ = settings.any_tensor;
  if (host == nullptr) {
    config::Config config = settings.config;
    // The settings' paths first, then the config's [plugins] paths.
    std::vector<std::string> paths = settings.plugin_paths;
    paths.insert(paths.end(), config.plugins.paths.begin(), config.plugins.paths.end());
    config.plugins.paths = std::move(paths);
    plugin::PluginHostOptions host_options;
    host_options.defer_device_count = true;
    host_options.skip_kinds = {plugin::PluginKind::kTransport, plugin::PluginKind::kCollectives};
    s->owned_host_ = std::make_unique<plugin::PluginHost>(std::move(config), host_options);
#if defined(WEFT_LITE)
    plugin::RegisterLinkedPlugin("cpu", weft_linked_plugin_init_cpu);
    WEFT_RETURN_IF_ERROR(s->owned_host_->Load("linked:cpu"));
#else
    WEFT_RETURN_IF_ERROR(s->owned_host_->LoadAll());
#endif
    host = s->owned_host_.get();
  }
  WEFT_ASSIGN_OR_RETURN(auto devices, runtime::DeviceSet::Open(*host, runtime::DeviceSet::Opening::kLazy));
  runtime::SessionOptions options = settings.session;
  if (!settings.device.empty()) {
    WEFT_RETURN_IF_ERROR(HasDevice(*devices, settings.device));
    auto& priority = options.placement.priority;
    priority.erase(std::remove(priority.begin(), priority.end(), settings.device), priority.end());
    priority.insert(priority.begin(), settings.device);
  }
  auto session = runtime::Session::Create(model.graph(), std::move(devices), options);
  if (!session.ok()) return session.status().WithContext(model.source());
  s->session_ = std::move(*session);
  s->inputs_ = model.inputs();
  s->outputs_ = model.outputs();
  return s;
}

const Port* Session::FindInput(std::string_view name) const { return Find(inputs_, name); }

const Port* Session::FindOutput(std::string_view name) const { return Find(outputs_, name); }

Status Session::Resolve(const std::vector<std::pair<std::string, Tensor>>& feeds,
                        const std::vector<std::string>& fetches, std::vector<std::pair<std::string, Tensor>>* tensors,
                        std::vector<std::string>* names) const {
  for (const auto& [name, value] : feeds) {
    const Port* port = FindInput(name);
    if (port == nullptr && !any_tensor_) {
      return InvalidArgumentError("the model has no input ", Quote(name), " (its inputs: ", PortNames(inputs_), ")");
    }
    const std::string& tensor = port != nullptr ? port->tensor : name;
    if (port != nullptr) WEFT_RETURN_IF_ERROR(CheckFeed(*port, value.dtype(), value.shape()));
    for (const auto& fed : *tensors) {
      if (fed.first == tensor) return InvalidArgumentError("input ", Quote(name), " is fed twice");
    }
    tensors->emplace_back(tensor, value);
  }
  for (const std::string& name : fetches) {
    const Port* port = FindOutput(name);
    if (port == nullptr && !any_tensor_) {
      return InvalidArgumentError("the model has no output ", Quote(name), " (its outputs: ", PortNames(outputs_), ")");
    }
    names->push_back(port != nullptr ? port->tensor : name);
  }
  return Status();
}

Status Session::Run(const std::vector<std::pair<std::string, Tensor>>& feeds, const std::vector<std::string>& fetches,
                    const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                    const runtime::RunOptions& options) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<std::string> names;
  WEFT_RETURN_IF_ERROR(Resolve(feeds, fetches, &tensors, &names));
  return session_->Run(tensors, names, targets, outputs, options);
}

}  // namespace weft::inference
