// The C inference API (capi/include/weft/weft_inference.h,
// docs/embedding.md) over the core: a model is a checked GraphDef with the
// names of its inputs and outputs, a session a PluginHost, its devices and
// a runtime::Session. No C++ exception crosses the C boundary.
#include "weft/weft_inference.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/base/strings.h"
#include "core/config/config.h"
#include "core/graph/graph.h"
#include "core/graph/graph_walk.h"
#include "core/graph/serialize.h"
#if !defined(WEFT_LITE)
#include "core/onnx/onnx.h"
#endif
#include "core/passes/pass.h"
#include "core/plugin/linked_plugins.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "core/runtime/session.h"
#include "core/tensor/size.h"
#include "core/tensor/tensor.h"

struct weft_error {
  int32_t code;
  std::string message;
};

#if defined(WEFT_LITE)
// The CPU plugin, linked in (plugins/devices/cpu, WEFT_SDK_LINKED_PLUGIN).
extern "C" weft_status_t weft_linked_plugin_init_cpu(const weft_host_t* host, const weft_plugin_t** out_plugin);
#endif

namespace {

using weft::DType;
using weft::Expected;
using weft::Quote;
using weft::Status;
using weft::StrCat;
using weft::Tensor;

// One input or output: the name callers use, the graph tensor behind it,
// and what it holds.
struct Port {
  std::string name;
  std::string tensor;
  weft_dtype_t dtype = WEFT_DTYPE_INVALID;
  int32_t rank = -1;
  std::vector<int64_t> dims;
};

// Host memory the caller lent for one run: tensors over it copy nothing.
class LentBuffer : public weft::Buffer {
 public:
  LentBuffer(const void* data, uint64_t size) : Buffer(const_cast<void*>(data), size, nullptr, nullptr) {}
};

// What an error is when there is no memory left to report one.
weft_error_t g_out_of_memory{WEFT_RESOURCE_EXHAUSTED, "out of memory"};

weft_error_t* ErrorOf(const Status& status) {
  if (status.ok()) return nullptr;
  try {
    return new weft_error_t{static_cast<int32_t>(status.code()), status.message()};
  } catch (...) {
    return &g_out_of_memory;
  }
}

template <typename... Args>
weft_error_t* InvalidArgument(const Args&... args) {
  return ErrorOf(weft::InvalidArgumentError(args...));
}

// Runs |body|, turning an escaping exception into an error.
template <typename Body>
weft_error_t* Guard(const char* function, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ErrorOf(weft::ResourceExhaustedError(function, ": out of memory"));
  } catch (const std::exception& e) {
    return ErrorOf(weft::InternalError(function, ": ", e.what()));
  } catch (...) {
    return ErrorOf(weft::InternalError(function, ": an unknown exception"));
  }
}

Expected<Port> PortOf(const weft::Graph& graph, const std::string& name, const std::string& tensor) {
  WEFT_ASSIGN_OR_RETURN(weft::Endpoint end, graph.ResolveTensor(tensor));
  const weft::Graph::Node& node = graph.node(end.node);
  const weft::Shape& shape = node.output_shapes[static_cast<std::size_t>(end.index)];
  Port port;
  port.name = name;
  port.tensor = tensor;
  port.dtype = static_cast<weft_dtype_t>(node.output_types[static_cast<std::size_t>(end.index)]);
  if (!shape.unknown_rank()) {
    port.rank = static_cast<int32_t>(shape.rank());
    port.dims = shape.dims();
  }
  return port;
}

}  // namespace

struct weft_model {
  std::string source;  // the file, or "<memory>"
  weft::GraphDef def;
  std::vector<Port> inputs;
  std::vector<Port> outputs;
};

struct weft_session_options {
  weft::runtime::SessionOptions session;
  std::vector<std::string> plugin_paths;
  std::string device;           // preferred device type; empty: the default order
  weft::config::Config config;  // set_config's file, else the embedded default
};

