// ONNX export, shape and indexing ops: reshapes and broadcasts (shapes are
// int64 in ONNX), transposes, squeezes, concatenation and splits,
// reductions, gathers and scatters, slices, Pad, TopK and the constant
// fills (the conventions are in core/onnx/exporter.h; docs/onnx.md has the
// table). Attrs that are inputs in ONNX become int64 initializers.
#include <limits>

#include "core/onnx/exporter.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io::exports {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Input |i|, a shape or count, as int64.
std::string In64(ExportContext& c, int i, const std::string& suffix) {
  std::string v = c.In(i);
  if (c.InType(i) != DType::kI64) {
    v = c.Emit1("Cast", {v}, c.name() + suffix, [](onnx::NodeProto* p) { AttrInt(p, "to", onnx::TensorProto::INT64); });
  }
  return v;
}

// Reshape, BroadcastTo, Fill (whose shape is input 0).
Status Reshape(ExportContext& c) {
  const std::string& op = c.op();
  const int shape_input = op == "Fill" ? 0 : 1;
  const std::string shape = In64(c, shape_input, "/shape64");
  if (op == "Reshape") {
    c.Emit("Reshape", {c.In(0), shape}, {c.out()}, c.name());
  } else if (op == "BroadcastTo") {
    c.Emit("Expand", {c.In(0), shape}, {c.out()}, c.name());
  } else {
    c.Emit("Expand", {c.In(1), shape}, {c.out()}, c.name());
  }
  return Status();
}

Status Tile(ExportContext& c) {  // one input: the repeats are an attr
  c.Emit("Tile", {c.In(0), c.I64s(c.name() + "/repeats", c.Ints("multiples"))}, {c.out()}, c.name());
  return Status();
}

Status Transpose(ExportContext& c) {
  onnx::NodeProto* p = c.Simple("Transpose", 1);
  if (!c.Ints("perm").empty()) AttrInts(p, "perm", c.Ints("perm"));
  return Status();
}

Status Squeeze(ExportContext& c) {
  const std::vector<int64_t> axes = c.Ints("axis");
  if (axes.empty()) {
    c.Simple("Squeeze", 1);
  } else {
    c.Emit("Squeeze", {c.In(0), c.I64s(c.name() + "/axes", axes)}, {c.out()}, c.name());
  }
  return Status();
}

Status ExpandDims(ExportContext& c) {
  c.Emit("Unsqueeze", {c.In(0), c.I64s(c.name() + "/axes", {c.Int("axis")})}, {c.out()}, c.name());
  return Status();
}

Status Concat(ExportContext& c) {
  AttrInt(c.Simple("Concat", c.num_inputs()), "axis", c.Int("axis"));
  return Status();
}

Status Pack(ExportContext& c) {
  const int64_t axis = c.Int("axis");
  std::vector<std::string> parts;
  const std::string axes = c.I64s(c.name() + "/axes", {axis});
  for (int i = 0; i < c.num_inputs(); ++i) parts.push_back(c.Emit1("Unsqueeze", {c.In(i), axes}, c.name() + "/expand"));
  c.Emit("Concat", parts, {c.out()}, c.name(), [axis](onnx::NodeProto* p) { AttrInt(p, "axis", axis); });
  return Status();
}

Status Split(ExportContext& c) {
  std::vector<std::string> outs;
  for (int k = 0; k < c.num_outputs(); ++k) outs.push_back(c.OutName(k));
  AttrInt(c.Emit("Split", {c.In(0)}, outs, c.name()), "axis", c.Int("axis"));
  return Status();
}

// Mean, Sum, Max, Min, Prod over attr "axis" (all axes when empty).
Status Reduce(ExportContext& c) {
  const std::vector<int64_t> axes = c.Ints("axis");
  const bool keep = c.Bool("keep_dims");
  if (c.op() == "Sum") {  // opset 13 made its axes an input
    std::vector<std::string> ins = {c.In(0)};
    if (!axes.empty()) ins.push_back(c.I64s(c.name() + "/axes", axes));
    AttrInt(c.Emit("ReduceSum", ins, {c.out()}, c.name()), "keepdims", keep ? 1 : 0);
  } else {
    onnx::NodeProto* p = c.Simple("Reduce" + c.op(), 1);
    if (!axes.empty()) AttrInts(p, "axes", axes);
    AttrInt(p, "keepdims", keep ? 1 : 0);
  }
  return Status();
}

// ONNX op |onnx_op| of input 0, whose result ONNX makes int64 only: it
// computes output 0 itself, or, when the Weft node's output is i32, a
// fresh tensor that CastI64Result then casts.
onnx::NodeProto* EmitI64Result(ExportContext& c, const std::string& onnx_op) {
  const bool i32 = c.dtype() == DType::kI32;
  const std::string y = i32 ? c.Fresh(c.name() + "/i64") : c.out();
  return c.Emit(onnx_op, {c.In(0)}, {y}, c.name());
}

