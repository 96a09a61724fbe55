// The ONNX importer's driver: reading and checking the model (ONNX's
// checker and strict shape inference), refusing unsupported ops all at
// once, deciding how initializers are stored, and converting node by node
// (the converters are in onnx_ops.cc). See docs/onnx.md.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/base/file_util.h"
#include "core/base/strings.h"
#include "core/graph/serialize.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io {

// --- Types and tensors ---------------------------------------------------------------

Expected<DType> DTypeFromOnnx(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::kF32;
    case onnx::TensorProto::DOUBLE: return DType::kF64;
    case onnx::TensorProto::FLOAT16: return DType::kF16;
    case onnx::TensorProto::BFLOAT16: return DType::kBF16;
    case onnx::TensorProto::INT8: return DType::kI8;
    case onnx::TensorProto::INT16: return DType::kI16;
    case onnx::TensorProto::INT32: return DType::kI32;
    case onnx::TensorProto::INT64: return DType::kI64;
    case onnx::TensorProto::UINT8: return DType::kU8;
    case onnx::TensorProto::BOOL: return DType::kBool;
    case onnx::TensorProto::STRING: return DType::kString;
    default: break;
  }
  const std::string name =
      onnx::TensorProto_DataType_IsValid(t) ? onnx::TensorProto_DataType_Name(t) : StrCat("number ", t);
  return UnimplementedError(
      "element type ", name,
      " has no Weft equivalent (Weft has f16, bf16, f32, f64, i8, i16, i32, i64, u8, bool, string)");
}

int32_t DTypeToOnnx(DType dtype) {
  switch (dtype) {
    case DType::kF32: return onnx::TensorProto::FLOAT;
    case DType::kF64: return onnx::TensorProto::DOUBLE;
    case DType::kF16: return onnx::TensorProto::FLOAT16;
    case DType::kBF16: return onnx::TensorProto::BFLOAT16;
    case DType::kI8: return onnx::TensorProto::INT8;
    case DType::kI16: return onnx::TensorProto::INT16;
    case DType::kI32: return onnx::TensorProto::INT32;
    case DType::kI64: return onnx::TensorProto::INT64;
    case DType::kU8: return onnx::TensorProto::UINT8;
    case DType::kBool: return onnx::TensorProto::BOOL;
    case DType::kString: return onnx::TensorProto::STRING;
    default: return onnx::TensorProto::UNDEFINED;
  }
}

namespace {

// Reads |length| bytes at |offset| of the external data file |location|
// (relative to |base_dir|, inside it).
Expected<std::string> ReadExternal(const std::string& tensor, const std::string& location, uint64_t offset,
                                   std::optional<uint64_t> length, const std::string& base_dir) {
  const std::filesystem::path rel(location);
  if (location.empty() || rel.is_absolute() ||
      std::any_of(rel.begin(), rel.end(), [](const std::filesystem::path& p) { return p == ".."; })) {
    return InvalidArgumentError("initializer ", Quote(tensor), ": external data location ", Quote(location),
                                " must be a relative path inside the model's folder");
  }
  const std::filesystem::path path = std::filesystem::path(base_dir.empty() ? "." : base_dir) / rel;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return NotFoundError("initializer ", Quote(tensor), ": its data is in the external file ", Quote(location),
                         ", which cannot be read at ", Quote(path.string()), " (", ec.message(),
                         "); keep the data files beside the .onnx file");
  }
  const uint64_t want = length.value_or(size >= offset ? size - offset : 0);
  if (offset > size || want > size - offset) {
    return InvalidArgumentError("initializer ", Quote(tensor), ": external file ", Quote(location), " has ", size,
                                " bytes, fewer than offset ", offset, " + length ", want);
  }
  std::ifstream in(path, std::ios::binary);
  std::string data(want, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(data.data(), static_cast<std::streamsize>(want));
  if (!in) return DataLossError("initializer ", Quote(tensor), ": reading ", Quote(path.string()), " failed");
  return data;
}

template <class T, class Field>
void CopyField(const Field& field, Tensor& t) {
  T* out = t.data<T>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<T>(field.Get(i));
}

}  // namespace

