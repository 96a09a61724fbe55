#include "core/serving/codec_util.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/base/json.h"
#include "core/base/strings.h"
#include "core/serving/codec.h"
#include "core/tensor/size.h"
#include "weft/sdk/half.h"

namespace weft::serving {

std::string_view V2DataType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "FP32";
    case DType::kF64: return "FP64";
    case DType::kI8: return "INT8";
    case DType::kI16: return "INT16";
    case DType::kI32: return "INT32";
    case DType::kI64: return "INT64";
    case DType::kU8: return "UINT8";
    case DType::kBool: return "BOOL";
    case DType::kF16: return "FP16";
    case DType::kBF16: return "BF16";
    case DType::kString: return "BYTES";
    default: return "INVALID";
  }
}

std::string WriteError(std::string_view message) { return DumpJson(Json{{"error", std::string(message)}}); }

namespace codec_internal {
namespace {

dom::parser& ThreadParser() {
  thread_local dom::parser parser;
  return parser;
}

// Why a JSON value did not convert to an element.
enum Fault : int { kOk = 0, kNotNumber, kNotInteger, kOutOfRange, kNotBool };

// Stores for each dtype: Put converts one JSON value into *out.
template <class T>
struct FloatStore {
  using Element = T;
  static Fault Put(dom::element e, T* out, bool /*bool_from_int*/) {
    switch (e.type()) {
      case dom::element_type::DOUBLE: {
        const double d = e.get_double().value_unsafe();
        // Past float's largest value plus half an ulp the value rounds to
        // infinity (simdjson refuses what overflows a double).
        if constexpr (std::is_same_v<T, float>) {
          if (std::fabs(d) >= 0x1.ffffffp127) return kOutOfRange;
        }
        *out = static_cast<T>(d);
        return kOk;
      }
      case dom::element_type::INT64: *out = static_cast<T>(e.get_int64().value_unsafe()); return kOk;
      case dom::element_type::UINT64: *out = static_cast<T>(e.get_uint64().value_unsafe()); return kOk;
      default: return kNotNumber;
    }
  }
};

// f16 and bf16, rounded once from the JSON number (weft/sdk/half.h).
template <bool kBfloat>
struct HalfStore {
  using Element = uint16_t;
  static Fault Put(dom::element e, uint16_t* out, bool /*bool_from_int*/) {
    uint16_t bits;
    switch (e.type()) {
      case dom::element_type::DOUBLE: {
        const double d = e.get_double().value_unsafe();
        bits = kBfloat ? sdk::DoubleToBfloat16(d) : sdk::DoubleToHalf(d);
        break;
      }
      case dom::element_type::INT64: {
        const int64_t v = e.get_int64().value_unsafe();
        bits = kBfloat ? sdk::Int64ToBfloat16(v) : sdk::Int64ToHalf(v);
        break;
      }
      case dom::element_type::UINT64: return kOutOfRange;  // above 2^63: past both
      default: return kNotNumber;
    }
    if ((bits & 0x7fffu) == (kBfloat ? 0x7f80u : 0x7c00u)) return kOutOfRange;  // rounded to infinity
    *out = bits;
    return kOk;
  }
};

template <class T>
struct IntStore {
  using Element = T;
  static Fault Put(dom::element e, T* out, bool /*bool_from_int*/) {
    int64_t v;
    switch (e.type()) {
      case dom::element_type::INT64: v = e.get_int64().value_unsafe(); break;
      case dom::element_type::UINT64: return kOutOfRange;  // simdjson uses it above INT64_MAX only
      case dom::element_type::DOUBLE: {
        // 2.0 and 1e3 are integers written as floating numbers (as some
        // clients' serializers do); 1.5 is not.
        const double d = e.get_double().value_unsafe();
        if (d != std::trunc(d)) return kNotInteger;
        if (d < -0x1p63 || d >= 0x1p63) return kOutOfRange;
        v = static_cast<int64_t>(d);
        break;
      }
      default: return kNotNumber;
    }
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return kOutOfRange;
    *out = static_cast<T>(v);
    return kOk;
  }
};

struct BoolStore {
  using Element = bool;
  static Fault Put(dom::element e, bool* out, bool bool_from_int) {
    if (e.type() == dom::element_type::BOOL) {
      *out = e.get_bool().value_unsafe();
      return kOk;
    }
    if (bool_from_int && e.type() == dom::element_type::INT64) {
      const int64_t v = e.get_int64().value_unsafe();
      if (v == 0 || v == 1) {
        *out = v == 1;
        return kOk;
      }
    }
    return kNotBool;
  }
};

// Calls f(Store{}) with the store of |dtype|; false for dtypes the codecs
// do not parse (strings).
template <class F>
Status WithStore(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(FloatStore<float>{});
    case DType::kF64: return f(FloatStore<double>{});
    case DType::kF16: return f(HalfStore<false>{});
    case DType::kBF16: return f(HalfStore<true>{});
    case DType::kI8: return f(IntStore<int8_t>{});
    case DType::kI16: return f(IntStore<int16_t>{});
    case DType::kI32: return f(IntStore<int32_t>{});
    case DType::kI64: return f(IntStore<int64_t>{});
    case DType::kU8: return f(IntStore<uint8_t>{});
    case DType::kBool: return f(BoolStore{});
    default: return InvalidArgumentError("cannot read JSON values into a tensor of dtype ", DTypeName(dtype));
  }
}

// A JSON value in a message: numbers and short strings as they are.
std::string ValueText(dom::element e) {
  switch (e.type()) {
    case dom::element_type::INT64: return StrCat(e.get_int64().value_unsafe());
    case dom::element_type::UINT64: return StrCat(e.get_uint64().value_unsafe());
    case dom::element_type::DOUBLE: return StrCat(e.get_double().value_unsafe());
    case dom::element_type::BOOL: return e.get_bool().value_unsafe() ? "true" : "false";
    case dom::element_type::NULL_VALUE: return "null";
    case dom::element_type::ARRAY: return "a list";
    case dom::element_type::OBJECT: return "an object";
    case dom::element_type::STRING: {
      std::string_view s = e.get_string().value_unsafe();
      return s.size() <= 40 ? Quote(s) : StrCat(Quote(s.substr(0, 40)), "...");
    }
  }
  return "a value";
}

Status Base64Error(std::string_view input, DType dtype) {
  return InvalidArgumentError("input ", Quote(input),
                              ": base64 ({\"b64\": ...}) values are for string inputs; this input is ",
                              V2DataType(dtype));
}

}  // namespace