struct weft_session {
  std::string source;
  std::unique_ptr<weft::plugin::PluginHost> host;
  std::unique_ptr<weft::runtime::Session> session;
  std::vector<Port> inputs;
  std::vector<Port> outputs;
};

struct weft_array {
  Tensor tensor;
};

namespace {

// The model's ports: ONNX's own names when it has them, else the
// Placeholders its outputs need and the nodes nothing reads.
Expected<std::unique_ptr<weft_model_t>> MakeModel(std::string source, weft::GraphDef def,
                                                  std::vector<std::string> input_names,
                                                  std::vector<std::string> input_tensors,
                                                  std::vector<std::string> output_names,
                                                  std::vector<std::string> output_tensors) {
  auto graph = weft::Graph::FromGraphDef(def);
  if (!graph.ok()) return graph.status().WithContext(source);
  if (output_names.empty()) output_names = output_tensors = weft::UnreadOutputs(*graph);
  if (output_names.empty()) return weft::InvalidArgumentError(source, ": the model computes nothing to fetch");
  if (input_names.empty()) {
    std::vector<weft::Endpoint> ends;
    for (const std::string& t : output_tensors) {
      WEFT_ASSIGN_OR_RETURN(weft::Endpoint end, graph->ResolveTensor(t));
      ends.push_back(end);
    }
    input_names = input_tensors = weft::PlaceholdersFeeding(*graph, ends);
  }
  auto model = std::make_unique<weft_model_t>();
  model->source = std::move(source);
  for (std::size_t i = 0; i < input_names.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Port port, PortOf(*graph, input_names[i], input_tensors[i]));
    model->inputs.push_back(std::move(port));
  }
  for (std::size_t i = 0; i < output_names.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Port port, PortOf(*graph, output_names[i], output_tensors[i]));
    model->outputs.push_back(std::move(port));
  }
  model->def = std::move(def);
  return model;
}

#if defined(WEFT_LITE)
// The lite build (docs/lite.md) reads .wg graphs only, which the full
// build's `weft optimize` writes.
constexpr const char* kLiteOnly =
    "this is a lite build, which reads .wg graphs only; convert and optimize the model with the full build's "
    "`weft optimize MODEL -o MODEL.wg` (docs/lite.md)";
#else
Expected<std::unique_ptr<weft_model_t>> FromOnnx(weft::onnx_io::ImportedModel m, std::string source) {
  return MakeModel(std::move(source), std::move(m.def), std::move(m.input_names), std::move(m.inputs),
                   std::move(m.output_names), std::move(m.outputs));
}
#endif

weft_error_t* Store(Expected<std::unique_ptr<weft_model_t>> model, weft_model_t** out) {
  if (!model.ok()) return ErrorOf(model.status());
  *out = model->release();
  return nullptr;
}