Expected<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir) {
  const std::string& name = proto.name();
  auto dtype = DTypeFromOnnx(proto.data_type());
  if (!dtype.ok()) return dtype.status().WithContext(StrCat("tensor ", Quote(name)));
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgumentError("tensor ", Quote(name), ": negative dimension in ", ListString(dims));
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) {
      return InvalidArgumentError("tensor ", Quote(name), ": shape ", ListString(dims), " has too many elements");
    }
    count *= d;
  }
  const Shape shape(dims);
  if (*dtype == DType::kString) {
    if (proto.string_data_size() != count) {
      return InvalidArgumentError("tensor ", Quote(name), ": ", proto.string_data_size(), " strings for shape ",
                                  shape.ToString());
    }
    std::vector<std::string> strings(proto.string_data().begin(), proto.string_data().end());
    return Tensor::Strings(strings, shape);
  }
  const uint64_t elem = DTypeSize(*dtype);
  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  std::string external_bytes;
  const std::string* raw = proto.has_raw_data() ? &proto.raw_data() : nullptr;
  if (external) {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const auto& kv : proto.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoull(kv.value());
        if (kv.key() == "length") length = std::stoull(kv.value());
      } catch (const std::exception&) {
        return InvalidArgumentError("tensor ", Quote(name), ": external data ", kv.key(), " ", Quote(kv.value()),
                                    " is not a number");
      }
    }
    WEFT_ASSIGN_OR_RETURN(external_bytes, ReadExternal(name, location, offset, length, base_dir));
    raw = &external_bytes;
  }
  if (raw != nullptr) {
    if (static_cast<uint64_t>(count) > raw->size() / std::max<uint64_t>(elem, 1) ||
        raw->size() != static_cast<uint64_t>(count) * elem) {
      return InvalidArgumentError("tensor ", Quote(name), ": ", raw->size(), " bytes of data for ", DTypeName(*dtype),
                                  shape.ToString(), ", which needs ", static_cast<uint64_t>(count) * elem);
    }
    WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(*dtype, shape));
    if (count > 0) std::memcpy(t.raw_data(), raw->data(), raw->size());
    return t;
  }
  int64_t have = 0;
  switch (*dtype) {
    case DType::kF32: have = proto.float_data_size(); break;
    case DType::kF64: have = proto.double_data_size(); break;
    case DType::kI64: have = proto.int64_data_size(); break;
    default: have = proto.int32_data_size(); break;
  }
  if (have != count) {
    return InvalidArgumentError("tensor ", Quote(name), ": ", have, " values for ", DTypeName(*dtype), shape.ToString(),
                                ", which has ", count);
  }
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(*dtype, shape));
  switch (*dtype) {
    case DType::kF32: CopyField<float>(proto.float_data(), t); break;
    case DType::kF64: CopyField<double>(proto.double_data(), t); break;
    case DType::kI64: CopyField<int64_t>(proto.int64_data(), t); break;
    case DType::kI32: CopyField<int32_t>(proto.int32_data(), t); break;
    case DType::kI16: CopyField<int16_t>(proto.int32_data(), t); break;
    case DType::kI8: CopyField<int8_t>(proto.int32_data(), t); break;
    case DType::kU8: CopyField<uint8_t>(proto.int32_data(), t); break;
    case DType::kBool: CopyField<bool>(proto.int32_data(), t); break;
    case DType::kF16:
    case DType::kBF16: CopyField<uint16_t>(proto.int32_data(), t); break;  // the bits
    default: return InternalError("tensor ", Quote(name), ": unhandled dtype");
  }
  return t;
}

Tensor Int64s(const std::vector<int64_t>& values) { return Tensor::FromVector<int64_t>(values); }
Tensor Int64s(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::FromVector<int64_t>(values, shape);
}

std::vector<int64_t> ToInts(const Tensor& t) {
  std::vector<int64_t> out(static_cast<std::size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int64_t v = 0;
    switch (t.dtype()) {
      case DType::kI64: v = t.data<int64_t>()[i]; break;
      case DType::kI32: v = t.data<int32_t>()[i]; break;
      case DType::kI16: v = t.data<int16_t>()[i]; break;
      case DType::kI8: v = t.data<int8_t>()[i]; break;
      case DType::kU8: v = t.data<uint8_t>()[i]; break;
      case DType::kBool: v = t.data<bool>()[i] ? 1 : 0; break;
      case DType::kF32: v = static_cast<int64_t>(t.data<float>()[i]); break;
      case DType::kF64: v = static_cast<int64_t>(t.data<double>()[i]); break;
      default: break;
    }
    out[static_cast<std::size_t>(i)] = v;
  }
  return out;
}

Expected<Tensor> ScalarOf(DType dtype, double value) {
  switch (dtype) {
    case DType::kF32: return Tensor::Scalar<float>(static_cast<float>(value));
    case DType::kF64: return Tensor::Scalar<double>(value);
    case DType::kI64: return Tensor::Scalar<int64_t>(static_cast<int64_t>(value));
    case DType::kI32: return Tensor::Scalar<int32_t>(static_cast<int32_t>(value));
    case DType::kI16: return Tensor::Scalar<int16_t>(static_cast<int16_t>(value));
    case DType::kI8: return Tensor::Scalar<int8_t>(static_cast<int8_t>(value));
    case DType::kU8: return Tensor::Scalar<uint8_t>(static_cast<uint8_t>(value));
    case DType::kBool: return Tensor::Scalar<bool>(value != 0);
    default: return UnimplementedError("a scalar of ", DTypeName(dtype), " (only numbers and bool)");
  }
}

std::string SanitiseName(std::string_view onnx_name) {
  std::string out;
  for (char c : onnx_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-' || c == '/';
    out.push_back(ok ? c : '_');
  }
  while (!out.empty() && out.front() == '/') out.erase(out.begin());
  while (!out.empty() && out.back() == '/') out.pop_back();
  // "a//b" would be an empty scope.
  for (std::size_t p; (p = out.find("//")) != std::string::npos;) out.erase(p, 1);
  return out.empty() ? std::string("node") : out;
}

// --- NodeContext -------------------------------------------------------------------------

GraphBuilder& NodeContext::b() { return importer_.b(); }
const ImportOptions& NodeContext::options() const { return importer_.options(); }

Expected<Output> NodeContext::In(int i) {
  if (!has_input(i)) return Error("input ", i, " is missing");
  return importer_.Materialise(node_.input(i), importer_.LayoutOf(node_.input(i)));
}

Expected<Output> NodeContext::InNhwc(int i) {
  if (!has_input(i)) return Error("input ", i, " is missing");
  return importer_.MaterialiseNhwc(node_.input(i));
}

