// NodeContext, what an ONNX op converter gets for one node: its inputs
// (materialised by the importer on first use, as ONNX lays them out or
// channels-last), its attributes with defaults, and its outputs
// (core/onnx/importer.h).
#include "core/base/strings.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io {

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

}  // namespace weft::onnx_io