int64_t ListSize(dom::array list) {
  const std::size_t size = list.size();
  if (size < 0xFFFFFF) return static_cast<int64_t>(size);
  int64_t count = 0;
  for ([[maybe_unused]] dom::element e : list) ++count;
  return count;
}

bool IsBase64Object(dom::element e) {
  dom::object object;
  return !e.get_object().get(object) && !object["b64"].error();
}

JsonParser::JsonParser() : parser_(ThreadParser()) {}

JsonParser::~JsonParser() {
  if (parser_.capacity() > kKeepBytes) parser_ = dom::parser();
}

Expected<dom::element> JsonParser::Parse(std::string_view text) {
  auto result = parser_.parse(text.data(), text.size(), /*realloc_if_needed=*/true);
  if (result.error()) return InvalidArgumentError("malformed JSON: ", simdjson::error_message(result.error()));
  return result.value_unsafe();
}

std::string SpecString(const TensorSpec& spec) {
  return StrCat(spec.name, " ", V2DataType(spec.dtype), " ",
                spec.shape.unknown_rank() ? std::string("[...]") : ListString(spec.shape.dims()));
}

std::string SpecsString(const std::vector<TensorSpec>& specs, bool outputs) {
  std::vector<std::string> parts;
  for (const TensorSpec& spec : specs) parts.push_back(SpecString(spec));
  return StrCat("(the signature's ", outputs ? "outputs" : "inputs", ": ", StrJoin(parts, ", "), ")");
}

int FindSpec(const std::vector<TensorSpec>& specs, std::string_view name) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Status UnknownNameError(const std::vector<TensorSpec>& specs, std::string_view name, bool outputs) {
  std::vector<std::string> names;
  for (const TensorSpec& spec : specs) names.push_back(spec.name);
  const std::string close = ClosestMatch(name, names);
  return InvalidArgumentError("unknown ", outputs ? "output " : "input ", Quote(name),
                              close.empty() ? std::string() : StrCat("; did you mean ", Quote(close), "?"), " ",
                              SpecsString(specs, outputs));
}