bool NodeContext::IsNhwc(int i) const {
  if (!has_input(i)) return false;
  const Value* v = importer_.Find(node_.input(i));
  return v != nullptr && v->nhwc.valid();
}

Expected<Output> NodeContext::InWithLayout(int i, Layout layout) {
  if (!has_input(i)) return Error("input ", i, " is missing");
  return importer_.Materialise(node_.input(i), layout);
}

Layout NodeContext::LayoutOf(int i) const { return has_input(i) ? importer_.LayoutOf(node_.input(i)) : Layout::kAsIs; }

Tensor NodeContext::Known(int i) const {
  if (!has_input(i)) return Tensor();
  const Value* v = importer_.Find(node_.input(i));
  if (v == nullptr) return Tensor();
  // A trainable initializer is not a constant.
  if (!v->initializer.empty() && !importer_.options().freeze && IsFloating(v->known.dtype())) return Tensor();
  return v->known;
}

Tensor NodeContext::Initial(int i) const {
  if (!has_input(i)) return Tensor();
  const Value* v = importer_.Find(node_.input(i));
  return v == nullptr ? Tensor() : v->known;
}

bool NodeContext::Trainable(int i) const {
  if (!has_input(i)) return false;
  const Value* v = importer_.Find(node_.input(i));
  return v != nullptr && !v->initializer.empty() && !importer_.options().freeze && IsFloating(v->known.dtype());
}

Expected<std::vector<int64_t>> NodeContext::KnownInts(int i, std::string_view what) const {
  const Tensor t = Known(i);
  if (!t.valid()) {
    return Unsupported(what, " (input ", i, ", ", Quote(has_input(i) ? node_.input(i) : std::string()),
                       ") must be known when the model is imported (an initializer or a Constant, or computed from "
                       "them and static shapes); Weft takes it as an attribute");
  }
  if (t.dtype() != DType::kI64 && t.dtype() != DType::kI32) {
    return Error(what, " (input ", i, ") must be integers, got ", DTypeName(t.dtype()));
  }
  return ToInts(t);
}

Expected<double> NodeContext::KnownScalar(int i, std::string_view what) const {
  const Tensor t = Known(i);
  if (!t.valid()) {
    return Unsupported(what, " (input ", i, ") must be known when the model is imported (an initializer or Constant)");
  }
  if (t.num_elements() != 1) return Error(what, " (input ", i, ") must have one element, got ", t.TypeString());
  switch (t.dtype()) {
    case DType::kF32: return static_cast<double>(t.data<float>()[0]);
    case DType::kF64: return t.data<double>()[0];
    default: break;
  }
  if (t.dtype() == DType::kF16 || t.dtype() == DType::kBF16 || t.dtype() == DType::kString) {
    return Unsupported(what, " (input ", i, ") of type ", DTypeName(t.dtype()));
  }
  return static_cast<double>(ToInts(t)[0]);
}

Shape NodeContext::InShape(int i) const {
  if (!has_input(i)) return Shape::UnknownRank();
  const Value* v = importer_.Find(node_.input(i));
  if (v == nullptr) return Shape::UnknownRank();
  Shape shape = v->out.valid() ? v->out.shape() : (v->known.valid() ? v->known.shape() : Shape::UnknownRank());
  if (!v->out.valid() && v->nhwc.valid() && v->nhwc.shape().rank() == 4) {
    const Shape& n = v->nhwc.shape();
    shape = Shape{n.dim(0), n.dim(3), n.dim(1), n.dim(2)};
  }
  if (!v->shape.unknown_rank()) {
    if (shape.unknown_rank()) return v->shape;
    auto merged = shape.Merge(v->shape);
    if (merged.ok()) return *merged;
  }
  return shape;
}

DType NodeContext::InDType(int i) const {
  if (!has_input(i)) return DType::kInvalid;
  const Value* v = importer_.Find(node_.input(i));
  if (v == nullptr) return DType::kInvalid;
  if (v->out.valid()) return v->out.dtype();
  if (v->nhwc.valid()) return v->nhwc.dtype();
  if (v->known.valid()) return v->known.dtype();
  return v->dtype;
}

