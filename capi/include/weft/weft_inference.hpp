// A small C++17 layer over the C inference API (weft_inference.h,
// docs/embedding.md): owners that free what they hold, errors as
// exceptions carrying the API's code and message, and typed feeds.
//
//   weft::inference::Model model = weft::inference::Model::Load("mnist_mlp.wgt");
//   weft::inference::Session session(model);
//   std::vector<float> pixels(4 * 784);
//   auto outputs = session.Run({weft::inference::Feed("images", pixels.data(), {4, 784})}, {"logits"});
//   const float* logits = outputs[0].data<float>();  // outputs[0].dims() == {4, 10}
//
// Header-only: it calls nothing but the C functions, so it works with any
// C++17 compiler against the same libweft_inference.
#ifndef WEFT_INFERENCE_HPP_
#define WEFT_INFERENCE_HPP_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "weft/weft_inference.h"

namespace weft::inference {

// A failed call: what() is the API's message, code() its WEFT_* code.
class Error : public std::runtime_error {
 public:
  Error(int32_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int32_t code() const noexcept { return code_; }

 private:
  int32_t code_;
};

// Throws |error| (taking it) as an Error; nothing when it is NULL.
inline void Check(weft_error_t* error) {
  if (error == nullptr) return;
  Error thrown(weft_error_code(error), weft_error_message(error));
  weft_error_free(error);
  throw thrown;
}

// The dtype number of a C++ element type.
template <typename T>
constexpr weft_dtype_t DTypeOf();
template <>
constexpr weft_dtype_t DTypeOf<float>() { return WEFT_DTYPE_F32; }
template <>
constexpr weft_dtype_t DTypeOf<double>() { return WEFT_DTYPE_F64; }
template <>
constexpr weft_dtype_t DTypeOf<int8_t>() { return WEFT_DTYPE_I8; }
template <>
constexpr weft_dtype_t DTypeOf<int16_t>() { return WEFT_DTYPE_I16; }
template <>
constexpr weft_dtype_t DTypeOf<int32_t>() { return WEFT_DTYPE_I32; }
template <>
constexpr weft_dtype_t DTypeOf<int64_t>() { return WEFT_DTYPE_I64; }
template <>
constexpr weft_dtype_t DTypeOf<uint8_t>() { return WEFT_DTYPE_U8; }
template <>
constexpr weft_dtype_t DTypeOf<bool>() { return WEFT_DTYPE_BOOL; }

class Model {
 public:
  static Model Load(const std::string& path) {
    weft_model_t* model = nullptr;
    Check(weft_model_load(path.c_str(), &model));
    return Model(model);
  }
  // |format|: "onnx", "wg" or "wgt"; the bytes are copied.
  static Model FromMemory(const void* data, std::size_t size, const std::string& format) {
    weft_model_t* model = nullptr;
    Check(weft_model_load_memory(data, size, format.c_str(), &model));
    return Model(model);
  }
  const weft_model_t* get() const { return model_.get(); }

 private:
  explicit Model(weft_model_t* model) : model_(model, &weft_model_free) {}
  std::unique_ptr<weft_model_t, void (*)(weft_model_t*)> model_;
};

class SessionOptions {
 public:
  SessionOptions() : options_(nullptr, &weft_session_options_free) {
    weft_session_options_t* options = nullptr;
    Check(weft_session_options_create(&options));
    options_.reset(options);
  }
  // A Weft TOML config file; call it before the setters that override it.
  SessionOptions& Config(const std::string& path) {
    Check(weft_session_options_set_config(options_.get(), path.c_str()));
    return *this;
  }
  SessionOptions& Threads(int32_t intra_op, int32_t inter_op) {
    Check(weft_session_options_set_threads(options_.get(), intra_op, inter_op));
    return *this;
  }
  SessionOptions& OptimizerLevel(int32_t level) {
    Check(weft_session_options_set_optimizer_level(options_.get(), level));
    return *this;
  }
  SessionOptions& Device(const std::string& type) {
    Check(weft_session_options_set_device(options_.get(), type.c_str()));
    return *this;
  }
  SessionOptions& PluginPath(const std::string& paths) {
    Check(weft_session_options_set_plugin_path(options_.get(), paths.c_str()));
    return *this;
  }
  const weft_session_options_t* get() const { return options_.get(); }

