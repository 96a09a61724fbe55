// ONNX converters, recurrent ops: LSTM, GRU and RNN, unrolled over a static sequence length (the conventions are in
// core/onnx/converters.h; docs/onnx.md has the table).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// --- LSTM --------------------------------------------------------------------------------

// ONNX's LSTM, forward or reverse, one direction at a time, unrolled over
// a sequence of static length with Weft's LSTMCell (gates reordered from
// ONNX's i, o, f, c to Weft's i, f, g, o; W and R joined).
// The sequence input X of LSTM, GRU or RNN, time-major ([T, B, I]; layout 1
// is batch-major), with T static (the recurrence is unrolled) and I = |input|.
Expected<Output> SequenceInput(NodeContext& c, std::string_view what, int64_t input) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  if (c.Int("layout", 0) == 1) {
    x = Op(c, "Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "time_major");
  }
  const Shape xs = x.shape();
  if (xs.rank() != 3) return c.Error("X has rank ", xs.rank(), "; expected 3");
  if (xs.dim(0) < 0) return c.Unsupported(what, " over a sequence of unknown length (Weft unrolls it)");
  if (xs.dim(2) >= 0 && xs.dim(2) != input) {
    return c.Error("X has ", xs.dim(2), " features per step; W takes ", input);
  }
  return x;
}

// Step |i| of a [T, ...] tensor: t[i], named |name|.
Output StepSlice(NodeContext& c, const Output& t, int64_t i, const std::string& name) {
  return Op(c, "Squeeze",
            {Op(c, "StridedSlice", {t},
                {{"begin", AttrValue(std::vector<int64_t>{i, 0, 0})},
                 {"end", AttrValue(std::vector<int64_t>{i + 1, 0, 0})},
                 {"strides", AttrValue(std::vector<int64_t>{1, 1, 1})},
                 {"end_mask", AttrValue(int64_t{6})}},
                name + "_slice")},
            {{"axis", AttrValue(std::vector<int64_t>{0})}}, name);
}

// Checks W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden] and
// B [dirs, 2*gates*hidden] of LSTM (gates 4), GRU (3) or RNN (1): shapes
// (the initializers' or, for fed weights, the declared ones), one floating
// dtype. Returns the input size.
Expected<int64_t> CheckRecurrentWeights(NodeContext& c, std::string_view what, int64_t dirs, int64_t gates,
                                        int64_t hidden) {
  const Shape w = c.InShape(1), r = c.InShape(2),
              bias = c.has_input(3) ? c.InShape(3) : Shape{dirs, 2 * gates * hidden};
  const DType dt = c.InDType(1);
  if (dt != DType::kF32 && dt != DType::kF64) return c.Unsupported(what, " of ", DTypeName(dt));
  const int64_t gh = gates * hidden;
  if (hidden < 1 || w.rank() != 3 || w.dim(0) != dirs || w.dim(1) != gh || w.dim(2) < 1 || r.rank() != 3 ||
      r.dim(0) != dirs || r.dim(1) != gh || r.dim(2) != hidden || bias.rank() != 2 || bias.dim(0) != dirs ||
      bias.dim(1) != 2 * gh) {
    return c.Error("W ", w.ToString(), ", R ", r.ToString(), " and B ", c.has_input(3) ? bias.ToString() : "(none)",
                   " do not fit hidden_size ", hidden, " and ", dirs, " direction(s)");
  }
  if (c.InDType(2) != dt || (c.has_input(3) && c.InDType(3) != dt)) {
    return c.Error("W is ", DTypeName(dt), ", R ", DTypeName(c.InDType(2)), " and B ",
                   c.has_input(3) ? DTypeName(c.InDType(3)) : "(none)", "; they must be one type");
  }
  return w.dim(2);
}

// Whether W, R or B is fed (not an initializer): then the weights are
// rearranged by graph ops at run time instead of at import.
bool WeightsFed(NodeContext& c) {
  return !c.Initial(1).valid() || !c.Initial(2).valid() || (c.has_input(3) && !c.Initial(3).valid());
}