const onnx::AttributeProto* NodeContext::Attr(std::string_view name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}
bool NodeContext::HasAttr(std::string_view name) const { return Attr(name) != nullptr; }
int64_t NodeContext::Int(std::string_view name, int64_t def) const {
  const auto* a = Attr(name);
  return a == nullptr ? def : a->i();
}
double NodeContext::Float(std::string_view name, double def) const {
  const auto* a = Attr(name);
  return a == nullptr ? def : static_cast<double>(a->f());
}
std::string NodeContext::Str(std::string_view name, std::string_view def) const {
  const auto* a = Attr(name);
  return a == nullptr ? std::string(def) : a->s();
}
std::vector<int64_t> NodeContext::Ints(std::string_view name, std::vector<int64_t> def) const {
  const auto* a = Attr(name);
  return a == nullptr ? def : std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
std::vector<double> NodeContext::Floats(std::string_view name) const {
  const auto* a = Attr(name);
  std::vector<double> out;
  if (a != nullptr) {
    for (float f : a->floats()) out.push_back(f);
  }
  return out;
}

void NodeContext::SetOut(int i, const Output& out) {
  if (!has_output(i)) return;
  Value* v = importer_.Find(node_.output(i));
  if (v != nullptr) v->out = out;
}

void NodeContext::Alias(int out, int in) {
  if (!has_output(out) || !has_input(in)) return;
  const Value* src = importer_.Find(node_.input(in));
  Value* dst = importer_.Find(node_.output(out));
  if (src == nullptr || dst == nullptr) return;
  dst->out = src->out;
  dst->nhwc = src->nhwc;
  dst->known = src->known;
  dst->initializer = src->initializer;
}

void NodeContext::SetOutNhwc(int i, const Output& out) {
  if (!has_output(i)) return;
  Value* v = importer_.Find(node_.output(i));
  if (v != nullptr) v->nhwc = out;
}

void NodeContext::SetKnown(int i, const Tensor& value) {
  if (!has_output(i)) return;
  Value* v = importer_.Find(node_.output(i));
  if (v != nullptr) v->known = value;
}

std::string NodeContext::Name(std::string_view suffix) const {
  std::string base = SanitiseName(node_.name().empty() ? node_.op_type() : node_.name());
  if (!suffix.empty()) base += StrCat("/", suffix);
  return base;
}

Expected<Output> NodeContext::Param(const Tensor& value, const std::string& name) {
  return importer_.Param(value, name);
}

Status NodeContext::MaterialiseCaptures(const onnx::GraphProto& graph) { return importer_.MaterialiseCaptures(graph); }

Expected<std::vector<Output>> NodeContext::Subgraph(const onnx::GraphProto& graph, const std::vector<Output>& inputs,
                                                    std::vector<Tensor>* known) {
  return importer_.ConvertSubgraph(graph, inputs, known);
}

// --- Importer ------------------------------------------------------------------------------

Importer::Importer(const onnx::ModelProto& model, std::string source, std::string base_dir,
                   const ImportOptions& options)
    : model_(model), source_(std::move(source)), base_dir_(std::move(base_dir)), options_(options) {}

Value* Importer::Find(const std::string& name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

Layout Importer::LayoutOf(const std::string& name) const {
  auto v = values_.find(name);
  if (v == values_.end() || v->second.initializer.empty()) return Layout::kAsIs;
  auto it = layouts_.find(v->second.initializer);
  return it == layouts_.end() ? Layout::kAsIs : it->second;
}

namespace {

// |t| rearranged for |layout|.
Expected<Tensor> Rearranged(const Tensor& t, Layout layout, int64_t group) {
  if (layout == Layout::kAsIs) return t;
  if (t.rank() != 4 || (t.dtype() != DType::kF32 && t.dtype() != DType::kF64)) {
    return InternalError("conv weights must be 4-D f32 or f64, got ", t.TypeString());
  }
  const int64_t o = t.dim(0), i = t.dim(1), kh = t.dim(2), kw = t.dim(3);
  const std::size_t es = DTypeSize(t.dtype());
  Shape shape;
  // Destination index of source element (oo, ii, y, x).
  std::function<int64_t(int64_t, int64_t, int64_t, int64_t)> dst;
  if (layout == Layout::kConvHwio) {
    shape = Shape{kh, kw, i, o};
    dst = [=](int64_t oo, int64_t ii, int64_t y, int64_t x) { return ((y * kw + x) * i + ii) * o + oo; };
  } else {
    const int64_t c = group, m = o / group;
    shape = Shape{kh, kw, c, m};
    dst = [=](int64_t oo, int64_t, int64_t y, int64_t x) { return ((y * kw + x) * c + oo / m) * m + oo % m; };
  }
  WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), shape));
  const char* src = static_cast<const char*>(t.raw_data());
  char* dest = static_cast<char*>(out.raw_data());
  int64_t s = 0;
  for (int64_t oo = 0; oo < o; ++oo) {
    for (int64_t ii = 0; ii < i; ++ii) {
      for (int64_t y = 0; y < kh; ++y) {
        for (int64_t x = 0; x < kw; ++x, ++s) {
          std::memcpy(dest + static_cast<std::size_t>(dst(oo, ii, y, x)) * es, src + static_cast<std::size_t>(s) * es,
                      es);
        }
      }
    }
  }
  return out;
}

}  // namespace

Expected<Output> Importer::Param(const Tensor& value, const std::string& name) {
  const bool variable = !options_.freeze && IsFloating(value.dtype());
  if (!variable) return b_.Const(value, name);
  if (subgraph_depth_ > 0) {
    // A variable and its initialising Assign would be inside the cond or
    // loop, out of reach of the init NoOp.
    return UnimplementedError("parameters derived from initializers (", Quote(name),
                              ") inside an If, Loop or Scan body can only be constants: import the model with "
                              "--freeze (weft run does), which makes it an inference graph");
  }
  Output handle =
      b_.Op("VarHandle", {}, {{"dtype", AttrValue(value.dtype())}, {"shape", AttrValue(value.shape())}}, name);
  {
    auto scope = b_.NameScope(handle.node_name());
    Output init_value = b_.Const(value, "value");
    inits_.push_back(b_.Op("Assign", {handle, init_value}, {}, "init"));
  }
  ++variables_;
  WEFT_RETURN_IF_ERROR(b_.status());
  return b_.Op("ReadVariable", {handle}, {{"dtype", AttrValue(value.dtype())}}, handle.node_name() + "/read");
}