Status CheckNoStringInputs(const Signature& sig) {
  for (const TensorSpec& spec : sig.inputs) {
    if (spec.dtype == DType::kString) {
      return InvalidArgumentError("input ", Quote(spec.name),
                                  " is a string (BYTES) input; the model server does not take string inputs");
    }
  }
  return Status::Ok();
}

Status CheckFits(const TensorSpec& spec, const std::vector<int64_t>& dims) {
  if (spec.shape.IsCompatibleWith(Shape(dims))) return Status::Ok();
  return InvalidArgumentError("input ", Quote(spec.name), ": shape ", ListString(dims),
                              " does not fit the signature's ", ListString(spec.shape.dims()));
}

Expected<int64_t> CheckElementCount(const TensorSpec& spec, const std::vector<int64_t>& dims, uint64_t max_elements) {
  Expected<int64_t> count = CheckedNumElements(dims);
  if (!count.ok())
    return InvalidArgumentError("input ", Quote(spec.name), ": shape ", ListString(dims), ": ",
                                count.status().message());
  if (static_cast<uint64_t>(*count) > max_elements) {
    return InvalidArgumentError("input ", Quote(spec.name), ": shape ", ListString(dims), " has ", *count,
                                " elements, more than the request's ", max_elements,
                                " bytes of JSON can hold (ragged lists, or a wrong shape)");
  }
  return count;
}

Expected<int> InputSlots::Claim(std::string_view name) {
  const int index = FindSpec(sig_.inputs, name);
  if (index < 0) return UnknownNameError(sig_.inputs, name, /*outputs=*/false);
  if (tensors_[static_cast<std::size_t>(index)].valid()) {
    return InvalidArgumentError("input ", Quote(name), " is given twice");
  }
  return index;
}

Status InputSlots::Finish(InferRequest& request) {
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].valid()) {
      return InvalidArgumentError("missing input ", Quote(sig_.inputs[i].name), " ", SpecsString(sig_.inputs, false));
    }
  }
  request.batch_size = 1;
  for (std::size_t i = 0; sig_.batched && i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.rank() < 1) {
      return InvalidArgumentError("input ", Quote(sig_.inputs[i].name), ": a scalar, but the signature is batched ",
                                  "(dimension 0 is the batch)");
    }
    if (t.dim(0) == 0) {
      return InvalidArgumentError("input ", Quote(sig_.inputs[i].name),
                                  ": no rows (dimension 0, the batch, is 0); send at least one");
    }
    if (i > 0 && t.dim(0) != tensors_[0].dim(0)) {
      return InvalidArgumentError("inputs ", Quote(sig_.inputs[0].name), " and ", Quote(sig_.inputs[i].name),
                                  " disagree on dimension 0 (the batch): ", tensors_[0].dim(0), " and ", t.dim(0),
                                  " rows");
    }
    request.batch_size = t.dim(0);
  }
  request.inputs.clear();
  for (std::size_t i = 0; i < tensors_.size(); ++i) request.inputs.push_back({sig_.inputs[i].name, tensors_[i]});
  return Status::Ok();
}

Expected<std::vector<int64_t>> InferShape(dom::element value, int max_rank, const TensorSpec& spec) {
  std::vector<int64_t> dims;
  dom::element e = value;
  dom::array list;
  while (!e.get_array().get(list)) {
    if (static_cast<int>(dims.size()) == max_rank) {
      return InvalidArgumentError("input ", Quote(spec.name), ": lists nested more than ", kMaxRank,
                                  " deep (a tensor has at most ", kMaxRank, " dimensions)");
    }
    dims.push_back(ListSize(list));
    if (dims.back() == 0) return dims;
    e = *list.begin();
  }
  if (IsBase64Object(e)) return Base64Error(spec.name, spec.dtype);
  if (e.type() == dom::element_type::OBJECT) {
    return InvalidArgumentError("input ", Quote(spec.name),
                                ": expected numbers or nested lists of numbers, got an object");
  }
  return dims;
}

ElementSink::ElementSink(const Tensor& tensor, std::string_view input, bool rows, bool bool_from_int)
    : tensor_(tensor), input_(input), rows_(rows), bool_from_int_(bool_from_int) {}