// Direction |d| of fed weight input |i| ([dirs, rows, cols]): [rows, cols],
// its rows taken in |order| when given, then transposed ([cols, rows]).
Expected<Output> FedSlice(NodeContext& c, int i, int64_t d, const std::vector<int64_t>& order, bool transpose,
                          const std::string& name) {
  WEFT_ASSIGN_OR_RETURN(Output t, c.In(i));
  Output v = Op(c, "Gather", {t, ConstOf(c, Tensor::Scalar<int64_t>(d), name + "_dir")}, {}, name + "_d");
  if (!order.empty()) v = Op(c, "Gather", {v, ConstOf(c, Int64s(order), name + "_order")}, {}, name + "_ordered");
  if (!transpose) return v;
  return Op(c, "Transpose", {v}, {{"perm", AttrValue(std::vector<int64_t>{1, 0})}}, name);
}

// Initial state input |index| of LSTM, GRU or RNN as [dirs, batch, hidden]
// (layout 1 gives it [batch, dirs, hidden]).
Expected<Output> InitialState(NodeContext& c, int index) {
  WEFT_ASSIGN_OR_RETURN(Output s, c.In(index));
  if (c.Int("layout", 0) != 1) return s;
  return Op(c, "Transpose", {s}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, StrCat("initial_", index));
}

// Direction |d|'s LSTMCell kernel [input + hidden, 4 hidden] = [W_d^T; R_d^T]
// with the gate columns reordered, and bias Wb_d + Rb_d reordered: made at
// import from initializers (parameters), or by graph ops from fed weights.
Expected<std::pair<Output, Output>> LstmParams(NodeContext& c, int64_t d, const std::string& dname, int64_t input,
                                               int64_t hidden, const int64_t (&gate_order)[4]) {
  std::vector<int64_t> rows;  // the ONNX row of each Weft column
  for (int64_t k = 0; k < 4; ++k) {
    for (int64_t j = 0; j < hidden; ++j) rows.push_back(gate_order[k] * hidden + j);
  }
  const DType dtype = c.InDType(1);
  if (WeightsFed(c)) {
    WEFT_ASSIGN_OR_RETURN(Output wt, FedSlice(c, 1, d, rows, true, dname + "/Wt"));
    WEFT_ASSIGN_OR_RETURN(Output rt, FedSlice(c, 2, d, rows, true, dname + "/Rt"));
    Output kernel = Op(c, "Concat", {wt, rt}, {{"axis", AttrValue(int64_t{0})}}, dname + "/kernel");
    Output bias;
    if (c.has_input(3)) {
      WEFT_ASSIGN_OR_RETURN(Output bd, FedSlice(c, 3, d, {}, false, dname + "/B"));
      const AttrMap first = {{"begin", AttrValue(std::vector<int64_t>{0})},
                             {"size", AttrValue(std::vector<int64_t>{4 * hidden})}};
      const AttrMap second = {{"begin", AttrValue(std::vector<int64_t>{4 * hidden})},
                              {"size", AttrValue(std::vector<int64_t>{4 * hidden})}};
      Output sum =
          Op(c, "Add", {Op(c, "Slice", {bd}, first, dname + "/Wb"), Op(c, "Slice", {bd}, second, dname + "/Rb")}, {},
             dname + "/Wb_Rb");
      bias = Op(c, "Gather", {sum, ConstOf(c, Int64s(rows), dname + "/bias_order")}, {}, dname + "/bias");
    } else {
      WEFT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(dtype, Shape{4 * hidden}));
      bias = ConstOf(c, zeros, dname + "/bias");
    }
    return std::make_pair(kernel, bias);
  }
  const Tensor w = c.Initial(1), r = c.Initial(2), bias = c.Initial(3);
  const std::size_t es = DTypeSize(dtype);
  WEFT_ASSIGN_OR_RETURN(Tensor kernel, Tensor::Allocate(dtype, Shape{input + hidden, 4 * hidden}));
  WEFT_ASSIGN_OR_RETURN(Tensor b, Tensor::Zeros(dtype, Shape{4 * hidden}));
  const char* wsrc = static_cast<const char*>(w.raw_data()) + static_cast<std::size_t>(d * 4 * hidden * input) * es;
  const char* rsrc = static_cast<const char*>(r.raw_data()) + static_cast<std::size_t>(d * 4 * hidden * hidden) * es;
  char* kdst = static_cast<char*>(kernel.raw_data());
  for (int64_t col = 0; col < 4 * hidden; ++col) {
    const int64_t src_row = rows[static_cast<std::size_t>(col)];
    for (int64_t i = 0; i < input; ++i) {
      std::memcpy(kdst + static_cast<std::size_t>(i * 4 * hidden + col) * es,
                  wsrc + static_cast<std::size_t>(src_row * input + i) * es, es);
    }
    for (int64_t i = 0; i < hidden; ++i) {
      std::memcpy(kdst + static_cast<std::size_t>((input + i) * 4 * hidden + col) * es,
                  rsrc + static_cast<std::size_t>(src_row * hidden + i) * es, es);
    }
    if (bias.valid()) {
      const std::size_t base = static_cast<std::size_t>(d * 8 * hidden);
      if (dtype == DType::kF32) {
        b.data<float>()[col] = bias.data<float>()[base + static_cast<std::size_t>(src_row)] +
                               bias.data<float>()[base + static_cast<std::size_t>(4 * hidden + src_row)];
      } else {
        b.data<double>()[col] = bias.data<double>()[base + static_cast<std::size_t>(src_row)] +
                                bias.data<double>()[base + static_cast<std::size_t>(4 * hidden + src_row)];
      }
    }
  }
  WEFT_ASSIGN_OR_RETURN(Output kw, c.Param(kernel, c.Name(dname + "/kernel")));
  WEFT_ASSIGN_OR_RETURN(Output kb, c.Param(b, c.Name(dname + "/bias")));
  return std::make_pair(kw, kb);
}