Expected<Output> Importer::Materialise(const std::string& name, Layout layout) {
  Value* v = Find(name);
  if (v == nullptr) {
    return InvalidArgumentError("input ", Quote(name),
                                " is not a graph input, an initializer or an earlier node's "
                                "output (a dangling input)");
  }
  if (v->out.valid()) return v->out;
  if (v->nhwc.valid()) {
    v->out = b_.Op("Transpose", {v->nhwc}, {{"perm", AttrValue(std::vector<int64_t>{0, 3, 1, 2})}},
                   SanitiseName(name) + "/nchw");
    WEFT_RETURN_IF_ERROR(b_.status());
    return v->out;
  }
  if (!v->known.valid()) {
    auto it = unproduced_.find(name);
    if (it != unproduced_.end()) {
      return UnimplementedError("tensor ", Quote(name), " is an optional output that Weft does not compute (",
                                it->second, ")");
    }
    return InternalError("tensor ", Quote(name), " has no value yet");
  }
  if (!v->initializer.empty()) {
    const Layout stored = LayoutOf(name);
    if (stored != layout) return InternalError("initializer ", Quote(v->initializer), " requested in another layout");
    // An Identity of an initializer shares its node.
    Value* root = Find(v->initializer);
    if (root != nullptr && root != v && root->out.valid()) {
      v->out = root->out;
      return v->out;
    }
    int64_t group = 1;
    if (layout == Layout::kDepthwiseHwcm) {
      auto g = groups_.find(v->initializer);
      group = g == groups_.end() ? 1 : g->second;
    }
    WEFT_ASSIGN_OR_RETURN(Tensor stored_value, Rearranged(v->known, layout, group));
    WEFT_ASSIGN_OR_RETURN(v->out, Param(stored_value, SanitiseName(v->initializer)));
    if (root != nullptr) root->out = v->out;
    return v->out;
  }
  v->out = b_.Const(v->known, SanitiseName(name));
  WEFT_RETURN_IF_ERROR(b_.status());
  return v->out;
}

Expected<Output> Importer::MaterialiseNhwc(const std::string& name) {
  Value* v = Find(name);
  if (v != nullptr && v->nhwc.valid()) return v->nhwc;
  WEFT_ASSIGN_OR_RETURN(Output nchw, Materialise(name, LayoutOf(name)));
  if (nchw.shape().rank() != 4) {
    return InvalidArgumentError("tensor ", Quote(name), " of shape ", nchw.shape().ToString(),
                                " is not 4-D [N, C, H, W]");
  }
  v->nhwc =
      b_.Op("Transpose", {nchw}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}}, SanitiseName(name) + "/nhwc");
  WEFT_RETURN_IF_ERROR(b_.status());
  return v->nhwc;
}

Status Importer::CheckOpsSupported(const onnx::GraphProto& graph) {
  struct Missing {
    int count = 0;
    std::string first;
  };
  std::map<std::string, Missing> missing;
  std::function<void(const onnx::GraphProto&)> scan = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
      const std::string key = default_domain ? node.op_type() : StrCat(node.domain(), "::", node.op_type());
      if (!default_domain || Converters().find(node.op_type()) == Converters().end()) {
        Missing& m = missing[key];
        if (m.count++ == 0) m.first = node.name().empty() ? StrCat("#", &node - &g.node(0)) : node.name();
      }
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) scan(attr.g());
        for (const auto& sub : attr.graphs()) scan(sub);
      }
    }
  };
  scan(graph);
  if (missing.empty()) return Status();
  std::string list;
  int total = 0;
  for (const auto& [op, m] : missing) {
    list += StrCat("\n  ", op, " x", m.count, " (first: node ", Quote(m.first), ")");
    total += m.count;
  }
  return UnimplementedError(source_, ": ", missing.size(), " op type", missing.size() == 1 ? "" : "s", " (", total,
                            " node", total == 1 ? "" : "s",
                            ") cannot be imported, as Weft has no mapping for them:", list,
                            "\n(docs/onnx.md lists the ops Weft imports)");
}

Status Importer::DecideLayouts(const onnx::GraphProto& graph) {
  // Every use of each floating initializer, through Identity nodes.
  std::map<std::string, std::string> alias;  // tensor -> initializer
  for (const auto& [name, proto] : initializers_) alias[name] = name;
  struct Use {
    const onnx::NodeProto* node;
    int input;
  };
  std::map<std::string, std::vector<Use>> uses;
  // Uses in subgraphs count: an If branch or Loop body may read any
  // initializer of the main graph.
  std::function<void(const onnx::GraphProto&)> scan = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      for (int i = 0; i < node.input_size(); ++i) {
        auto it = alias.find(node.input(i));
        if (it == alias.end()) continue;
        if (node.op_type() == "Identity" && node.output_size() == 1) {
          alias[node.output(0)] = it->second;
          continue;
        }
        uses[it->second].push_back({&node, i});
      }
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) scan(attr.g());
        for (const auto& sub : attr.graphs()) scan(sub);
      }
    }
    // An output (of the model or of a subgraph) that is an initializer is
    // a use as ONNX lays it out.
    for (const auto& out : g.output()) {
      auto it = alias.find(out.name());
      if (it != alias.end()) uses[it->second].push_back({nullptr, -1});
    }
    // An output (of the model or of a subgraph) that is an initializer is
    // a use as ONNX lays it out.
    for (const auto& out : g.output()) {
      auto it = alias.find(out.name());
      if (it != alias.end()) uses[it->second].push_back({nullptr, -1});
    }
  };
  scan(graph);
  for (const auto& [init, list] : uses) {
    const onnx::TensorProto* proto = initializers_[init];
    if (proto->dims_size() != 4) continue;
    std::optional<Layout> layout;
    int64_t group = 1;
    bool same = true;
    for (const Use& use : list) {
      Layout l = Layout::kAsIs;
      int64_t g = 1;
      if (use.node != nullptr && use.node->op_type() == "Conv" && use.input == 1) {
        for (const auto& a : use.node->attribute()) {
          if (a.name() == "group") g = a.i();
        }
        if (g == 1) {
          l = Layout::kConvHwio;
        } else if (proto->dims(1) == 1 && g > 1 && proto->dims(0) % g == 0) {
          l = Layout::kDepthwiseHwcm;
        }
      }
      if (layout.has_value() && (*layout != l || g != group)) same = false;
      layout = l;
      group = g;
    }
    if (same && layout.has_value() && *layout != Layout::kAsIs) {
      layouts_[init] = *layout;
      groups_[init] = group;
    }
  }
  return Status();
}