void CastI64Result(ExportContext& c, onnx::NodeProto* p) {
  if (c.dtype() != DType::kI32) return;
  AttrInt(c.Emit("Cast", {p->output(0)}, {c.out()}, c.name() + "/i32"), "to", onnx::TensorProto::INT32);
}

Status ArgMax(ExportContext& c) {
  onnx::NodeProto* p = EmitI64Result(c, c.op());
  AttrInt(p, "axis", c.Int("axis"));
  AttrInt(p, "keepdims", 0);
  CastI64Result(c, p);
  return Status();
}

Status ShapeOrSize(ExportContext& c) {
  CastI64Result(c, EmitI64Result(c, c.op()));
  return Status();
}

// A Slice with step -1 along each axis.
Status Reverse(ExportContext& c) {
  const std::vector<int64_t> axes = c.Ints("axis");
  const std::vector<int64_t> starts(axes.size(), -1), steps(axes.size(), -1);
  const std::vector<int64_t> ends(axes.size(), std::numeric_limits<int64_t>::min());
  c.Emit("Slice",
         {c.In(0), c.I64s(c.name() + "/starts", starts), c.I64s(c.name() + "/ends", ends),
          c.I64s(c.name() + "/axes", axes), c.I64s(c.name() + "/steps", steps)},
         {c.out()}, c.name());
  return Status();
}

// Gather, GatherElements: the same op with attr axis.
Status Gather(ExportContext& c) {
  AttrInt(c.Simple(c.op(), 2), "axis", c.Int("axis"));
  return Status();
}

Status ScatterElements(ExportContext& c) {
  onnx::NodeProto* p = c.Simple("ScatterElements", 3);
  AttrInt(p, "axis", c.Int("axis"));
  const std::string reduction = c.Str("reduction", "none");
  if (reduction != "none") AttrStr(p, "reduction", reduction);
  return Status();
}

Status TopK(ExportContext& c) {
  // ONNX's K is an i64 tensor of shape [1].
  std::string k = In64(c, 1, "/k64");
  k = c.Emit1("Reshape", {k, c.I64s(c.name() + "/k_shape", {1})}, c.name() + "/k");
  onnx::NodeProto* p = c.Emit("TopK", {c.In(0), k}, {c.out(), c.OutName(1)}, c.name());
  AttrInt(p, "axis", c.Int("axis", -1));
  AttrInt(p, "largest", c.Bool("largest", true) ? 1 : 0);
  AttrInt(p, "sorted", c.Bool("sorted", true) ? 1 : 0);
  return Status();
}

Status Pad(ExportContext& c) {
  const std::string mode = c.Str("mode", "CONSTANT");
  if (mode == "SYMMETRIC") return UnimplementedError("Pad mode SYMMETRIC has no ONNX equivalent");
  const std::vector<int64_t> p = c.Ints("paddings");
  const std::size_t r = p.size() / 2;
  std::vector<int64_t> pads(p.size());
  for (std::size_t i = 0; i < r; ++i) {
    pads[i] = p[2 * i];
    pads[i + r] = p[2 * i + 1];
  }
  std::vector<std::string> ins = {c.In(0), c.I64s(c.name() + "/pads", pads)};
  if (mode == "CONSTANT") ins.push_back(c.ScalarConst(c.name() + "/value", c.dtype(), c.Float("constant_value")));
  AttrStr(c.Emit("Pad", ins, {c.out()}, c.name()), "mode", mode == "CONSTANT" ? "constant" : "reflect");
  return Status();
}

Status Slice(ExportContext& c) {
  const std::vector<int64_t> begin = c.Ints("begin"), size = c.Ints("size");
  std::vector<int64_t> end(begin.size());
  for (std::size_t i = 0; i < begin.size(); ++i) end[i] = size[i] < 0 ? kInt64Max : begin[i] + size[i];
  c.Emit("Slice", {c.In(0), c.I64s(c.name() + "/starts", begin), c.I64s(c.name() + "/ends", end)}, {c.out()}, c.name());
  return Status();
}