Status Lstm(NodeContext& c) {
  if (c.has_input(4)) {
    return c.Unsupported("LSTM with sequence_lens (Weft unrolls sequences of one static length)");
  }
  if (c.has_input(7)) return c.Unsupported("LSTM with peepholes (input P)");
  if (c.HasAttr("clip")) return c.Unsupported("LSTM with 'clip'");
  if (c.Int("input_forget", 0) != 0) return c.Unsupported("LSTM with input_forget");
  if (c.HasAttr("activations")) {
    const auto* a = c.Attr("activations");
    for (int i = 0; i < a->strings_size(); ++i) {
      const std::string& s = a->strings(i);
      if (s != (i % 3 == 0 ? "Sigmoid" : "Tanh")) return c.Unsupported("LSTM activation ", Quote(s));
    }
  }
  const std::string direction = c.Str("direction", "forward");
  const int layout = static_cast<int>(c.Int("layout", 0));
  const int64_t hidden = c.Int("hidden_size", -1);
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return c.Error("attr 'direction' is ", Quote(direction));
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  WEFT_ASSIGN_OR_RETURN(const int64_t input, CheckRecurrentWeights(c, "LSTM", dirs, 4, hidden));
  const DType dtype = c.InDType(1);
  WEFT_ASSIGN_OR_RETURN(Output x, SequenceInput(c, "LSTM", input));
  const int64_t steps = x.shape().dim(0);
  const int64_t gate_order[4] = {0, 2, 3, 1};  // Weft block k takes ONNX block gate_order[k]
  std::vector<Output> y_dirs, h_dirs, c_dirs;
  for (int64_t d = 0; d < dirs; ++d) {
    const std::string dname = dirs == 2 ? StrCat("dir_", d) : std::string("cell");
    WEFT_ASSIGN_OR_RETURN(auto params, LstmParams(c, d, dname, input, hidden, gate_order));
    const Output kw = params.first, kb = params.second;
    // Initial states [dirs, batch, hidden] -> this direction's [batch, hidden].
    auto initial = [&](int index, const char* what) -> Expected<Output> {
      if (c.has_input(index)) {
        WEFT_ASSIGN_OR_RETURN(Output s, InitialState(c, index));
        return StepSlice(c, s, d, StrCat(dname, "/", what));
      }
      Output x0 = StepSlice(c, x, 0, StrCat(dname, "/", what, "_x0s"));
      // zeros [batch, hidden]: x0 [batch, input] @ zeros [input, hidden].
      WEFT_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros(dtype, Shape{input, hidden}));
      return Op(c, "MatMul", {x0, ConstOf(c, z, StrCat(dname, "/", what, "_zeros"))}, {}, StrCat(dname, "/", what));
    };
    WEFT_ASSIGN_OR_RETURN(Output h, initial(5, "h0"));
    WEFT_ASSIGN_OR_RETURN(Output cs, initial(6, "c0"));
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<Output> hs(static_cast<std::size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = reverse ? steps - 1 - s : s;
      Output xt = StepSlice(c, x, t, StrCat(dname, "/x_", t));
      std::vector<Output> out = c.b().AddNode("LSTMCell", {xt, cs, h, kw, kb}, {{"forget_bias", AttrValue(0.0)}},
                                              c.Name(StrCat(dname, "/step_", t)));
      if (out.size() != 3) return c.b().status();
      cs = out[0];
      h = out[1];
      hs[static_cast<std::size_t>(t)] = h;
    }
    if (c.has_output(0)) {
      y_dirs.push_back(Op(c, "Pack", hs, {{"axis", AttrValue(int64_t{0})}}, StrCat(dname, "/Y")));
    }
    h_dirs.push_back(h);
    c_dirs.push_back(cs);
  }
  // Y [T, dirs, batch, hidden] (layout 0) or [batch, T, dirs, hidden] (layout 1).
  if (c.has_output(0)) {
    Output y = Op(c, "Pack", y_dirs, {{"axis", AttrValue(int64_t{1})}}, layout == 1 ? "Y_time_major" : "Y");
    if (layout == 1) y = Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{2, 0, 1, 3})}}, "Y");
    c.SetOut(0, y);
  }
  const std::vector<int64_t> state_perm = {1, 0, 2};
  if (c.has_output(1)) {
    Output yh = Op(c, "Pack", h_dirs, {{"axis", AttrValue(int64_t{0})}}, "Y_h");
    c.SetOut(1, layout == 1 ? Op(c, "Transpose", {yh}, {{"perm", AttrValue(state_perm)}}, "Y_h_batch_major") : yh);
  }
  if (c.has_output(2)) {
    Output yc = Op(c, "Pack", c_dirs, {{"axis", AttrValue(int64_t{0})}}, "Y_c");
    c.SetOut(2, layout == 1 ? Op(c, "Transpose", {yc}, {{"perm", AttrValue(state_perm)}}, "Y_c_batch_major") : yc);
  }
  return Status();
}