Status Importer::ConvertNode(const onnx::NodeProto& node, int index, int count, const std::string& graph_name) {
  const auto& table = Converters();
  auto it = table.find(node.op_type());
  // A subgraph's node is named inside its parent's context ("model: node
  // 'loop' (Loop, ...): node 'add' (Add, 1 of 3) of subgraph 'body'").
  const std::string where =
      StrCat(graph_name.empty() ? source_ + ": " : std::string(), "node ",
             Quote(node.name().empty() ? StrCat("#", index) : node.name()), " (", node.op_type(), ", ", index + 1,
             " of ", count, ")", graph_name.empty() ? std::string() : StrCat(" of subgraph ", Quote(graph_name)));
  for (const std::string& out : node.output()) {
    if (out.empty()) continue;
    if (values_.count(out) != 0) {
      return InvalidArgumentError(where, ": output ", Quote(out), " is already produced by another node");
    }
    Value v;
    values_.emplace(out, std::move(v));
  }
  for (const std::string& in : node.input()) {
    if (!in.empty() && values_.count(in) == 0) {
      return InvalidArgumentError(where, ": input ", Quote(in),
                                  " is not a graph input, an initializer or an earlier node's output (a dangling "
                                  "input)");
    }
  }
  NodeContext ctx(*this, node, opset_);
  Status status = it->second(ctx);
  if (status.ok()) status = b_.status();
  if (!status.ok()) return status.WithContext(where);
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const Value& v = values_[node.output(i)];
    if (!v.out.valid() && !v.nhwc.valid() && !v.known.valid()) {
      // An optional output this converter does not produce: an error only
      // when something reads it (see Materialise / the graph outputs).
      unproduced_[node.output(i)] = where;
    }
  }
  return Status();
}

namespace {

// The names |graph| and its nested subgraphs read and define.
void CollectNames(const onnx::GraphProto& graph, std::set<std::string>& used, std::set<std::string>& defined) {
  for (const auto& input : graph.input()) defined.insert(input.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) {
    for (const std::string& in : node.input()) {
      if (!in.empty()) used.insert(in);
    }
    for (const std::string& out : node.output()) {
      if (!out.empty()) defined.insert(out);
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) CollectNames(attr.g(), used, defined);
      for (const auto& g : attr.graphs()) CollectNames(g, used, defined);
    }
  }
  for (const auto& output : graph.output()) used.insert(output.name());
}