Status StridedSlice(ExportContext& c) {
  if (c.Int("ellipsis_mask") != 0 || c.Int("new_axis_mask") != 0) {
    return UnimplementedError("StridedSlice with ellipsis_mask or new_axis_mask");
  }
  std::vector<int64_t> begin = c.Ints("begin"), end = c.Ints("end"), strides = c.Ints("strides");
  const int64_t bm = c.Int("begin_mask"), em = c.Int("end_mask"), sm = c.Int("shrink_axis_mask");
  std::vector<int64_t> axes, shrink;
  for (std::size_t i = 0; i < begin.size(); ++i) {
    axes.push_back(static_cast<int64_t>(i));
    const bool forward = strides[i] > 0;
    if (bm & (int64_t{1} << i)) begin[i] = forward ? 0 : kInt64Max;
    if (em & (int64_t{1} << i)) end[i] = forward ? kInt64Max : std::numeric_limits<int64_t>::min();
    if (sm & (int64_t{1} << i)) {
      end[i] = begin[i] == -1 ? kInt64Max : begin[i] + 1;
      strides[i] = 1;
      shrink.push_back(static_cast<int64_t>(i));
    }
  }
  const std::string y = shrink.empty() ? c.out() : c.Fresh(c.name() + "/sliced");
  c.Emit("Slice",
         {c.In(0), c.I64s(c.name() + "/starts", begin), c.I64s(c.name() + "/ends", end),
          c.I64s(c.name() + "/axes", axes), c.I64s(c.name() + "/steps", strides)},
         {y}, c.name());
  if (!shrink.empty()) c.Emit("Squeeze", {y, c.I64s(c.name() + "/shrink", shrink)}, {c.out()}, c.name() + "/shrink");
  return Status();
}

Status Cumsum(ExportContext& c) {
  onnx::NodeProto* p = c.Simple("CumSum", 2);
  if (c.Bool("exclusive")) AttrInt(p, "exclusive", 1);
  if (c.Bool("reverse")) AttrInt(p, "reverse", 1);
  return Status();
}

// ZerosLike, OnesLike.
Status FilledLike(ExportContext& c) {
  const std::string shape = c.Emit1("Shape", {c.In(0)}, c.name() + "/shape");
  onnx::NodeProto* p = c.Emit("ConstantOfShape", {shape}, {c.out()}, c.name());
  auto* a = p->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  WEFT_ASSIGN_OR_RETURN(Tensor v, ScalarOf(c.dtype(), c.op() == "OnesLike" ? 1 : 0));
  WEFT_ASSIGN_OR_RETURN(Tensor v1, v.Reshaped(Shape{1}));
  return FillTensor(a->mutable_t(), "value", v1);
}

}  // namespace

// ScatterNd (updates added into zeros of attr 'shape'): ONNX's ScatterND
// with reduction add into a ConstantOfShape.
Status ScatterNd(ExportContext& c) {
  const std::string zeros = c.Emit1("ConstantOfShape", {c.I64s(c.name() + "/shape", c.Ints("shape"))},
                                    c.name() + "/zeros", [&](onnx::NodeProto* p) {
                                      onnx::AttributeProto* a = p->add_attribute();
                                      a->set_name("value");
                                      a->set_type(onnx::AttributeProto::TENSOR);
                                      onnx::TensorProto* t = a->mutable_t();
                                      t->set_data_type(DTypeToOnnx(c.dtype()));
                                      t->add_dims(1);
                                      t->set_raw_data(std::string(DTypeSize(c.dtype()), '\0'));
                                    });
  AttrStr(c.Emit("ScatterND", {zeros, c.In(0), c.In(1)}, {c.out()}, c.name()), "reduction", "add");
  return Status();
}

void AddShapeExports(ExportTable& t) {
  for (const char* op : {"Reshape", "BroadcastTo", "Fill"}) t[op] = Reshape;
  t["Tile"] = Tile;
  t["Transpose"] = Transpose;
  t["Squeeze"] = Squeeze;
  t["ExpandDims"] = ExpandDims;
  t["Concat"] = Concat;
  t["Pack"] = Pack;
  t["Split"] = Split;
  for (const char* op : {"Mean", "Sum", "Max", "Min", "Prod"}) t[op] = Reduce;
  t["ArgMax"] = ArgMax;
  t["ArgMin"] = ArgMax;
  t["Shape"] = ShapeOrSize;
  t["Size"] = ShapeOrSize;
  t["Gather"] = Gather;
  t["GatherElements"] = Gather;
  t["GatherNd"] = Same("GatherND", 2);
  t["ScatterNd"] = ScatterNd;
  t["ScatterElements"] = ScatterElements;
  t["Reverse"] = Reverse;
  t["NonZero"] = Same("NonZero", 1);
  t["TopK"] = TopK;
  t["Pad"] = Pad;
  t["Slice"] = Slice;
  t["StridedSlice"] = StridedSlice;
  t["Range"] = Same("Range", 3);
  t["Cumsum"] = Cumsum;
  t["ZerosLike"] = FilledLike;
  t["OnesLike"] = FilledLike;
}

}  // namespace weft::onnx_io::exports
