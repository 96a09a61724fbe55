// ONNX converters, Einsum, as transposes, reductions and batched matrix products (the conventions are in
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

// --- Einsum -------------------------------------------------------------------------------
//
// Composed, as XLA and ONNX Runtime do: each operand first sums the
// letters no other operand and not the output has; operands are then
// contracted left to right, each pair as one MatMul or BatchMatMul of
// [batch..., free_a, summed] x [batch..., summed, free_b] with Transposes
// and Reshapes around it; the result is transposed into the output's
// order. Ellipses are expanded to letters of their own (right-aligned,
// equal sizes: no broadcasting of 1 against n). Not supported: a letter
// twice in one operand (a diagonal).

struct EinsumTerm {
  Output x;
  std::string letters;  // one per axis
};

// The 1-D i64 shape [d(groups[0]), d(groups[1]), ...] of |x|, where each
// group's size is the product of the axes it lists: a Const when every
// size is static, else computed from Shape(x).
Output GroupedShape(NodeContext& c, const Output& x, const std::vector<std::vector<int>>& groups,
                    std::string_view suffix) {
  GraphBuilder& b = c.b();
  const Shape& s = x.shape();
  std::vector<int64_t> dims;
  bool known = true;
  for (const auto& g : groups) {
    int64_t d = 1;
    for (int a : g) {
      const int64_t dim = a < s.rank() ? s.dim(a) : -1;  // rank -1 when unknown
      if (dim < 0) known = false;
      d *= std::max<int64_t>(dim, 0);
    }
    dims.push_back(d);
  }
  if (known) return ConstOf(c, Int64s(dims), suffix);
  Output shape = b.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, c.Name(StrCat(suffix, "_of")));
  std::vector<Output> parts;
  for (const auto& g : groups) {
    std::vector<int64_t> idx(g.begin(), g.end());
    Output picked = b.Op("Gather", {shape, ConstOf(c, Int64s(idx), StrCat(suffix, "_axes"))}, {}, c.Name(suffix));
    parts.push_back(b.Op("Prod", {picked},
                         {{"axis", AttrValue(std::vector<int64_t>{0})}, {"keep_dims", AttrValue(true)}},
                         c.Name(suffix)));
  }
  return b.Op("Concat", parts, {{"axis", AttrValue(int64_t{0})}}, c.Name(suffix));
}

// |t| with the axes of the letters outside |keep| summed away.
EinsumTerm SumAway(NodeContext& c, const EinsumTerm& t, const std::string& keep) {
  std::vector<int64_t> axes;
  std::string rest;
  for (std::size_t i = 0; i < t.letters.size(); ++i) {
    if (keep.find(t.letters[i]) == std::string::npos) {
      axes.push_back(static_cast<int64_t>(i));
    } else {
      rest.push_back(t.letters[i]);
    }
  }
  if (axes.empty()) return t;
  return {c.b().Op("Sum", {t.x}, {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(false)}}, c.Name("sum")), rest};
}

// |t| transposed into the letter order |order| (a permutation of its letters).
Output Permuted(NodeContext& c, const EinsumTerm& t, const std::string& order) {
  if (order == t.letters) return t.x;
  std::vector<int64_t> perm;
  for (char l : order) perm.push_back(static_cast<int64_t>(t.letters.find(l)));
  return c.b().Op("Transpose", {t.x}, {{"perm", AttrValue(perm)}}, c.Name("transpose"));
}

Expected<EinsumTerm> Contract(NodeContext& c, EinsumTerm a, EinsumTerm bt, const std::string& keep) {
  GraphBuilder& b = c.b();
  a = SumAway(c, a, keep + bt.letters);
  bt = SumAway(c, bt, keep + a.letters);
  std::string batch, summed, free_a, free_b;
  for (char l : a.letters) {
    const bool in_b = bt.letters.find(l) != std::string::npos;
    const bool kept = keep.find(l) != std::string::npos;
    (in_b ? (kept ? batch : summed) : free_a).push_back(l);
  }
  for (char l : bt.letters) {
    if (a.letters.find(l) == std::string::npos) free_b.push_back(l);
  }
  const int nb = static_cast<int>(batch.size());
  auto range = [](int from, int count) {
    std::vector<int> v(static_cast<std::size_t>(count));
    std::iota(v.begin(), v.end(), from);
    return v;
  };
  Output xa = Permuted(c, a, batch + free_a + summed);
  Output xb = Permuted(c, bt, batch + summed + free_b);
  WEFT_RETURN_IF_ERROR(b.status());
  std::vector<std::vector<int>> ga, gb;
  for (int i = 0; i < nb; ++i) {
    ga.push_back({i});
    gb.push_back({i});
  }
  ga.push_back(range(nb, static_cast<int>(free_a.size())));
  ga.push_back(range(nb + static_cast<int>(free_a.size()), static_cast<int>(summed.size())));
  gb.push_back(range(nb, static_cast<int>(summed.size())));
  gb.push_back(range(nb + static_cast<int>(summed.size()), static_cast<int>(free_b.size())));
  Output ma = b.Op("Reshape", {xa, GroupedShape(c, xa, ga, "a_shape")}, {}, c.Name("a"));
  Output mb = b.Op("Reshape", {xb, GroupedShape(c, xb, gb, "b_shape")}, {}, c.Name("b"));
  Output prod = b.Op(nb == 0 ? "MatMul" : "BatchMatMul", {ma, mb}, {}, c.Name("product"));
  // [batch..., free_a..., free_b...] from the operands' shapes.
  std::vector<std::vector<int>> gr;
  for (int i = 0; i < nb + static_cast<int>(free_a.size()); ++i) gr.push_back({i});
  Output shape_a = GroupedShape(c, xa, gr, "out_shape_a");
  std::vector<std::vector<int>> gr_b;
  for (int i = nb + static_cast<int>(summed.size()); i < static_cast<int>(bt.letters.size()); ++i) gr_b.push_back({i});
  Output out_shape = shape_a;
  if (!gr_b.empty()) {
    out_shape = b.Op("Concat", {shape_a, GroupedShape(c, xb, gr_b, "out_shape_b")}, {{"axis", AttrValue(int64_t{0})}},
                     c.Name("out_shape"));
  }
  return EinsumTerm{b.Op("Reshape", {prod, out_shape}, {}, c.Name("contracted")), batch + free_a + free_b};
}

