#include "core/ops/shape_fns.h"

#include <algorithm>

namespace weft::ops {

Status UnchangedShape(InferenceContext& c) {
  c.set_output(0, c.input_shape(0));
  return Status();
}

Status ScalarShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, Shape{});
  return Status();
}

Status NoOutputShape(InferenceContext&) { return Status(); }

Expected<Shape> Broadcast(const Shape& a, const Shape& b) {
  if (a.unknown_rank() || b.unknown_rank()) return Shape::UnknownRank();
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    int64_t d;
    if (da == 1) {
      d = db;
    } else if (db == 1) {
      d = da;
    } else if (da < 0 || db < 0) {
      d = da < 0 ? db : da;  // unknown vs n: n (or an error at run time)
    } else if (da == db) {
      d = da;
    } else {
      return InvalidArgumentError("shapes ", a.ToString(), " and ", b.ToString(),
                                  " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    }
    dims[static_cast<std::size_t>(i)] = d;
  }
  return Shape(std::move(dims));
}

Status BroadcastShape(InferenceContext& c) {
  Shape out = c.input_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    WEFT_ASSIGN_OR_RETURN(out, Broadcast(out, c.input_shape(i)));
  }
  c.set_output(0, out);
  return Status();
}

Expected<int> NormalizeAxis(int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgumentError(what, " ", axis, " is out of range for rank ", rank, " (valid: ", -rank, " to ",
                                rank - 1, ")");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Expected<std::vector<int>> ReductionAxes(const std::vector<int64_t>& axis, int rank) {
  std::vector<int> out;
  if (axis.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axis) {
    WEFT_ASSIGN_OR_RETURN(int n, NormalizeAxis(a, rank));
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return InvalidArgumentError("axis ", a, " is repeated in ", ListString(axis));
    }
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::vector<int64_t>> ConstIntVector(const InferenceContext& c, int input) {
  const Tensor* t = c.input_value(input);
  if (t == nullptr || t->rank() > 1) return std::nullopt;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    if (t->dtype() == DType::kI32) {
      out.push_back(t->data<int32_t>()[i]);
    } else if (t->dtype() == DType::kI64) {
      out.push_back(t->data<int64_t>()[i]);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<int64_t> ConstIntScalar(const InferenceContext& c, int input) {
  const Tensor* t = c.input_value(input);
  if (t == nullptr || t->rank() != 0) return std::nullopt;
  if (t->dtype() == DType::kI32) return t->scalar<int32_t>();
  if (t->dtype() == DType::kI64) return t->scalar<int64_t>();
  return std::nullopt;
}

Expected<int64_t> WindowOutput(int64_t in, int64_t window, int64_t stride, int64_t dilation,
                               const std::string& padding) {
  if (in < 0 || window < 0) return int64_t{-1};
  const auto dilated = CheckedMul(window - 1, dilation);
  if (!dilated || *dilated == INT64_MAX) {
    return InvalidArgumentError(window - 1, " x ", dilation, " does not fit in 64 bits");
  }
  const int64_t effective = *dilated + 1;
  // EXPLICIT (the fused convolutions') is VALID over the input its caller
  // already grew by the explicit pads.
  if (padding == "VALID" || padding == "EXPLICIT") {
    if (in < effective) {
      return InvalidArgumentError("the window (", effective, " with dilation) is larger than the input (", in, ")");
    }
    return (in - effective) / stride + 1;
  }
  return in / stride + (in % stride != 0 ? 1 : 0);
}

// Normalises one dimension of a StridedSlice like NumPy basic indexing;
// returns the number of elements it selects.
int64_t StridedSliceLength(int64_t dim, int64_t begin, int64_t end, int64_t stride, bool begin_masked,
                           bool end_masked) {
  auto clamp = [&](int64_t v, bool masked, bool is_begin) -> int64_t {
    if (masked) return stride > 0 ? (is_begin ? 0 : dim) : (is_begin ? dim - 1 : -1);
    if (v < 0) v += dim;
    return stride > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
  };
  const int64_t b = clamp(begin, begin_masked, true);
  const int64_t e = clamp(end, end_masked, false);
  // In unsigned arithmetic: -stride overflows for INT64_MIN.
  if (stride > 0 ? e <= b : b <= e) return 0;
  const uint64_t distance = stride > 0 ? static_cast<uint64_t>(e - b) : static_cast<uint64_t>(b - e);
  const uint64_t magnitude = stride > 0 ? static_cast<uint64_t>(stride) : 0 - static_cast<uint64_t>(stride);
  return static_cast<int64_t>(1 + (distance - 1) / magnitude);
}

Expected<std::vector<int64_t>> ResolveReshape(std::vector<int64_t> target, int64_t num_elements,
                                              const std::string& what) {
  if (static_cast<int>(target.size()) > kMaxRank) {
    return InvalidArgumentError("shape ", ListString(target), " has rank ", target.size(), ", above the maximum of ",
                                kMaxRank);
  }
  int infer = -1;
  int64_t known = 1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) return InvalidArgumentError("shape ", ListString(target), " has more than one -1");
      infer = static_cast<int>(i);
    } else if (target[i] < 0) {
      return InvalidArgumentError("shape ", ListString(target), " has a negative dimension");
    } else {
      const auto product = CheckedMul(known, target[i]);
      if (!product) return InvalidArgumentError("shape ", ListString(target), " has more than 2^63 elements");
      known = *product;
    }
  }
  if (num_elements < 0) return target;
  if (infer >= 0) {
    if (known == 0 || num_elements % known != 0) {
      return InvalidArgumentError("cannot reshape ", what, " (", num_elements, " elements) to ", ListString(target));
    }
    target[static_cast<std::size_t>(infer)] = num_elements / known;
  } else if (num_elements != known) {
    return InvalidArgumentError("cannot reshape ", what, " (", num_elements, " elements) to ", ListString(target), " (",
                                known, " elements)");
  }
  return target;
}

Layout LayoutOf(const std::string& format) { return format == "NHWC" ? Layout{0, 1, 2, 3} : Layout{0, 2, 3, 1}; }

Status CheckWindowAttr(InferenceContext& c, const char* name, const std::vector<int64_t>& v, const Layout& l) {
  if (v.size() != 4) return c.Error("attr '", name, "' must have 4 entries, got ", v.size());
  for (int64_t x : v) {
    if (x < 1) return c.Error("attr '", name, "' entries must be >= 1, got ", ListString(v));
  }
  if (v[static_cast<std::size_t>(l.n)] != 1 || v[static_cast<std::size_t>(l.c)] != 1) {
    return c.Error("attr '", name, "' must be 1 in the batch and channel dimensions, got ", ListString(v));
  }
  return Status();
}

Expected<Shape> PaddedConvOutput(InferenceContext& c, bool depthwise) {
  const Shape& in = c.input_shape(0);
  const Shape& filter = c.input_shape(1);
  const Layout l = LayoutOf(c.String("data_format"));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "strides", c.Ints("strides"), l));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "dilations", c.Ints("dilations"), l));
  const bool explicit_pads = c.String("padding") == "EXPLICIT";
  const std::vector<int64_t>& pads = c.Ints("explicit_paddings");
  if (explicit_pads != !pads.empty() || (explicit_pads && pads.size() != 4)) {
    return c.Error(
        "explicit_paddings must have 4 entries (top, bottom, left, right) with padding EXPLICIT, and "
        "none otherwise; got ",
        pads.size(), " with padding ", c.String("padding"));
  }
  for (int64_t p : pads) {
    if (p < 0 || p > (int64_t{1} << 30)) return c.Error("explicit_paddings entries must be in [0, 2^30], got ", p);
  }
  if ((!in.unknown_rank() && in.rank() != 4) || (!filter.unknown_rank() && filter.rank() != 4)) {
    return c.Error("input and filter must have rank 4, got ", in.ToString(), " and ", filter.ToString());
  }
  if (in.unknown_rank() || filter.unknown_rank()) return Shape::UnknownDims(4);
  Shape padded = in;
  if (explicit_pads) {
    std::vector<int64_t> dims = in.dims();
    auto grow = [](int64_t d, int64_t a, int64_t b) { return d < 0 ? d : d + a + b; };
    dims[static_cast<std::size_t>(l.h)] = grow(dims[static_cast<std::size_t>(l.h)], pads[0], pads[1]);
    dims[static_cast<std::size_t>(l.w)] = grow(dims[static_cast<std::size_t>(l.w)], pads[2], pads[3]);
    padded = Shape(std::move(dims));
  }
  return ConvOutput(c, padded, filter, depthwise);
}