// --- GRU and RNN ----------------------------------------------------------------------------
//
// Unrolled like LSTM, from Weft's own ops: the input projection of every
// step is one MatMul (X [T*B, I] x W^T), then per step one MatMul of the
// state by R^T, Split into the gates, and the elementwise update. The
// weights are parameters (trainable unless frozen), stored transposed.

struct RecurrentParams {
  Output w, r, wb, rb;  // W_d^T [input, G*H], R_d^T [hidden, G*H], their biases [G*H]
};

// Direction |d|'s GRU or RNN weights, stored transposed: parameters made at
// import from initializers, or graph ops on fed weights.
Expected<RecurrentParams> GruRnnParams(NodeContext& c, int64_t d, const std::string& dname, int64_t gh) {
  const DType dtype = c.InDType(1);
  RecurrentParams p;
  if (WeightsFed(c)) {
    WEFT_ASSIGN_OR_RETURN(p.w, FedSlice(c, 1, d, {}, true, dname + "/W"));
    WEFT_ASSIGN_OR_RETURN(p.r, FedSlice(c, 2, d, {}, true, dname + "/R"));
    if (c.has_input(3)) {
      WEFT_ASSIGN_OR_RETURN(Output bd, FedSlice(c, 3, d, {}, false, dname + "/B"));
      p.wb = Op(c, "Slice", {bd},
                {{"begin", AttrValue(std::vector<int64_t>{0})}, {"size", AttrValue(std::vector<int64_t>{gh})}},
                dname + "/Wb");
      p.rb = Op(c, "Slice", {bd},
                {{"begin", AttrValue(std::vector<int64_t>{gh})}, {"size", AttrValue(std::vector<int64_t>{gh})}},
                dname + "/Rb");
    } else {
      WEFT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(dtype, Shape{gh}));
      p.wb = ConstOf(c, zeros, dname + "/Wb");
      p.rb = ConstOf(c, zeros, dname + "/Rb");
    }
    return p;
  }
  const Tensor w = c.Initial(1), r = c.Initial(2), bias = c.Initial(3);
  // Slice [d] of a [dirs, rows, cols] tensor, transposed: [cols, rows].
  auto transposed = [&](const Tensor& t) -> Expected<Tensor> {
    const int64_t rows = t.dim(1), cols = t.dim(2);
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), Shape{cols, rows}));
    const std::size_t es = DTypeSize(t.dtype());
    const char* src = static_cast<const char*>(t.raw_data()) + static_cast<std::size_t>(d * rows * cols) * es;
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        std::memcpy(dst + static_cast<std::size_t>(j * rows + i) * es,
                    src + static_cast<std::size_t>(i * cols + j) * es, es);
      }
    }
    return out;
  };
  auto bias_part = [&](int64_t half) -> Expected<Tensor> {
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(dtype, Shape{gh}));
    if (bias.valid()) {
      const std::size_t es = DTypeSize(dtype);
      std::memcpy(out.raw_data(),
                  static_cast<const char*>(bias.raw_data()) + static_cast<std::size_t>(d * 2 * gh + half * gh) * es,
                  static_cast<std::size_t>(gh) * es);
    }
    return out;
  };
  WEFT_ASSIGN_OR_RETURN(Tensor wt, transposed(w));
  WEFT_ASSIGN_OR_RETURN(Tensor rt, transposed(r));
  WEFT_ASSIGN_OR_RETURN(Tensor wb, bias_part(0));
  WEFT_ASSIGN_OR_RETURN(Tensor rb, bias_part(1));
  WEFT_ASSIGN_OR_RETURN(p.w, c.Param(wt, c.Name(dname + "/W")));
  WEFT_ASSIGN_OR_RETURN(p.r, c.Param(rt, c.Name(dname + "/R")));
  WEFT_ASSIGN_OR_RETURN(p.wb, c.Param(wb, c.Name(dname + "/Wb")));
  WEFT_ASSIGN_OR_RETURN(p.rb, c.Param(rb, c.Name(dname + "/Rb")));
  return p;
}