 private:
  std::unique_ptr<weft_session_options_t, void (*)(weft_session_options_t*)> options_;
};

// One input to a run: the caller's memory, read during Run only.
struct Feed {
  template <typename T>
  Feed(std::string input, const T* values, std::vector<int64_t> shape)
      : name(std::move(input)), dtype(DTypeOf<T>()), dims(std::move(shape)), data(values) {
    std::size_t count = 1;
    for (int64_t d : dims) count *= static_cast<std::size_t>(d < 0 ? 0 : d);
    byte_size = count * sizeof(T);
  }
  // Any dtype: |size| bytes at |bytes|, checked against the shape by Run.
  Feed(std::string input, weft_dtype_t type, std::vector<int64_t> shape, const void* bytes, std::size_t size)
      : name(std::move(input)), dtype(type), dims(std::move(shape)), data(bytes), byte_size(size) {}
  std::string name;
  weft_dtype_t dtype;
  std::vector<int64_t> dims;
  const void* data;
  std::size_t byte_size;
};

// An output of a run, in memory the library allocated.
class Array {
 public:
  weft_dtype_t dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::size_t byte_size() const { return weft_array_byte_size(array_.get()); }
  const void* raw_data() const { return weft_array_data(array_.get()); }
  // The elements as T; throws when T is not the output's dtype.
  template <typename T>
  const T* data() const {
    if (DTypeOf<T>() != dtype_) throw Error(WEFT_INVALID_ARGUMENT, "Array::data: the output's dtype is another");
    return static_cast<const T*>(raw_data());
  }

 private:
  friend class Session;
  explicit Array(const weft_fetch_t& fetch)
      : array_(fetch.array, &weft_array_free), dtype_(fetch.dtype), dims_(fetch.dims, fetch.dims + fetch.rank) {}
  std::unique_ptr<weft_array_t, void (*)(weft_array_t*)> array_;
  weft_dtype_t dtype_;
  std::vector<int64_t> dims_;
};

struct TensorInfo {
  std::string name;
  weft_dtype_t dtype;
  int32_t rank;                // -1: unknown
  std::vector<int64_t> dims;  // -1: any size
};

class Session {
 public:
  explicit Session(const Model& model, const SessionOptions& options = SessionOptions())
      : session_(nullptr, &weft_session_free) {
    weft_session_t* session = nullptr;
    Check(weft_session_create(model.get(), options.get(), &session));
    session_.reset(session);
  }

  std::vector<TensorInfo> Inputs() const { return Infos(true); }
  std::vector<TensorInfo> Outputs() const { return Infos(false); }

  // Runs once and returns the |fetches| in order.
  std::vector<Array> Run(const std::vector<Feed>& feeds, const std::vector<std::string>& fetches) {
    std::vector<weft_feed_t> c_feeds;
    for (const Feed& f : feeds) {
      c_feeds.push_back({f.name.c_str(), f.dtype, static_cast<int32_t>(f.dims.size()), f.dims.data(), f.data,
                         f.byte_size});
    }
    std::vector<weft_fetch_t> c_fetches(fetches.size());
    for (std::size_t i = 0; i < fetches.size(); ++i) c_fetches[i].name = fetches[i].c_str();
    Check(weft_session_run(session_.get(), c_feeds.data(), c_feeds.size(), c_fetches.data(), c_fetches.size()));
    std::vector<Array> out;
    try {
      out.reserve(c_fetches.size());
    } catch (...) {
      for (const weft_fetch_t& f : c_fetches) weft_array_free(f.array);
      throw;
    }
    for (const weft_fetch_t& f : c_fetches) out.push_back(Array(f));  // no throw: the room is reserved
    return out;
  }

  weft_session_t* get() { return session_.get(); }

 private:
  std::vector<TensorInfo> Infos(bool inputs) const {
    const std::size_t n = inputs ? weft_session_input_count(session_.get()) : weft_session_output_count(session_.get());
    std::vector<TensorInfo> out;
    for (std::size_t i = 0; i < n; ++i) {
      weft_tensor_info_t info;
      Check(inputs ? weft_session_input_info(session_.get(), i, &info)
                   : weft_session_output_info(session_.get(), i, &info));
      out.push_back({info.name, info.dtype, info.rank,
                     std::vector<int64_t>(info.dims, info.dims + (info.rank > 0 ? info.rank : 0))});
    }
    return out;
  }

  std::unique_ptr<weft_session_t, void (*)(weft_session_t*)> session_;
};

}  // namespace weft::inference

#endif  // WEFT_INFERENCE_HPP_