Expected<Shape> MatrixProductOutput(InferenceContext& c, bool ta, bool tb) {
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  if ((!a.unknown_rank() && a.rank() != 2) || (!b.unknown_rank() && b.rank() != 2)) {
    return c.Error("a and b must be matrices, got ", a.ToString(), " and ", b.ToString());
  }
  const int64_t m = a.unknown_rank() ? -1 : a.dim(ta ? 1 : 0);
  const int64_t ka = a.unknown_rank() ? -1 : a.dim(ta ? 0 : 1);
  const int64_t kb = b.unknown_rank() ? -1 : b.dim(tb ? 1 : 0);
  const int64_t n = b.unknown_rank() ? -1 : b.dim(tb ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return c.Error("a ", a.ToString(), " and b ", b.ToString(), " do not agree on the inner dimension (", ka, " vs ",
                   kb, ")");
  }
  return Shape{m, n};
}

// The forward output shape of a (depthwise) convolution of |in| with the
// HWIO |filter| (both rank 4, dims possibly unknown), or an error saying
// why the forward op would reject them.
Expected<Shape> ConvOutput(InferenceContext& c, const Shape& in, const Shape& filter, bool depthwise) {
  const Layout l = LayoutOf(c.String("data_format"));
  const auto& strides = c.Ints("strides");
  const auto& dilations = c.Ints("dilations");
  if (filter.dim(0) == 0 || filter.dim(1) == 0) {
    return c.Error("the filter window ", filter.ToString(), " is empty; it must be at least 1x1");
  }
  const int64_t channels = in.dim(l.c);
  if (channels >= 0 && filter.dim(2) >= 0 && channels != filter.dim(2)) {
    return c.Error("the input has ", channels, " channels (", c.String("data_format"), " ", in.ToString(),
                   ") but the filter expects ", filter.dim(2), " (HWIO ", filter.ToString(), ")");
  }
  const std::string& padding = c.String("padding");
  auto h = WindowOutput(in.dim(l.h), filter.dim(0), strides[static_cast<std::size_t>(l.h)],
                        dilations[static_cast<std::size_t>(l.h)], padding);
  if (!h.ok()) return c.Error("height: ", h.status().message());
  auto w = WindowOutput(in.dim(l.w), filter.dim(1), strides[static_cast<std::size_t>(l.w)],
                        dilations[static_cast<std::size_t>(l.w)], padding);
  if (!w.ok()) return c.Error("width: ", w.status().message());
  int64_t out_c = filter.dim(3);
  if (depthwise) {
    const auto product = CheckedMul(filter.dim(2), filter.dim(3));
    if (!product)
      return c.Error("the depthwise filter's ", filter.dim(2), " x ", filter.dim(3), " channels do not fit in 64 bits");
    out_c = filter.dim(2) < 0 || filter.dim(3) < 0 ? -1 : *product;
  }
  std::vector<int64_t> dims(4);
  dims[static_cast<std::size_t>(l.n)] = in.dim(l.n);
  dims[static_cast<std::size_t>(l.h)] = *h;
  dims[static_cast<std::size_t>(l.w)] = *w;
  dims[static_cast<std::size_t>(l.c)] = out_c;
  return Shape(std::move(dims));
}