const Port* FindPort(const std::vector<Port>& ports, std::string_view name) {
  for (const Port& p : ports) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string PortNames(const std::vector<Port>& ports) {
  std::vector<std::string> names;
  for (const Port& p : ports) names.push_back(Quote(p.name));
  return names.empty() ? std::string("none") : weft::StrJoin(names, ", ");
}

// The tensor a feed describes, over the caller's memory when it is
// aligned as kernels expect, else copied.
Expected<Tensor> FeedTensor(const weft_session_t& s, const weft_feed_t& feed, std::size_t index) {
  if (feed.name == nullptr) return weft::InvalidArgumentError("feeds[", index, "]: the name is NULL");
  const Port* port = FindPort(s.inputs, feed.name);
  if (port == nullptr) {
    return weft::InvalidArgumentError("feeds[", index, "]: the model has no input ", Quote(feed.name),
                                      " (its inputs: ", PortNames(s.inputs), ")");
  }
  const std::string what = StrCat("input ", Quote(feed.name));
  if (feed.dtype != port->dtype) {
    return weft::InvalidArgumentError(what, " is ", weft::DTypeName(static_cast<DType>(port->dtype)), ", not ",
                                      weft::DTypeName(static_cast<DType>(feed.dtype)));
  }
  if (feed.rank < 0 || feed.rank > WEFT_MAX_RANK || (feed.rank > 0 && feed.dims == nullptr)) {
    return weft::InvalidArgumentError(what, ": rank ", feed.rank, " with dims ",
                                      feed.dims == nullptr ? "NULL" : "given", " (rank 0 to ", WEFT_MAX_RANK, ")");
  }
  if (feed.dtype == WEFT_DTYPE_STRING || feed.dtype == WEFT_DTYPE_RESOURCE) {
    return weft::UnimplementedError(what, ": ", weft::DTypeName(static_cast<DType>(feed.dtype)),
                                    " tensors cannot be fed through the C API yet");
  }
  std::vector<int64_t> dims(feed.dims, feed.dims + feed.rank);
  for (int32_t i = 0; i < feed.rank; ++i) {
    if (dims[static_cast<std::size_t>(i)] < 0) {
      return weft::InvalidArgumentError(what, ": dimension ", i, " is ", dims[static_cast<std::size_t>(i)],
                                        "; a value's dimensions are 0 or more");
    }
  }
  const weft::Shape shape(dims);
  if (port->rank >= 0 && !weft::Shape(port->dims).IsCompatibleWith(shape)) {
    return weft::InvalidArgumentError(what, ": shape ", shape.ToString(), " does not fit the model's ",
                                      weft::Shape(port->dims).ToString());
  }
  Expected<uint64_t> size = weft::TensorBytes(static_cast<DType>(feed.dtype), shape);
  if (!size.ok()) return size.status().WithContext(what);
  const uint64_t bytes = *size;
  if (feed.byte_size != bytes) {
    return weft::InvalidArgumentError(what, ": ", feed.byte_size, " bytes given; shape ", shape.ToString(), " of ",
                                      weft::DTypeName(static_cast<DType>(feed.dtype)), " takes ", bytes);
  }
  if (bytes > 0 && feed.data == nullptr) return weft::InvalidArgumentError(what, ": the data is NULL");
  if (reinterpret_cast<uintptr_t>(feed.data) % weft::HostBuffer::kAlignment == 0 && bytes > 0) {
    return Tensor(static_cast<DType>(feed.dtype), shape, std::make_shared<LentBuffer>(feed.data, bytes));
  }
  WEFT_ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(static_cast<DType>(feed.dtype), shape));
  if (bytes > 0) std::memcpy(copy.raw_data(), feed.data, bytes);
  return copy;
}

// Hands |t| to |fetch|: into the caller's buffer, or as a value.
Status Deliver(Tensor t, weft_fetch_t& fetch) {
  const std::string what = StrCat("output ", Quote(fetch.name));
  if (t.dtype() == DType::kString) {
    return weft::UnimplementedError(what, " holds strings, which the C API cannot return yet");
  }
  if (t.shape().rank() > WEFT_MAX_RANK) return weft::InvalidArgumentError(what, ": rank above ", WEFT_MAX_RANK);
  fetch.dtype = static_cast<weft_dtype_t>(t.dtype());
  fetch.rank = static_cast<int32_t>(t.shape().rank());
  for (int i = 0; i < fetch.rank; ++i) fetch.dims[i] = t.shape().dim(i);
  fetch.byte_size = t.byte_size();
  if (fetch.data == nullptr) {
    // A fetch may share a lent feed's memory (an Identity): own a copy.
    WEFT_ASSIGN_OR_RETURN(Tensor owned, Tensor::Allocate(t.dtype(), t.shape()));
    if (t.byte_size() > 0) std::memcpy(owned.raw_data(), t.raw_data(), t.byte_size());
    fetch.array = new weft_array_t{std::move(owned)};
    return Status();
  }
  if (fetch.capacity < t.byte_size()) {
    return weft::OutOfRangeError(what, " takes ", t.byte_size(), " bytes (shape ", t.shape().ToString(), " of ",
                                 weft::DTypeName(t.dtype()), "); the buffer holds ", fetch.capacity);
  }
  if (t.byte_size() > 0) std::memmove(fetch.data, t.raw_data(), t.byte_size());
  return Status();
}