Status Einsum(NodeContext& c) {
  std::string eq;
  for (char ch : c.Str("equation", "")) {
    if (ch != ' ') eq.push_back(ch);
  }
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != c.num_inputs()) {
    return c.Error("equation ", Quote(eq), " has ", terms.size(), " operands; the node has ", c.num_inputs(),
                   " inputs");
  }
  std::string used;
  for (char ch : eq) {
    if (std::isalpha(static_cast<unsigned char>(ch)) != 0) used.push_back(ch);
  }
  // Letters for the axes ellipses stand for.
  std::string pool;
  for (char ch : std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")) {
    if (used.find(ch) == std::string::npos) pool.push_back(ch);
  }
  std::vector<EinsumTerm> ops;
  int ellipsis = 0;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(static_cast<int>(k)));
    const int rank = x.shape().rank();
    if (rank < 0) return c.Unsupported("Einsum of an operand of unknown rank (input ", k, ")");
    std::string t = terms[k];
    const std::size_t dots = t.find("...");
    const int explicit_letters = static_cast<int>(t.size()) - (dots == std::string::npos ? 0 : 3);
    if (dots != std::string::npos) ellipsis = std::max(ellipsis, rank - explicit_letters);
    ops.push_back({x, t});
  }
  if (ellipsis > static_cast<int>(pool.size())) return c.Unsupported("an ellipsis of ", ellipsis, " axes");
  const std::string ell = pool.substr(0, static_cast<std::size_t>(ellipsis));
  for (std::size_t k = 0; k < ops.size(); ++k) {
    std::string& t = ops[k].letters;
    const int rank = ops[k].x.shape().rank();
    const std::size_t dots = t.find("...");
    if (dots != std::string::npos) {
      const int n = rank - (static_cast<int>(t.size()) - 3);
      if (n < 0) return c.Error("operand ", k, " (", Quote(terms[k]), ") has rank ", rank);
      t = t.substr(0, dots) + ell.substr(ell.size() - static_cast<std::size_t>(n)) + t.substr(dots + 3);
    }
    if (static_cast<int>(t.size()) != rank) {
      return c.Error("operand ", k, " (", Quote(terms[k]), ") names ", t.size(), " axes; the input has rank ", rank);
    }
    for (char l : t) {
      if (std::isalpha(static_cast<unsigned char>(l)) == 0)
        return c.Error("equation ", Quote(eq), ": bad letter ", Quote(std::string(1, l)));
      if (std::count(t.begin(), t.end(), l) > 1) {
        return c.Unsupported("equation ", Quote(eq), ": letter ", std::string(1, l),
                             " twice in one operand (a diagonal)");
      }
    }
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    const std::size_t dots = out.find("...");
    if (dots != std::string::npos) out = out.substr(0, dots) + ell + out.substr(dots + 3);
  } else {
    // Implicit output: the ellipsis axes, then the letters used once, in
    // alphabetical order.
    std::string once;
    for (char l : used) {
      if (std::count(used.begin(), used.end(), l) == 1) once.push_back(l);
    }
    std::sort(once.begin(), once.end());
    out = ell + once;
  }
  for (char l : out) {
    bool found = false;
    for (const auto& t : ops) found = found || t.letters.find(l) != std::string::npos;
    if (!found || std::count(out.begin(), out.end(), l) > 1) {
      return c.Error("equation ", Quote(eq), ": output letter ", std::string(1, l),
                     found ? " appears twice" : " is in no operand");
    }
  }
  // Sum away what only one operand has, then contract left to right.
  auto needed_after = [&](std::size_t k) {
    std::string keep = out;
    for (std::size_t j = k + 1; j < ops.size(); ++j) keep += ops[j].letters;
    return keep;
  };
  EinsumTerm cur = SumAway(c, ops[0], needed_after(0));
  for (std::size_t k = 1; k < ops.size(); ++k) {
    WEFT_RETURN_IF_ERROR(c.b().status());
    WEFT_ASSIGN_OR_RETURN(cur, Contract(c, cur, ops[k], needed_after(k)));
  }
  cur = SumAway(c, cur, out);
  c.SetOut(0, Op(c, "Identity", {Permuted(c, cur, out)}));
  return Status();
}

}  // namespace

void AddEinsumConverters(ConverterTable& t) { t["Einsum"] = Einsum; }

}  // namespace weft::onnx_io::convert