// The outer values |graph| reads (ONNX subgraphs see every name of their
// enclosing graphs).
std::vector<std::string> Captures(const onnx::GraphProto& graph) {
  std::set<std::string> used, defined;
  CollectNames(graph, used, defined);
  std::vector<std::string> out;
  for (const std::string& name : used) {
    if (defined.count(name) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace

Status Importer::MaterialiseCaptures(const onnx::GraphProto& graph) {
  for (const std::string& name : Captures(graph)) {
    const Value* v = Find(name);
    if (v == nullptr || (!v->out.valid() && !v->nhwc.valid() && !v->known.valid())) continue;
    auto out = Materialise(name, LayoutOf(name));
    if (!out.ok()) return out.status().WithContext(StrCat("subgraph ", Quote(graph.name()), " reads ", Quote(name)));
  }
  return b_.status();
}

Expected<std::vector<Output>> Importer::ConvertSubgraph(const onnx::GraphProto& graph,
                                                        const std::vector<Output>& inputs, std::vector<Tensor>* known) {
  const std::string gname = graph.name().empty() ? std::string("subgraph") : graph.name();
  if (static_cast<std::size_t>(graph.input_size()) != inputs.size()) {
    return InvalidArgumentError("subgraph ", Quote(gname), " has ", graph.input_size(), " inputs; the op gives it ",
                                inputs.size());
  }
  // What the subgraph may change of the outer values it reads (a Transpose
  // cached in a branch) is undone when it is converted.
  std::map<std::string, Value> saved;
  for (const std::string& name : Captures(graph)) {
    if (const Value* v = Find(name)) saved.emplace(name, *v);
  }
  std::vector<std::string> locals;
  auto define = [&](const std::string& name, Value v) -> Status {
    if (values_.count(name) != 0) {
      return InvalidArgumentError("subgraph ", Quote(gname), " defines ", Quote(name),
                                  ", a name its enclosing graph already has");
    }
    values_.emplace(name, std::move(v));
    locals.push_back(name);
    return Status();
  };
  Status status;
  for (const auto& init : graph.initializer()) {
    // A subgraph's initializers are constants (a variable cannot be made
    // inside a cond or loop).
    auto t = TensorFromProto(init, base_dir_);
    if (!t.ok()) {
      status = t.status().WithContext(StrCat("subgraph ", Quote(gname)));
      break;
    }
    Value v;
    v.known = std::move(*t);
    v.shape = v.known.shape();
    v.dtype = v.known.dtype();
    status = define(init.name(), std::move(v));
    if (!status.ok()) break;
  }
  for (int k = 0; status.ok() && k < graph.input_size(); ++k) {
    Value v;
    v.out = inputs[static_cast<std::size_t>(k)];
    v.dtype = v.out.dtype();
    status = define(graph.input(k).name(), std::move(v));
  }
  const int count = graph.node_size();
  ++subgraph_depth_;
  for (int i = 0; status.ok() && i < count; ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty() && values_.count(out) == 0) locals.push_back(out);
    }
    status = ConvertNode(graph.node(i), i, count, gname);
  }
  --subgraph_depth_;
  std::vector<Output> results;
  for (int k = 0; status.ok() && k < graph.output_size(); ++k) {
    const std::string& name = graph.output(k).name();
    auto value = Materialise(name, LayoutOf(name));
    if (!value.ok()) {
      status = value.status().WithContext(StrCat("subgraph ", Quote(gname), " output ", Quote(name)));
      break;
    }
    // Through an Identity made here, so that an outer value or a constant
    // returned by a branch or body belongs to it.
    results.push_back(b_.Op("Identity", {*value}, {}, SanitiseName(name)));
    status = b_.status();
    if (known != nullptr) {
      const Value* v = Find(name);
      known->push_back(v != nullptr ? v->known : Tensor());
    }
  }
  for (const std::string& name : locals) {
    values_.erase(name);
    unproduced_.erase(name);
  }
  for (auto& [name, v] : saved) values_[name] = std::move(v);
  if (!status.ok()) return status;
  return results;
}

Expected<std::pair<Shape, DType>> ValueInfoType(const onnx::ValueInfoProto& info) {
  if (!info.type().has_tensor_type()) {
    return UnimplementedError("value ", Quote(info.name()),
                              " is not a tensor (sequences, maps and optionals are not "
                              "supported)");
  }
  const auto& tt = info.type().tensor_type();
  WEFT_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(tt.elem_type()));
  if (!tt.has_shape()) return std::make_pair(Shape::UnknownRank(), dtype);
  std::vector<int64_t> dims;
  for (const auto& d : tt.shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : Shape::kUnknownDim);
  return std::make_pair(Shape(dims), dtype);
}

namespace {

// Attribute values that ONNX 1.12's own shape inference divides by or
// indexes with unchecked (a model with stride 0 kills the process with
// SIGFPE inside libonnx, as the importer's fuzzer found): refused here
// first, naming the node.
Status PrecheckWindowAttrs(const onnx::GraphProto& graph, const std::string& source) {
  static const std::set<std::string> window_ops = {"Conv",        "ConvTranspose", "ConvInteger",
                                                   "QLinearConv", "MaxPool",       "AveragePool",
                                                   "LpPool",      "MaxUnpool",     "DeformConv"};
  for (const auto& node : graph.node()) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(attr.g(), source));
      for (const auto& sub : attr.graphs()) WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(sub, source));
    }
    if (window_ops.count(node.op_type()) == 0) continue;
    for (const auto& attr : node.attribute()) {
      const std::string& n = attr.name();
      const bool positive_list = n == "strides" || n == "dilations" || n == "kernel_shape";
      bool bad = false;
      if (positive_list) {
        for (int64_t v : attr.ints()) bad = bad || v < 1;
        if (attr.type() != onnx::AttributeProto::INTS) bad = true;
      } else if (n == "group") {
        bad = attr.i() < 1;
      } else if (n == "pads") {
        for (int64_t v : attr.ints()) bad = bad || v < 0;
      }
      if (bad) {
        return InvalidArgumentError(source, ": node ", Quote(node.name()), " (", node.op_type(), "): attr ", Quote(n),
                                    " must be ", n == "pads" ? "non-negative" : "positive", " integers");
      }
    }
  }
  return Status();
}

}  // namespace