namespace {

// The size |d| stands for, or -1 while one of its parts is unknown.
int64_t LstmSize(const LstmDims& s, LstmDim d) {
  switch (d) {
    case LstmDim::kBatch: return s.batch;
    case LstmDim::kInput: return s.input;
    case LstmDim::kHidden: return s.hidden;
    case LstmDim::kGates: return s.hidden < 0 ? -1 : 4 * s.hidden;
    case LstmDim::kConcat: return s.input < 0 || s.hidden < 0 ? -1 : s.input + s.hidden;
  }
  return -1;
}

const char* LstmSymbol(LstmDim d) {
  switch (d) {
    case LstmDim::kBatch: return "batch";
    case LstmDim::kInput: return "input";
    case LstmDim::kHidden: return "hidden";
    case LstmDim::kGates: return "4 * hidden";
    case LstmDim::kConcat: return "input + hidden";
  }
  return "?";
}

}  // namespace

Expected<LstmDims> CheckLstmShapes(InferenceContext& c, const std::vector<LstmArg>& args) {
  for (const LstmArg& a : args) {
    const Shape& s = c.input_shape(a.index);
    if (!s.unknown_rank() && s.rank() != static_cast<int>(a.dims.size())) {
      std::vector<std::string> symbols;
      for (LstmDim d : a.dims) symbols.emplace_back(LstmSymbol(d));
      return c.Error(a.name, " must have rank ", a.dims.size(), " ([", StrJoin(symbols, ", "), "]), got ",
                     s.ToString());
    }
  }
  // The sizes from the first input that gives each directly; then, when
  // still unknown, hidden from a 4 * hidden dimension and input from an
  // input + hidden one (a second such pass covers w giving both).
  LstmDims sizes;
  for (int pass = 0; pass < 3; ++pass) {
    for (const LstmArg& a : args) {
      const Shape& s = c.input_shape(a.index);
      if (s.unknown_rank()) continue;
      for (std::size_t k = 0; k < a.dims.size(); ++k) {
        const int64_t d = s.dim(static_cast<int>(k));
        if (d < 0) continue;
        switch (a.dims[k]) {
          case LstmDim::kBatch:
            if (sizes.batch < 0) sizes.batch = d;
            break;
          case LstmDim::kInput:
            if (sizes.input < 0) sizes.input = d;
            break;
          case LstmDim::kHidden:
            if (sizes.hidden < 0) sizes.hidden = d;
            break;
          case LstmDim::kGates:
            if (d % 4 != 0) {
              return c.Error(a.name, " has shape ", s.ToString(), ": dimension ", k, " (", d,
                             ") must be 4 * hidden, one block per gate i, f, g, o");
            }
            if (pass > 0 && sizes.hidden < 0) sizes.hidden = d / 4;
            break;
          case LstmDim::kConcat:
            if (pass > 0 && sizes.hidden >= 0 && d < sizes.hidden) {
              return c.Error(a.name, " has shape ", s.ToString(), ": dimension ", k, " (", d,
                             ") must be input + hidden, at least hidden = ", sizes.hidden);
            }
            if (pass > 0 && sizes.input < 0 && sizes.hidden >= 0) sizes.input = d - sizes.hidden;
            break;
        }
      }
    }
  }
  for (const LstmArg& a : args) {
    const Shape& s = c.input_shape(a.index);
    if (s.unknown_rank()) continue;
    std::vector<int64_t> want;
    bool ok = true;
    for (std::size_t k = 0; k < a.dims.size(); ++k) {
      want.push_back(LstmSize(sizes, a.dims[k]));
      const int64_t d = s.dim(static_cast<int>(k));
      if (d >= 0 && want.back() >= 0 && d != want.back()) ok = false;
    }
    if (!ok) {
      std::vector<std::string> symbols;
      for (LstmDim d : a.dims) symbols.emplace_back(LstmSymbol(d));
      auto size = [](int64_t v) { return v < 0 ? std::string("?") : StrCat(v); };
      return c.Error(a.name, " has shape ", s.ToString(), ", expected [", StrJoin(symbols, ", "),
                     "] = ", Shape(want).ToString(), " (batch ", size(sizes.batch), ", input ", size(sizes.input),
                     ", hidden ", size(sizes.hidden), ")");
    }
  }
  return sizes;
}

}  // namespace weft::ops
