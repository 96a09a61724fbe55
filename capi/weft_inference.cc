// The C inference API (capi/include/weft/weft_inference.h,
// docs/embedding.md): C arguments checked and converted, then the
// inference path that `weft run` takes too (capi/inference.h). No C++
// exception crosses the C boundary.
#include "weft/weft_inference.h"

#include <cctype>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "capi/inference.h"
#include "core/base/status.h"
#include "core/base/strings.h"
#include "core/passes/pass.h"
#include "core/tensor/size.h"
#include "core/tensor/tensor.h"

struct weft_error {
  int32_t code;
  std::string message;
};

namespace {

using weft::DType;
using weft::Expected;
using weft::Quote;
using weft::Status;
using weft::StrCat;
using weft::Tensor;

using weft::inference::Port;

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

}  // namespace

struct weft_model {
  weft::inference::Model model;
};

struct weft_session_options {
  weft::inference::SessionSettings settings;
};

struct weft_session {
  std::unique_ptr<weft::inference::Session> session;
};

struct weft_array {
  Tensor tensor;
};

namespace {

// A model the C API can run: one with something to fetch.
weft_error_t* Store(Expected<weft::inference::Model> model, weft_model_t** out) {
  if (!model.ok()) return ErrorOf(model.status());
  if (model->outputs().empty()) {
    return ErrorOf(weft::InvalidArgumentError(model->source(), ": the model computes nothing to fetch"));
  }
  *out = new weft_model_t{std::move(*model)};
  return nullptr;
}

// The tensor a feed describes, over the caller's memory when it is
// aligned as kernels expect, else copied.
Expected<Tensor> FeedTensor(const weft::inference::Session& s, const weft_feed_t& feed, std::size_t index) {
  if (feed.name == nullptr) return weft::InvalidArgumentError("feeds[", index, "]: the name is NULL");
  const Port* port = s.FindInput(feed.name);
  if (port == nullptr) {
    return weft::InvalidArgumentError("feeds[", index, "]: the model has no input ", Quote(feed.name),
                                      " (its inputs: ", weft::inference::PortNames(s.inputs()), ")");
  }
  const std::string what = StrCat("input ", Quote(feed.name));
  // The dtype first (the shape may not be readable yet), the shape below.
  WEFT_RETURN_IF_ERROR(weft::inference::CheckFeed(*port, static_cast<DType>(feed.dtype), weft::Shape::UnknownRank()));
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
  WEFT_RETURN_IF_ERROR(weft::inference::CheckFeed(*port, static_cast<DType>(feed.dtype), shape));
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

weft_error_t* Info(const std::vector<Port>& ports, size_t index, weft_tensor_info_t* out, const char* what) {
  if (out == nullptr) return InvalidArgument("weft_session_", what, "_info: out is NULL");
  if (index >= ports.size()) {
    return ErrorOf(weft::OutOfRangeError(what, " ", index, " of a model with ", ports.size(), " ", what, "s"));
  }
  const Port& p = ports[index];
  out->name = p.name.c_str();
  out->dtype = static_cast<weft_dtype_t>(p.dtype);
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
    // The lite build uses the weights where they lie in the mapped file
    // (docs/lite.md: replace a model file by renaming, never by writing
    // into it); the full build copies them, as a server that outlives the
    // file's next version must.
    constexpr weft::TensorReading kReading = weft::TensorReading::kInPlace;
#else
    constexpr weft::TensorReading kReading = weft::TensorReading::kCopy;
#endif
    return Store(weft::inference::Model::Load(path, /*freeze=*/true, kReading), out);
  });
}

weft_error_t* weft_model_load_memory(const void* data, size_t size, const char* format, weft_model_t** out) {
  return Guard("weft_model_load_memory", [&]() -> weft_error_t* {
    if (data == nullptr || format == nullptr || out == nullptr) {
      return InvalidArgument("weft_model_load_memory: data, format and out must not be NULL");
    }
    *out = nullptr;
#if !defined(WEFT_LITE)
    const std::string_view f = format;
    if (f != "onnx" && f != "wg" && f != "wgt") {
      return InvalidArgument("weft_model_load_memory: format ", Quote(f), " is not \"onnx\", \"wg\" or \"wgt\"");
    }
#endif
    return Store(weft::inference::Model::FromMemory(std::string_view(static_cast<const char*>(data), size), format),
                 out);
  });
}