// What `weft run` runs with when no config is given: the embedded
// default's [runtime], [placement], [graph_optimizer] and [plugins].
Expected<weft_session_options_t> DefaultOptions() {
  weft_session_options_t options;
#if defined(WEFT_LITE)
  // The lite build has no TOML, so its defaults are Config's own, and no
  // graph optimizer (docs/lite.md).
  options.session = weft::runtime::SessionOptions::FromConfig(options.config);
  options.session.optimizer.level = 0;
#else
  WEFT_ASSIGN_OR_RETURN(options.config, weft::config::DefaultConfig());
  options.session = weft::runtime::SessionOptions::FromConfig(options.config);
#endif
  return options;
}

// Whether a loaded plugin has a device of |type|.
Status HasDevice(const weft::runtime::DeviceSet& devices, const std::string& type) {
  const auto& types = devices.types();
  if (std::find(types.begin(), types.end(), type) == types.end()) {
    return weft::NotFoundError("device type ", Quote(type), ": no loaded plugin has it (loaded: ",
                               types.empty() ? std::string("none") : weft::StrJoin(types, ", "), ")");
  }
  WEFT_ASSIGN_OR_RETURN(auto opened, devices.Devices({type}));
  const bool any = std::any_of(opened.begin(), opened.end(), [&](const auto* d) { return d->type() == type; });
  if (!any) {
    return weft::UnavailableError("device type ", Quote(type), ": its plugin is loaded but finds no device here");
  }
  return Status();
}

weft_error_t* Info(const std::vector<Port>& ports, size_t index, weft_tensor_info_t* out, const char* what) {
  if (out == nullptr) return InvalidArgument("weft_session_", what, "_info: out is NULL");
  if (index >= ports.size()) {
    return ErrorOf(weft::OutOfRangeError(what, " ", index, " of a model with ", ports.size(), " ", what, "s"));
  }
  const Port& p = ports[index];
  out->name = p.name.c_str();
  out->dtype = p.dtype;
  out->rank = p.rank;
  out->dims = p.dims.data();
  return nullptr;
}

}  // namespace

