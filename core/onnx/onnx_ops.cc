// The table of ONNX op converters and the helpers every family of them
// uses (core/onnx/converters.h).
#include <numeric>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io {
namespace convert {

Output Op(NodeContext& c, std::string_view op, const std::vector<Output>& in, AttrMap attrs, std::string_view suffix) {
  return c.b().Op(op, in, std::move(attrs), c.Name(suffix));
}

Output ConstOf(NodeContext& c, const Tensor& t, std::string_view suffix) { return c.b().Const(t, c.Name(suffix)); }

Expected<Output> ScalarLike(NodeContext& c, DType dtype, double value, std::string_view suffix) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, ScalarOf(dtype, value));
  return ConstOf(c, t, suffix);
}

// Normalises axis |a| for |rank|; an error naming |what| when out of range.
Expected<int64_t> Axis(NodeContext& c, int64_t a, int rank, std::string_view what) {
  if (rank < 0) return a;
  if (a < -rank || a >= rank) return c.Error(what, " ", a, " is out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

// --- Layouts ----------------------------------------------------------------------------------
//
// Images run channels-last (ImportOptions::channels_last): Conv, pools and
// BatchNormalization make NHWC outputs; elementwise ops keep an input's
// NHWC form; any other op reads the NCHW form, made by one Transpose.

// Input |i| of an elementwise op: its NHWC form when it has one.
Expected<std::pair<Output, bool>> ElementwiseIn(NodeContext& c, int i) {
  if (c.IsNhwc(i)) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.InNhwc(i));
    return std::make_pair(x, true);
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
  return std::make_pair(x, false);
}

void SetOutAs(NodeContext& c, int i, const Output& y, bool nhwc) {
  if (nhwc) {
    c.SetOutNhwc(i, y);
  } else {
    c.SetOut(i, y);
  }
}

// The inputs of an op with NumPy broadcasting, all NHWC when one is (a
// lower-rank operand is padded to 4-D and permuted as the NCHW one would
// be), else all as ONNX has them. Returns the inputs and whether NHWC.
Expected<std::pair<std::vector<Output>, bool>> BroadcastIns(NodeContext& c, const std::vector<int>& indices) {
  bool any = false, possible = true;
  for (int i : indices) {
    any = any || c.IsNhwc(i);
    const Shape s = c.InShape(i);
    possible = possible && !s.unknown_rank() && s.rank() <= 4;
  }
  std::vector<Output> ins;
  if (!any || !possible) {
    for (int i : indices) {
      WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
      ins.push_back(x);
    }
    return std::make_pair(ins, false);
  }
  for (int i : indices) {
    const Shape s = c.InShape(i);
    if (c.IsNhwc(i) || s.rank() == 4) {
      WEFT_ASSIGN_OR_RETURN(Output x, c.InNhwc(i));
      ins.push_back(x);
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
    bool ones_only = true;  // a scalar or size-1 dims broadcast the same either way
    for (int d = 0; d < s.rank(); ++d) ones_only = ones_only && s.dim(d) == 1;
    if (s.rank() == 0 || ones_only) {
      ins.push_back(x);
      continue;
    }
    std::vector<int64_t> dims(static_cast<std::size_t>(4 - s.rank()), 1);
    for (int d = 0; d < s.rank(); ++d) {
      if (s.dim(d) < 0) return c.Unsupported("broadcasting an operand of unknown shape ", s.ToString());
      dims.push_back(s.dim(d));
    }
    Output four = c.b().Op("Reshape", {x, c.b().Const(Int64s(dims), c.Name(StrCat("in", i, "_4d_shape")))}, {},
                           c.Name(StrCat("in", i, "_4d")));
    ins.push_back(c.b().Op("Transpose", {four}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}},
                           c.Name(StrCat("in", i, "_nhwc"))));
  }
  return std::make_pair(ins, true);
}

Status Unary(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(auto x, ElementwiseIn(c, 0));
  SetOutAs(c, 0, Op(c, weft_op, {x.first}), x.second);
  return Status();
}

Status Binary(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(auto in, BroadcastIns(c, {0, 1}));
  SetOutAs(c, 0, Op(c, weft_op, in.first), in.second);
  return Status();
}

// |x| (one element) as a scalar, its nodes named after |what|.
Output AsScalar(NodeContext& c, const Output& x, std::string_view what) {
  if (x.shape().rank() == 0) return x;
  return c.b().Op("Reshape", {x, c.b().Const(Int64s({}, Shape{0}), c.Name(StrCat(what, "_shape")))}, {},
                  c.Name(StrCat(what, "_scalar")));
}

Expected<Output> ScalarI64(NodeContext& c, const Output& x, std::string_view what) {
  Output y = x;
  if (x.dtype() != DType::kI64) {
    if (!IsInteger(x.dtype())) return c.Error(what, " must be an integer, got ", DTypeName(x.dtype()));
    y = c.b().Op("Cast", {x}, {{"DstT", AttrValue(DType::kI64)}}, c.Name(StrCat(what, "_i64")));
  }
  return AsScalar(c, y, what);
}

}  // namespace convert

const std::map<std::string, Converter, std::less<>>& Converters() {
  static const convert::ConverterTable* table = [] {
    auto* t = new convert::ConverterTable;
    convert::AddElementwiseConverters(*t);
    convert::AddNnConverters(*t);
    convert::AddShapeConverters(*t);
    convert::AddRecurrentConverters(*t);
    convert::AddControlFlowConverters(*t);
    convert::AddEinsumConverters(*t);
    convert::AddLossConverters(*t);
    convert::AddActivationConverters(*t);
    convert::AddArrayConverters(*t);
    convert::AddConvTransposeConverters(*t);
    convert::AddQuantizeConverters(*t);
    convert::AddTrainingConverters(*t);
    convert::AddSignalConverters(*t);
    convert::AddIndexingConverters(*t);
    return t;
  }();
  return *table;
}

}  // namespace weft::onnx_io