void weft_model_free(weft_model_t* model) { delete model; }

weft_error_t* weft_session_options_create(weft_session_options_t** out) {
  return Guard("weft_session_options_create", [&]() -> weft_error_t* {
    if (out == nullptr) return InvalidArgument("weft_session_options_create: out is NULL");
    auto defaults = weft::inference::SessionSettings::Defaults();
    if (!defaults.ok()) return ErrorOf(defaults.status());
    *out = new weft_session_options_t{std::move(*defaults)};
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
    options->settings.session.intra_op_threads = intra_op;
    options->settings.session.inter_op_threads = inter_op;
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
    options->settings.session.optimizer.level = level;
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
    options->settings.plugin_paths.clear();
    for (std::string_view rest = paths; !rest.empty();) {
      const std::size_t colon = rest.find(':');
      const std::string_view entry = rest.substr(0, colon);
      if (!entry.empty()) options->settings.plugin_paths.emplace_back(entry);
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
    options->settings.session = weft::runtime::SessionOptions::FromConfig(*config);
    options->settings.config = std::move(*config);
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
    options->settings.device = std::move(type);
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
    Expected<weft::inference::SessionSettings> defaults = weft::inference::SessionSettings();
    if (options == nullptr) defaults = weft::inference::SessionSettings::Defaults();
    if (!defaults.ok()) return ErrorOf(defaults.status());
    auto session = weft::inference::Session::Create(model->model, options != nullptr ? options->settings : *defaults);
    if (!session.ok()) return ErrorOf(session.status());
    *out = new weft_session_t{std::move(*session)};
    return nullptr;
  });
}

void weft_session_free(weft_session_t* session) { delete session; }

size_t weft_session_input_count(const weft_session_t* session) {
  return session == nullptr ? 0 : session->session->inputs().size();
}

size_t weft_session_output_count(const weft_session_t* session) {
  return session == nullptr ? 0 : session->session->outputs().size();
}

weft_error_t* weft_session_input_info(const weft_session_t* session, size_t index, weft_tensor_info_t* out) {
  return Guard("weft_session_input_info", [&]() -> weft_error_t* {
    if (session == nullptr) return InvalidArgument("weft_session_input_info: session is NULL");
    return Info(session->session->inputs(), index, out, "input");
  });
}

weft_error_t* weft_session_output_info(const weft_session_t* session, size_t index, weft_tensor_info_t* out) {
  return Guard("weft_session_output_info", [&]() -> weft_error_t* {
    if (session == nullptr) return InvalidArgument("weft_session_output_info: session is NULL");
    return Info(session->session->outputs(), index, out, "output");
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
    const weft::inference::Session& s = *session->session;
    std::vector<std::pair<std::string, Tensor>> inputs;
    for (std::size_t i = 0; i < num_feeds; ++i) {
      auto t = FeedTensor(s, feeds[i], i);
      if (!t.ok()) return ErrorOf(t.status());
      for (const auto& [name, _] : inputs) {
        if (name == feeds[i].name) return InvalidArgument("input ", Quote(feeds[i].name), " is fed twice");
      }
      inputs.emplace_back(feeds[i].name, std::move(*t));
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < num_fetches; ++i) {
      weft_fetch_t& f = fetches[i];
      f.array = nullptr;
      f.byte_size = 0;
      if (f.name == nullptr) return InvalidArgument("fetches[", i, "]: the name is NULL");
      if (s.FindOutput(f.name) == nullptr) {
        return InvalidArgument("fetches[", i, "]: the model has no output ", Quote(f.name),
                               " (its outputs: ", weft::inference::PortNames(s.outputs()), ")");
      }
      names.emplace_back(f.name);
    }
    std::vector<Tensor> outputs;
    if (Status run = session->session->Run(inputs, names, {}, &outputs); !run.ok()) {
      return ErrorOf(run.WithContext(s.source()));
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