extern "C" {

uint32_t weft_inference_api_version(void) { return WEFT_INFERENCE_API_VERSION; }

int32_t weft_error_code(const weft_error_t* error) { return error == nullptr ? WEFT_OK : error->code; }

const char* weft_error_message(const weft_error_t* error) { return error == nullptr ? "" : error->message.c_str(); }

void weft_error_free(weft_error_t* error) {
  if (error != &g_out_of_memory) delete error;
}

weft_error_t* weft_model_load(const char* path, weft_model_t** out) {
  return Guard("weft_model_load", [&]() -> weft_error_t* {
    if (path == nullptr || out == nullptr) return InvalidArgument("weft_model_load: path and out must not be NULL");
    *out = nullptr;
#if defined(WEFT_LITE)
    const std::string_view p = path;
    if (!p.ends_with(".wg")) return ErrorOf(weft::UnimplementedError(Quote(p), ": ", kLiteOnly));
#else
    if (weft::onnx_io::IsOnnxPath(path)) {
      weft::onnx_io::ImportOptions import;
      import.freeze = true;
      auto m = weft::onnx_io::ImportOnnxFile(path, import);
      if (!m.ok()) return ErrorOf(m.status());
      return Store(FromOnnx(std::move(*m), path), out);
    }
#endif
    auto def = weft::ReadGraphFile(path);
    if (!def.ok()) return ErrorOf(def.status());
    return Store(MakeModel(path, std::move(*def), {}, {}, {}, {}), out);
  });
}

weft_error_t* weft_model_load_memory(const void* data, size_t size, const char* format, weft_model_t** out) {
  return Guard("weft_model_load_memory", [&]() -> weft_error_t* {
    if (data == nullptr || format == nullptr || out == nullptr) {
      return InvalidArgument("weft_model_load_memory: data, format and out must not be NULL");
    }
    *out = nullptr;
    const std::string_view bytes(static_cast<const char*>(data), size);
    const std::string_view f = format;
#if defined(WEFT_LITE)
    if (f != "wg") return ErrorOf(weft::UnimplementedError("format ", Quote(f), ": ", kLiteOnly));
#else
    if (f == "onnx") {
      weft::onnx_io::ImportOptions import;
      import.freeze = true;
      auto m = weft::onnx_io::ImportOnnxBytes(bytes, "<memory>", "", import);
      if (!m.ok()) return ErrorOf(m.status());
      return Store(FromOnnx(std::move(*m), "<memory>"), out);
    }
    if (f != "wg" && f != "wgt") {
      return InvalidArgument("weft_model_load_memory: format ", Quote(f), " is not \"onnx\", \"wg\" or \"wgt\"");
    }
#endif
    auto def =
        weft::ParseGraphDef(bytes, f == "wg" ? weft::GraphFormat::kBinary : weft::GraphFormat::kText, "<memory>");
    if (!def.ok()) return ErrorOf(def.status());
    return Store(MakeModel("<memory>", std::move(*def), {}, {}, {}, {}), out);
  });
}

void weft_model_free(weft_model_t* model) { delete model; }

weft_error_t* weft_session_options_create(weft_session_options_t** out) {
  return Guard("weft_session_options_create", [&]() -> weft_error_t* {
    if (out == nullptr) return InvalidArgument("weft_session_options_create: out is NULL");
    auto defaults = DefaultOptions();
    if (!defaults.ok()) return ErrorOf(defaults.status());
    *out = new weft_session_options_t(std::move(*defaults));
    return nullptr;
  });
}

weft_error_t* weft_session_options_set_threads(weft_session_options_t* options, int32_t intra_op, int32_t inter_op) {
  return Guard("weft_session_options_set_threads", [&]() -> weft_error_t* {
    if (options == nullptr) return InvalidArgument("weft_session_options_set_threads: options is NULL");
    if (intra_op < 0 || inter_op < 0) {
      return InvalidArgument(
          "weft_session_options_set_threads: threads must be 0 (derived from the cores) or more, "
          "not intra_op ",
          intra_op, ", inter_op ", inter_op);
    }
    options->session.intra_op_threads = intra_op;
    options->session.inter_op_threads = inter_op;
    return nullptr;
  });
}

weft_error_t* weft_session_options_set_optimizer_level(weft_session_options_t* options, int32_t level) {
  return Guard("weft_session_options_set_optimizer_level", [&]() -> weft_error_t* {
    if (options == nullptr) return InvalidArgument("weft_session_options_set_optimizer_level: options is NULL");
#if defined(WEFT_LITE)
    if (level != 0) {
      return InvalidArgument("weft_session_options_set_optimizer_level: the lite build has no graph optimizer, so ",
                             "the level is 0, not ", level,
                             "; optimize the model beforehand with the full build's `weft optimize` (docs/lite.md)");
    }
#endif
    if (level < 0 || level > weft::passes::kMaxLevel) {
      return InvalidArgument("weft_session_options_set_optimizer_level: level ", level, " is not 0 to ",
                             weft::passes::kMaxLevel);
    }
    options->session.optimizer.level = level;
    return nullptr;
  });
}

weft_error_t* weft_session_options_set_plugin_path(weft_session_options_t* options, const char* paths) {
  return Guard("weft_session_options_set_plugin_path", [&]() -> weft_error_t* {
    if (options == nullptr || paths == nullptr) {
      return InvalidArgument("weft_session_options_set_plugin_path: options and paths must not be NULL");
    }
#if defined(WEFT_LITE)
    return ErrorOf(weft::UnimplementedError(
        "weft_session_options_set_plugin_path: the lite build loads no plugins; its CPU kernels are linked in"));
#endif
    options->plugin_paths.clear();
    for (std::string_view rest = paths; !rest.empty();) {
      const std::size_t colon = rest.find(':');
      const std::string_view entry = rest.substr(0, colon);
      if (!entry.empty()) options->plugin_paths.emplace_back(entry);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
    return nullptr;
  });
}

weft_error_t* weft_session_options_set_config(weft_session_options_t* options, const char* path) {
  return Guard("weft_session_options_set_config", [&]() -> weft_error_t* {
    if (options == nullptr || path == nullptr) {
      return InvalidArgument("weft_session_options_set_config: options and path must not be NULL");
    }
#if defined(WEFT_LITE)
    return ErrorOf(weft::UnimplementedError(
        "weft_session_options_set_config: the lite build reads no TOML; set threads, optimizer level and device with "
        "the other weft_session_options_set_* functions"));
#else
    auto config = weft::config::LoadConfigFile(path);
    if (!config.ok()) return ErrorOf(config.status());
    options->session = weft::runtime::SessionOptions::FromConfig(*config);
    options->config = std::move(*config);
    return nullptr;
#endif
  });
}

weft_error_t* weft_session_options_set_device(weft_session_options_t* options, const char* device_type) {
  return Guard("weft_session_options_set_device", [&]() -> weft_error_t* {
    if (options == nullptr || device_type == nullptr) {
      return InvalidArgument("weft_session_options_set_device: options and device_type must not be NULL");
    }
    std::string type = device_type;
    if (type.starts_with("/device:")) type = type.substr(8);
    if (type.empty()) return InvalidArgument("weft_session_options_set_device: the device type is empty");
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    options->device = std::move(type);
    return nullptr;
  });
}

void weft_session_options_free(weft_session_options_t* options) { delete options; }

weft_error_t* weft_session_create(const weft_model_t* model, const weft_session_options_t* options,
                                  weft_session_t** out) {
  return Guard("weft_session_create", [&]() -> weft_error_t* {
    if (model == nullptr || out == nullptr)
      return InvalidArgument("weft_session_create: model and out must not be NULL");
    *out = nullptr;
    Expected<weft_session_options_t> defaults = weft_session_options_t();
    if (options == nullptr) defaults = DefaultOptions();
    if (!defaults.ok()) return ErrorOf(defaults.status());
    const weft_session_options_t& o = options != nullptr ? *options : *defaults;
    weft::config::Config config = o.config;
    // The options' paths first, then the config's [plugins] paths.
    std::vector<std::string> paths = o.plugin_paths;
    paths.insert(paths.end(), config.plugins.paths.begin(), config.plugins.paths.end());
    config.plugins.paths = std::move(paths);
    weft::plugin::PluginHostOptions host_options;
    host_options.defer_device_count = true;
    host_options.skip_kinds = {weft::plugin::PluginKind::kTransport, weft::plugin::PluginKind::kCollectives};
    auto s = std::make_unique<weft_session_t>();
    s->source = model->source;
    s->host = std::make_unique<weft::plugin::PluginHost>(std::move(config), host_options);
#if defined(WEFT_LITE)
    weft::plugin::RegisterLinkedPlugin("cpu", weft_linked_plugin_init_cpu);
    if (Status loaded = s->host->Load("linked:cpu"); !loaded.ok()) return ErrorOf(loaded);
#else
    if (Status loaded = s->host->LoadAll(); !loaded.ok()) return ErrorOf(loaded);
#endif
    auto devices = weft::runtime::DeviceSet::Open(*s->host, weft::runtime::DeviceSet::Opening::kLazy);
    if (!devices.ok()) return ErrorOf(devices.status());
    weft::runtime::SessionOptions session_options = o.session;
    if (!o.device.empty()) {
      if (Status found = HasDevice(**devices, o.device); !found.ok()) return ErrorOf(found);
      auto& priority = session_options.placement.priority;
      priority.erase(std::remove(priority.begin(), priority.end(), o.device), priority.end());
      priority.insert(priority.begin(), o.device);
    }
    auto graph = weft::Graph::FromGraphDef(model->def);
    if (!graph.ok()) return ErrorOf(graph.status().WithContext(model->source));
    auto session = weft::runtime::Session::Create(std::move(*graph), std::move(*devices), session_options);
    if (!session.ok()) return ErrorOf(session.status().WithContext(model->source));
    s->session = std::move(*session);
    s->inputs = model->inputs;
    s->outputs = model->outputs;
    *out = s.release();
    return nullptr;
  });
}

void weft_session_free(weft_session_t* session) { delete session; }

size_t weft_session_input_count(const weft_session_t* session) {
  return session == nullptr ? 0 : session->inputs.size();
}

size_t weft_session_output_count(const weft_session_t* session) {
  return session == nullptr ? 0 : session->outputs.size();
}

weft_error_t* weft_session_input_info(const weft_session_t* session, size_t index, weft_tensor_info_t* out) {
  return Guard("weft_session_input_info", [&]() -> weft_error_t* {
    if (session == nullptr) return InvalidArgument("weft_session_input_info: session is NULL");
    return Info(session->inputs, index, out, "input");
  });
}

weft_error_t* weft_session_output_info(const weft_session_t* session, size_t index, weft_tensor_info_t* out) {
  return Guard("weft_session_output_info", [&]() -> weft_error_t* {
    if (session == nullptr) return InvalidArgument("weft_session_output_info: session is NULL");
    return Info(session->outputs, index, out, "output");
  });
}

weft_error_t* weft_session_run(weft_session_t* session, const weft_feed_t* feeds, size_t num_feeds,
                               weft_fetch_t* fetches, size_t num_fetches) {
  return Guard("weft_session_run", [&]() -> weft_error_t* {
    if (session == nullptr) return InvalidArgument("weft_session_run: session is NULL");
    if ((feeds == nullptr && num_feeds > 0) || (fetches == nullptr && num_fetches > 0)) {
      return InvalidArgument("weft_session_run: feeds or fetches is NULL with a count above 0");
    }
    if (num_fetches == 0) return InvalidArgument("weft_session_run: nothing to fetch");
    std::vector<std::pair<std::string, Tensor>> inputs;
    for (std::size_t i = 0; i < num_feeds; ++i) {
      auto t = FeedTensor(*session, feeds[i], i);
      if (!t.ok()) return ErrorOf(t.status());
      const std::string& tensor = FindPort(session->inputs, feeds[i].name)->tensor;
      for (const auto& [name, _] : inputs) {
        if (name == tensor) return InvalidArgument("input ", Quote(feeds[i].name), " is fed twice");
      }
      inputs.emplace_back(tensor, std::move(*t));
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < num_fetches; ++i) {
      weft_fetch_t& f = fetches[i];
      f.array = nullptr;
      f.byte_size = 0;
      if (f.name == nullptr) return InvalidArgument("fetches[", i, "]: the name is NULL");
      const Port* port = FindPort(session->outputs, f.name);
      if (port == nullptr) {
        return InvalidArgument("fetches[", i, "]: the model has no output ", Quote(f.name),
                               " (its outputs: ", PortNames(session->outputs), ")");
      }
      names.push_back(port->tensor);
    }
    std::vector<Tensor> outputs;
    if (Status run = session->session->Run(inputs, names, {}, &outputs); !run.ok()) {
      return ErrorOf(run.WithContext(session->source));
    }
    // All or nothing: a fetch that fails frees the arrays given before it.
    auto take_back = [&] {
      for (std::size_t j = 0; j < num_fetches; ++j) {
        weft_array_free(fetches[j].array);
        fetches[j].array = nullptr;
      }
    };
    try {
      for (std::size_t i = 0; i < num_fetches; ++i) {
        if (Status given = Deliver(std::move(outputs[i]), fetches[i]); !given.ok()) {
          take_back();
          return ErrorOf(given);
        }
      }
    } catch (...) {
      take_back();
      throw;
    }
    return nullptr;
  });
}

const void* weft_array_data(const weft_array_t* value) { return value == nullptr ? nullptr : value->tensor.raw_data(); }

size_t weft_array_byte_size(const weft_array_t* value) { return value == nullptr ? 0 : value->tensor.byte_size(); }

void weft_array_free(weft_array_t* value) { delete value; }

}  // extern "C"