Expected<ImportedModel> Importer::Run() {
  ImportedModel result;
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  if (opset_ == 0) return InvalidArgumentError(source_, ": the model imports no opset of the default ONNX domain");
  if (opset_ < kMinOpset || opset_ > kMaxOpset) {
    return UnimplementedError(source_, ": ONNX opset ", opset_, " is not supported; Weft imports opsets ", kMinOpset,
                              " to ", kMaxOpset, " (convert the model with onnx.version_converter)");
  }
  result.opset = opset_;
  result.producer =
      StrCat(model_.producer_name(), model_.producer_version().empty() ? "" : " ", model_.producer_version());
  const onnx::GraphProto& graph = model_.graph();

  // ONNX's checker, then strict shape inference on a copy (contradicting
  // shapes and types are errors).
  try {
    // onnx::checker::check_model, with the model's folder as the one its
    // external data files are in (the library's default is the current
    // directory).
    if (!model_.has_ir_version() || model_.ir_version() <= 0) {
      return InvalidArgumentError(source_, ": the model has no ir_version; is it an ONNX ModelProto?");
    }
    if (model_.ir_version() > onnx::Version::IR_VERSION) {
      return UnimplementedError(source_, ": the model's IR version ", model_.ir_version(), " is newer than the ",
                                static_cast<int64_t>(onnx::Version::IR_VERSION),
                                " of the ONNX library Weft is built with");
    }
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model_.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto& op : model_.opset_import()) opsets[op.domain()] = static_cast<int>(op.version());
    ctx.set_opset_imports(opsets);
    ctx.set_model_dir(base_dir_.empty() ? std::string(".") : base_dir_);
    onnx::checker::LexicalScopeContext lex;
    onnx::checker::check_model_local_functions(model_, ctx, lex);
    onnx::checker::check_graph(model_.graph(), ctx, lex);
  } catch (const std::exception& e) {
    return InvalidArgumentError(source_, ": ONNX's checker refuses the model: ", e.what());
  }
  WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(graph, source_));
  WEFT_RETURN_IF_ERROR(CheckOpsSupported(graph));

  for (const auto& init : graph.initializer()) initializers_[init.name()] = &init;
  for (const auto& [name, proto] : initializers_) {
    Value v;
    auto t = TensorFromProto(*proto, base_dir_);
    if (!t.ok()) return t.status().WithContext(source_);
    v.known = std::move(*t);
    v.initializer = name;
    v.shape = v.known.shape();
    v.dtype = v.known.dtype();
    values_.emplace(name, std::move(v));
  }
  WEFT_RETURN_IF_ERROR(DecideLayouts(graph));

  for (const auto& input : graph.input()) {
    if (initializers_.count(input.name()) != 0) continue;  // an initializer listed as an input (IR < 4)
    auto type = ValueInfoType(input);
    if (!type.ok()) return type.status().WithContext(StrCat(source_, ": graph input ", Quote(input.name())));
    Output p = b_.Placeholder(type->second, type->first, SanitiseName(input.name()));
    WEFT_RETURN_IF_ERROR(b_.status().WithContext(StrCat(source_, ": graph input ", Quote(input.name()))));
    Value v;
    v.out = p;
    v.shape = type->first;
    v.dtype = type->second;
    values_.emplace(input.name(), std::move(v));
    result.inputs.push_back(p.node_name());
  }

  const int count = graph.node_size();
  for (int i = 0; i < count; ++i) WEFT_RETURN_IF_ERROR(ConvertNode(graph.node(i), i, count));

  // ONNX's strict shape inference, on a model whose every node Weft's own
  // shape functions have accepted: it then finds what contradicts the
  // model's declared shapes and types. Not before: ONNX 1.12's inference
  // reads out of bounds on some malformed models (a Conv whose input rank
  // is not its weights', as the importer's fuzzer found), which Weft's
  // shape functions refuse with a message.
  {
    onnx::ModelProto inferred = model_;
    try {
      onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
    } catch (const std::exception& e) {
      return InvalidArgumentError(source_, ": ONNX's shape inference refuses the model: ", e.what());
    }
  }

  for (const auto& output : graph.output()) {
    const std::string where = StrCat(source_, ": graph output ", Quote(output.name()));
    if (values_.count(output.name()) == 0) {
      return InvalidArgumentError(where, " is produced by no node");
    }
    auto value = Materialise(output.name(), LayoutOf(output.name()));
    if (!value.ok()) return value.status().WithContext(where);
    Output out = b_.Op("Identity", {*value}, {}, SanitiseName(output.name()));
    WEFT_RETURN_IF_ERROR(b_.status().WithContext(where));
    result.outputs.push_back(out.node_name());
  }
  if (!inits_.empty()) {
    auto deps = b_.ControlDependencies(inits_);
    result.init = b_.Op("NoOp", {}, {}, options_.init_name).node_name();
  }
  WEFT_RETURN_IF_ERROR(b_.status().WithContext(source_));
  WEFT_RETURN_IF_ERROR(b_.Build().status());
  result.def = b_.def();
  result.variables = variables_;
  return result;
}

// --- Entry points ------------------------------------------------------------------------

bool IsOnnxPath(std::string_view path) { return path.size() > 5 && path.substr(path.size() - 5) == ".onnx"; }

Expected<ImportedModel> ImportOnnxBytes(std::string_view bytes, const std::string& source, const std::string& base_dir,
                                        const ImportOptions& options) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    return UnimplementedError(source, ": ", bytes.size(),
                              " bytes; a protobuf message holds at most 2 GiB, so larger "
                              "models keep their weights in external data files");
  }
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgumentError(
        source, ": not an ONNX model (",
        bytes.empty() ? "the file is empty" : "its bytes do not parse as an ONNX ModelProto; is the file truncated?",
        ")");
  }
  if (!model.has_graph()) return InvalidArgumentError(source, ": the ONNX model has no graph");
  Importer importer(model, source, base_dir, options);
  return importer.Run();
}

Expected<ImportedModel> ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ImportOnnxBytes(bytes, path, std::filesystem::path(path).parent_path().string(), options);
}

Expected<GraphDef> ReadModelFile(const std::string& path, const ImportOptions& options) {
  if (!IsOnnxPath(path)) return ReadGraphFile(path);
  WEFT_ASSIGN_OR_RETURN(ImportedModel model, ImportOnnxFile(path, options));
  return std::move(model.def);
}

}  // namespace weft::onnx_io