// Recurrence |what| of ONNX GRU or RNN: |gates| blocks in W, R and B.
Status Recurrent(NodeContext& c, std::string_view what, int64_t gates) {
  if (c.has_input(4)) {
    return c.Unsupported(what, " with sequence_lens (Weft unrolls sequences of one static length)");
  }
  if (c.HasAttr("clip")) return c.Unsupported(what, " with 'clip'");
  if (c.HasAttr("activations")) {
    const auto* a = c.Attr("activations");
    for (int i = 0; i < a->strings_size(); ++i) {
      const std::string& s = a->strings(i);
      const bool gate = gates == 3 && i % 2 == 0;
      if (s != (gate ? "Sigmoid" : "Tanh")) return c.Unsupported(what, " activation ", Quote(s));
    }
  }
  const std::string direction = c.Str("direction", "forward");
  const int layout = static_cast<int>(c.Int("layout", 0));
  const int64_t hidden = c.Int("hidden_size", -1);
  const bool before_reset = c.Int("linear_before_reset", 0) != 0;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return c.Error("attr 'direction' is ", Quote(direction));
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t gh = gates * hidden;
  WEFT_ASSIGN_OR_RETURN(const int64_t input, CheckRecurrentWeights(c, what, dirs, gates, hidden));
  const DType dtype = c.InDType(1);
  WEFT_ASSIGN_OR_RETURN(Output x, SequenceInput(c, what, input));
  const int64_t steps = x.shape().dim(0);
  GraphBuilder& b = c.b();
  std::vector<Output> y_dirs, h_dirs;
  for (int64_t d = 0; d < dirs; ++d) {
    const std::string dname = dirs == 2 ? StrCat("dir_", d) : std::string("cell");
    WEFT_ASSIGN_OR_RETURN(RecurrentParams p, GruRnnParams(c, d, dname, gh));
    const Output kw = p.w, kr = p.r, kwb = p.wb, krb = p.rb;
    // Every step's input projection at once: [T, B, G*H].
    Output rows =
        Op(c, "Reshape", {x, ConstOf(c, Int64s({-1, input}), dname + "/x_rows_shape")}, {}, dname + "/x_rows");
    Output proj = Op(c, "BiasAdd", {Op(c, "MatMul", {rows, kw}, {}, dname + "/xw"), kwb}, {}, dname + "/xw_bias");
    proj = Op(c, "Reshape", {proj, ConstOf(c, Int64s({steps, -1, gh}), dname + "/xw_shape")}, {}, dname + "/xw_steps");
    // The initial state [B, H]: input 5's slice d, or zeros (x0 [B, I] x zeros [I, H]).
    Output h;
    if (c.has_input(5)) {
      WEFT_ASSIGN_OR_RETURN(Output h0, InitialState(c, 5));
      h = StepSlice(c, h0, d, dname + "/h0");
    } else {
      WEFT_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros(dtype, Shape{input, hidden}));
      h = Op(c, "MatMul", {StepSlice(c, x, 0, dname + "/x0"), ConstOf(c, z, dname + "/h0_zeros")}, {}, dname + "/h0");
    }
    // GRU without linear_before_reset multiplies the reset state by Rh,
    // the last H columns of R^T, on its own.
    Output rh, rbh;
    if (gates == 3 && !before_reset) {
      rh = Op(c, "Slice", {kr},
              {{"begin", AttrValue(std::vector<int64_t>{0, 2 * hidden})},
               {"size", AttrValue(std::vector<int64_t>{-1, hidden})}},
              dname + "/Rh");
      rbh = Op(
          c, "Slice", {krb},
          {{"begin", AttrValue(std::vector<int64_t>{2 * hidden})}, {"size", AttrValue(std::vector<int64_t>{hidden})}},
          dname + "/Rbh");
    }
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<Output> hs(static_cast<std::size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = reverse ? steps - 1 - s : s;
      const std::string sn = StrCat(dname, "/step_", t);
      Output xw = StepSlice(c, proj, t, sn + "/xw");
      Output hr = Op(c, "BiasAdd", {Op(c, "MatMul", {h, kr}, {}, sn + "/hr"), krb}, {}, sn + "/hr_bias");
      if (gates == 1) {
        h = Op(c, "Tanh", {Op(c, "Add", {xw, hr}, {}, sn + "/sum")}, {}, sn + "/h");
      } else {
        std::vector<Output> xg =
            b.AddNode("Split", {xw}, {{"num_split", AttrValue(int64_t{3})}, {"axis", AttrValue(int64_t{1})}},
                      c.Name(sn + "/xw_gates"));
        std::vector<Output> hg =
            b.AddNode("Split", {hr}, {{"num_split", AttrValue(int64_t{3})}, {"axis", AttrValue(int64_t{1})}},
                      c.Name(sn + "/hr_gates"));
        if (xg.size() != 3 || hg.size() != 3) return b.status();
        Output z = Op(c, "Sigmoid", {Op(c, "Add", {xg[0], hg[0]}, {}, sn + "/z_sum")}, {}, sn + "/z");
        Output rg = Op(c, "Sigmoid", {Op(c, "Add", {xg[1], hg[1]}, {}, sn + "/r_sum")}, {}, sn + "/r");
        Output cand;
        if (before_reset) {
          // tanh(Xt Wh + rt * (Ht-1 Rh + Rbh) + Wbh)
          cand = Op(c, "Add", {xg[2], Op(c, "Mul", {rg, hg[2]}, {}, sn + "/reset")}, {}, sn + "/h_sum");
        } else {
          // tanh(Xt Wh + (rt * Ht-1) Rh + Rbh + Wbh).
          Output reset = Op(c, "MatMul", {Op(c, "Mul", {rg, h}, {}, sn + "/reset_h"), rh}, {}, sn + "/reset");
          cand = Op(c, "Add", {xg[2], Op(c, "BiasAdd", {reset, rbh}, {}, sn + "/reset_bias")}, {}, sn + "/h_sum");
        }
        cand = Op(c, "Tanh", {cand}, {}, sn + "/candidate");
        // Ht = (1 - z) * cand + z * Ht-1 = cand + z * (Ht-1 - cand)
        h = Op(c, "Add", {cand, Op(c, "Mul", {z, Op(c, "Sub", {h, cand}, {}, sn + "/diff")}, {}, sn + "/keep")}, {},
               sn + "/h");
      }
      hs[static_cast<std::size_t>(t)] = h;
    }
    if (c.has_output(0)) y_dirs.push_back(Op(c, "Pack", hs, {{"axis", AttrValue(int64_t{0})}}, dname + "/Y"));
    h_dirs.push_back(h);
  }
  if (c.has_output(0)) {
    Output y = Op(c, "Pack", y_dirs, {{"axis", AttrValue(int64_t{1})}}, layout == 1 ? "Y_time_major" : "Y");
    if (layout == 1) y = Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{2, 0, 1, 3})}}, "Y");
    c.SetOut(0, y);
  }
  if (c.has_output(1)) {
    Output yh = Op(c, "Pack", h_dirs, {{"axis", AttrValue(int64_t{0})}}, "Y_h");
    c.SetOut(1, layout == 1
                    ? Op(c, "Transpose", {yh}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "Y_h_batch_major")
                    : yh);
  }
  return Status();
}

}  // namespace

void AddRecurrentConverters(ConverterTable& t) {
  t["LSTM"] = Lstm;
  t["GRU"] = [](NodeContext& c) { return Recurrent(c, "GRU", 3); };
  t["RNN"] = [](NodeContext& c) { return Recurrent(c, "RNN", 1); };
}

}  // namespace weft::onnx_io::convert