Status ElementSink::WriteNested(dom::element value, int depth) {
  return WithStore(tensor_.dtype(), [&](auto store) { return Nested<decltype(store)>(value, depth); });
}

Status ElementSink::WriteFlat(dom::element value, int depth) {
  return WithStore(tensor_.dtype(), [&](auto store) { return Flat<decltype(store)>(value, depth); });
}

template <class Store>
Status ElementSink::Nested(dom::element value, int depth) {
  using T = typename Store::Element;
  const std::vector<int64_t>& dims = tensor_.shape().dims();
  const int rank = static_cast<int>(dims.size());
  T* data = tensor_.data<T>();
  if (depth == rank) {
    if (value.type() == dom::element_type::ARRAY) return ShapeError(depth, "is a list, expected a number");
    const Fault fault = Store::Put(value, data + next_, bool_from_int_);
    if (fault != kOk) return ElementError(value, fault);
    ++next_;
    return Status::Ok();
  }
  dom::array list;
  if (value.get_array().get(list)) {
    return ShapeError(depth, StrCat("is ", ValueText(value), ", expected a list of ", dims[depth]));
  }
  const int64_t size = ListSize(list);
  if (size != dims[depth]) return ShapeError(depth, StrCat("has ", size, " values, expected ", dims[depth]));
  if (depth + 1 < rank) {
    for (dom::element e : list) WEFT_RETURN_IF_ERROR(Nested<Store>(e, depth + 1));
    return Status::Ok();
  }
  // The innermost list: the loop every element goes through.
  for (dom::element e : list) {
    const Fault fault = Store::Put(e, data + next_, bool_from_int_);
    if (fault != kOk) {
      if (e.type() == dom::element_type::ARRAY) return ShapeError(depth + 1, "is a list, expected a number");
      return ElementError(e, fault);
    }
    ++next_;
  }
  return Status::Ok();
}

template <class Store>
Status ElementSink::Flat(dom::element value, int depth) {
  using T = typename Store::Element;
  T* data = tensor_.data<T>();
  const int64_t end = tensor_.num_elements();
  dom::array list;
  if (value.get_array().get(list)) {
    if (next_ < end) {
      const Fault fault = Store::Put(value, data + next_, bool_from_int_);
      if (fault != kOk) return ElementError(value, fault);
    }
    ++next_;
    return Status::Ok();
  }
  if (depth == kMaxRank) {
    return InvalidArgumentError("input ", Quote(input_), ": \"data\" nests lists more than ", kMaxRank,
                                " deep (a tensor has at most ", kMaxRank, " dimensions)");
  }
  for (dom::element e : list) {
    if (e.type() == dom::element_type::ARRAY) {
      WEFT_RETURN_IF_ERROR(Flat<Store>(e, depth + 1));
      continue;
    }
    if (next_ < end) {
      const Fault fault = Store::Put(e, data + next_, bool_from_int_);
      if (fault != kOk) return ElementError(e, fault);
    }
    ++next_;
  }
  return Status::Ok();
}

std::string ElementSink::Where(int depth) const {
  const std::vector<int64_t>& dims = tensor_.shape().dims();
  std::string out = rows_ ? "instances" : "";
  int64_t stride = tensor_.num_elements();
  for (int k = 0; k < depth; ++k) {
    stride = dims[k] == 0 ? 0 : stride / dims[k];
    out += StrCat("[", stride == 0 ? 0 : (next_ / stride) % dims[k], "]");
  }
  return out;
}

Status ElementSink::ShapeError(int depth, std::string_view what) const {
  return InvalidArgumentError("input ", Quote(input_), ": the value at ",
                              depth == 0 && !rows_ ? "the top" : Where(depth), " ", what,
                              " (ragged or mis-nested lists: the value's shape is ", ListString(tensor_.shape().dims()),
                              ", from its first elements", rows_ ? " and the number of instances" : "", ")");
}

Status ElementSink::ElementError(dom::element value, int fault) const {
  const std::string_view dtype = V2DataType(tensor_.dtype());
  const std::string where = StrCat(
      "input ", Quote(input_), ": element ", next_,
      next_ < tensor_.num_elements() && tensor_.rank() > 0 ? StrCat(" (at ", Where(tensor_.rank()), ")") : "", ": ");
  if (IsBase64Object(value)) return Base64Error(input_, tensor_.dtype());
  switch (fault) {
    case kNotInteger: return InvalidArgumentError(where, "expected an integer for ", dtype, ", got ", ValueText(value));
    case kOutOfRange: return InvalidArgumentError(where, ValueText(value), " is out of range for ", dtype);
    case kNotBool:
      return InvalidArgumentError(where, "expected true or false", bool_from_int_ ? " (or 0 or 1)" : "",
                                  " for BOOL, got ", ValueText(value));
    default: return InvalidArgumentError(where, "expected a number for ", dtype, ", got ", ValueText(value));
  }
}

namespace {

void AppendChars(std::string& out, auto value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

// NaN and the infinities are not JSON numbers: null, as core/base/json.h
// writes them.
template <class T>
void AppendFloat(std::string& out, T value) {
  if (std::isfinite(value)) {
    AppendChars(out, value);
  } else {
    out.append("null");
  }
}

// Calls f(put) where put(out, i) appends element i of |t|.
template <class F>
void WithPut(const Tensor& t, F&& f) {
  switch (t.dtype()) {
    case DType::kF32: {
      const float* p = t.data<float>();
      return f([p](std::string& out, int64_t i) { AppendFloat(out, p[i]); });
    }
    case DType::kF64: {
      const double* p = t.data<double>();
      return f([p](std::string& out, int64_t i) { AppendFloat(out, p[i]); });
    }
    case DType::kF16: {
      const uint16_t* p = t.data<uint16_t>();
      return f([p](std::string& out, int64_t i) { AppendFloat(out, sdk::HalfToFloat(p[i])); });
    }
    case DType::kBF16: {
      const uint16_t* p = t.data<uint16_t>();
      return f([p](std::string& out, int64_t i) { AppendFloat(out, sdk::Bfloat16ToFloat(p[i])); });
    }
    case DType::kI8: return f([p = t.data<int8_t>()](std::string& out, int64_t i) { AppendChars(out, int{p[i]}); });
    case DType::kI16: return f([p = t.data<int16_t>()](std::string& out, int64_t i) { AppendChars(out, p[i]); });
    case DType::kI32: return f([p = t.data<int32_t>()](std::string& out, int64_t i) { AppendChars(out, p[i]); });
    case DType::kI64: return f([p = t.data<int64_t>()](std::string& out, int64_t i) { AppendChars(out, p[i]); });
    case DType::kU8:
      return f([p = t.data<uint8_t>()](std::string& out, int64_t i) { AppendChars(out, unsigned{p[i]}); });
    case DType::kBool:
      return f([p = t.data<bool>()](std::string& out, int64_t i) { out.append(p[i] ? "true" : "false"); });
    case DType::kString: return f([&t](std::string& out, int64_t i) { AppendJsonString(out, t.string_at(i)); });
    default: return f([](std::string& out, int64_t) { out.append("null"); });
  }
}

template <class Put>
void NestedValues(std::string& out, const Put& put, int64_t& next, std::span<const int64_t> dims) {
  if (dims.empty()) {
    put(out, next++);
    return;
  }
  out.push_back('[');
  for (int64_t i = 0; i < dims[0]; ++i) {
    if (i > 0) out.push_back(',');
    NestedValues(out, put, next, dims.subspan(1));
  }
  out.push_back(']');
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  bool plain = true;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (!plain) {
    out.append(DumpJson(Json(std::string(text))));
    return;
  }
  out.push_back('"');
  out.append(text);
  out.push_back('"');
}

void AppendNested(std::string& out, const Tensor& t, int64_t begin, std::span<const int64_t> dims) {
  WithPut(t, [&](const auto& put) {
    int64_t next = begin;
    NestedValues(out, put, next, dims);
  });
}

void AppendFlat(std::string& out, const Tensor& t) {
  WithPut(t, [&](const auto& put) {
    out.push_back('[');
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (i > 0) out.push_back(',');
      put(out, i);
    }
    out.push_back(']');
  });
}

std::size_t EstimateJsonBytes(const Tensor& t) {
  std::size_t per = 4;
  if (t.dtype() == DType::kF32 || t.dtype() == DType::kI64) per = 14;
  if (t.dtype() == DType::kF64) per = 22;
  return static_cast<std::size_t>(t.num_elements()) * per + 16;
}

}  // namespace codec_internal
}  // namespace weft::serving
