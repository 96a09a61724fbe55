// Gradients of the elementwise, reduction and matrix ops.
#include <cmath>
#include <numeric>

#include "core/grad/gradients.h"

namespace weft::grad {
namespace {

using Dx = std::vector<Output>;

// For ops y = f(x): dx = g * f'(x), with f'(x) built by |derivative|.
void Unary(GradRegistry& r, const char* op, std::function<Output(GradContext&, Output x, Output y, Output g)> fn) {
  r.Register(op, [fn](GradContext& c, Dx& dx) {
    dx[0] = fn(c, c.input(0), c.output(0), c.grad(0));
    return Status();
  });
}

// The mask |condition| as 0/1 of |like|'s dtype.
Output Mask(GradContext& c, const Output& condition, const Output& like) {
  return c.Op("Cast", {condition}, {{"DstT", AttrValue(like.dtype())}});
}

// The reduction axes of a Sum/Mean/Max/Min/Prod node, normalised and
// sorted; empty "axis" means every axis. Fails for an unknown rank.
Expected<std::vector<int64_t>> ReductionAxes(GradContext& c) {
  const Shape& shape = c.input(0).shape();
  if (shape.unknown_rank()) return InvalidArgumentError("the input's rank must be known");
  const int64_t rank = shape.rank();
  std::vector<int64_t> axes = c.Ints("axis");
  if (axes.empty()) {
    axes.resize(static_cast<std::size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// |t| (a reduction's output or its gradient) with the reduced axes put back
// as size 1, so it broadcasts against the input.
Output KeepDims(GradContext& c, Output t, const std::vector<int64_t>& axes) {
  if (c.Bool("keep_dims")) return t;
  for (int64_t a : axes) t = c.Op("ExpandDims", {t}, {{"axis", AttrValue(a)}});
  return t;
}

Output Broadcast(GradContext& c, const Output& t, const Output& like) {
  return c.Op("BroadcastTo", {t, c.ShapeOf(like)});
}

// The number of input elements behind each output element of a reduction.
Output ReducedCount(GradContext& c, const Output& x, const Output& y) {
  if (x.shape().IsFullyDefined() && y.shape().IsFullyDefined()) {
    int64_t nx = 1, ny = 1;
    for (int64_t d : x.shape().dims()) nx *= d;
    for (int64_t d : y.shape().dims()) ny *= d;
    return c.Scalar(ny == 0 ? 0.0 : static_cast<double>(nx) / static_cast<double>(ny), x);
  }
  auto size = [&](const Output& t) {
    return c.Op("Cast", {c.Op("Size", {t}, {{"out_type", AttrValue(DType::kI64)}})}, {{"DstT", AttrValue(x.dtype())}});
  };
  return c.Op("Div", {size(x), c.Op("Maximum", {size(y), c.Scalar(1, x)})});
}

Status MatMulGrad(GradContext& c, Dx& dx, const char* op, const char* ta_name, const char* tb_name) {
  const bool ta = c.Bool(ta_name), tb = c.Bool(tb_name);
  const Output a = c.input(0), b = c.input(1), g = c.grad(0);
  auto mm = [&](const Output& x, const Output& y, bool tx, bool ty) {
    return c.Op(op, {x, y}, {{ta_name, AttrValue(tx)}, {tb_name, AttrValue(ty)}});
  };
  if (!ta && !tb) {
    dx[0] = mm(g, b, false, true);
    dx[1] = mm(a, g, true, false);
  } else if (!ta && tb) {
    dx[0] = mm(g, b, false, false);
    dx[1] = mm(g, a, true, false);
  } else if (ta && !tb) {
    dx[0] = mm(b, g, false, true);
    dx[1] = mm(a, g, false, false);
  } else {
    dx[0] = mm(b, g, true, true);
    dx[1] = mm(g, a, true, true);
  }
  if (std::string(op) == "BatchMatMul") {  // broadcast batch dimensions
    dx[0] = c.ReduceLike(dx[0], a);
    dx[1] = c.ReduceLike(dx[1], b);
  }
  return Status();
}

}  // namespace

void RegisterMathGradients(GradRegistry& r) {
  // --- Unary ---
  Unary(r, "Identity", [](GradContext&, Output, Output, Output g) { return g; });
  Unary(r, "Neg", [](GradContext& c, Output, Output, Output g) { return c.Op("Neg", {g}); });
  Unary(r, "Abs", [](GradContext& c, Output x, Output, Output g) { return c.Op("Mul", {g, c.Op("Sign", {x})}); });
  Unary(r, "Sign", [](GradContext& c, Output x, Output, Output) { return c.Op("ZerosLike", {x}); });
  Unary(r, "Exp", [](GradContext& c, Output, Output y, Output g) { return c.Op("Mul", {g, y}); });
  Unary(r, "Expm1", [](GradContext& c, Output x, Output, Output g) { return c.Op("Mul", {g, c.Op("Exp", {x})}); });
  Unary(r, "Log", [](GradContext& c, Output x, Output, Output g) { return c.Op("Div", {g, x}); });
  Unary(r, "Log1p", [](GradContext& c, Output x, Output, Output g) {
    return c.Op("Div", {g, c.Op("Add", {x, c.Scalar(1, x)})});
  });
  Unary(r, "Sqrt", [](GradContext& c, Output, Output y, Output g) { return c.Op("SqrtGrad", {y, g}); });
  Unary(r, "Rsqrt", [](GradContext& c, Output, Output y, Output g) { return c.Op("RsqrtGrad", {y, g}); });
  Unary(r, "Reciprocal", [](GradContext& c, Output, Output y, Output g) { return c.Op("ReciprocalGrad", {y, g}); });
  Unary(r, "Square", [](GradContext& c, Output x, Output, Output g) {
    return c.Op("Mul", {g, c.Op("Mul", {x, c.Scalar(2, x)})});
  });
  Unary(r, "Sin", [](GradContext& c, Output x, Output, Output g) { return c.Op("Mul", {g, c.Op("Cos", {x})}); });
  Unary(r, "Cos", [](GradContext& c, Output x, Output, Output g) {
    return c.Op("Neg", {c.Op("Mul", {g, c.Op("Sin", {x})})});
  });
  Unary(r, "Tan", [](GradContext& c, Output, Output y, Output g) {
    // d/dx tan(x) = 1 / cos(x)^2 = 1 + tan(x)^2
    return c.Op("Mul", {g, c.Op("Add", {c.Op("Square", {y}), c.Scalar(1, y)})});
  });
  Unary(r, "Asin", [](GradContext& c, Output x, Output, Output g) {
    // d/dx asin(x) = 1 / sqrt(1 - x^2)
    return c.Op("Mul", {g, c.Op("Rsqrt", {c.Op("Sub", {c.Scalar(1, x), c.Op("Square", {x})})})});
  });
  Unary(r, "Acos", [](GradContext& c, Output x, Output, Output g) {
    // d/dx acos(x) = -1 / sqrt(1 - x^2)
    return c.Op("Neg", {c.Op("Mul", {g, c.Op("Rsqrt", {c.Op("Sub", {c.Scalar(1, x), c.Op("Square", {x})})})})});
  });
  Unary(r, "Atan", [](GradContext& c, Output x, Output, Output g) {
    // d/dx atan(x) = 1 / (1 + x^2)
    return c.Op("Div", {g, c.Op("Add", {c.Op("Square", {x}), c.Scalar(1, x)})});
  });
  Unary(r, "Sinh", [](GradContext& c, Output x, Output, Output g) { return c.Op("Mul", {g, c.Op("Cosh", {x})}); });
  Unary(r, "Cosh", [](GradContext& c, Output x, Output, Output g) { return c.Op("Mul", {g, c.Op("Sinh", {x})}); });
  Unary(r, "Tanh", [](GradContext& c, Output, Output y, Output g) { return c.Op("TanhGrad", {y, g}); });
  Unary(r, "Asinh", [](GradContext& c, Output x, Output, Output g) {
    // d/dx asinh(x) = 1 / sqrt(x^2 + 1)
    return c.Op("Mul", {g, c.Op("Rsqrt", {c.Op("Add", {c.Op("Square", {x}), c.Scalar(1, x)})})});
  });
  Unary(r, "Acosh", [](GradContext& c, Output x, Output, Output g) {
    // d/dx acosh(x) = 1 / sqrt(x^2 - 1)
    return c.Op("Mul", {g, c.Op("Rsqrt", {c.Op("Sub", {c.Op("Square", {x}), c.Scalar(1, x)})})});
  });
  Unary(r, "Atanh", [](GradContext& c, Output x, Output, Output g) {
    // d/dx atanh(x) = 1 / (1 - x^2)
    return c.Op("Div", {g, c.Op("Sub", {c.Scalar(1, x), c.Op("Square", {x})})});
  });
  Unary(r, "Sigmoid", [](GradContext& c, Output, Output y, Output g) { return c.Op("SigmoidGrad", {y, g}); });
  Unary(r, "Relu", [](GradContext& c, Output x, Output, Output g) { return c.Op("ReluGrad", {g, x}); });
  Unary(r, "Relu6", [](GradContext& c, Output x, Output, Output g) { return c.Op("Relu6Grad", {g, x}); });
  Unary(r, "Elu", [](GradContext& c, Output, Output y, Output g) { return c.Op("EluGrad", {g, y}); });
  Unary(r, "Selu", [](GradContext& c, Output, Output y, Output g) { return c.Op("SeluGrad", {g, y}); });
  Unary(r, "Softplus", [](GradContext& c, Output x, Output, Output g) { return c.Op("SoftplusGrad", {g, x}); });
  Unary(r, "Gelu", [](GradContext& c, Output x, Output, Output g) {
    return c.Op("GeluGrad", {g, x}, {{"approximate", AttrValue(c.Bool("approximate"))}});
  });
  Unary(r, "Erf", [](GradContext& c, Output x, Output, Output g) {
    // d/dx erf(x) = 2 / sqrt(pi) * exp(-x^2)
    Output e = c.Op("Exp", {c.Op("Neg", {c.Op("Square", {x})})});
    return c.Op("Mul", {g, c.Op("Mul", {e, c.Scalar(2.0 / std::sqrt(M_PI), x)})});
  });
  r.Register("Cast", [](GradContext& c, Dx& dx) {
    const DType src = c.Type("SrcT"), dst = c.Type("DstT");
    if (IsFloating(src) && IsFloating(dst)) dx[0] = c.Op("Cast", {c.grad(0)}, {{"DstT", AttrValue(src)}});
    return Status();
  });
  r.Register("AddN", [](GradContext& c, Dx& dx) {
    for (Output& d : dx) d = c.grad(0);
    return Status();
  });
  for (const char* op :
       {"StopGradient", "Floor", "Ceil", "Round", "IsNan", "IsInf", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
        "GreaterEqual", "LogicalAnd", "LogicalOr", "LogicalNot", "FloorDiv", "ArgMax", "ArgMin", "All", "Any",
        // int8 quantization is for inference (docs/quantization.md)
        "QuantizeLinear", "DequantizeLinear"}) {
    r.NotDifferentiable(op);
  }

  // --- Binary, with NumPy broadcasting ---
  r.Register("Add", [](GradContext& c, Dx& dx) {
    dx[0] = c.ReduceLike(c.grad(0), c.input(0));
    dx[1] = c.ReduceLike(c.grad(0), c.input(1));
    return Status();
  });
  r.Register("Sub", [](GradContext& c, Dx& dx) {
    dx[0] = c.ReduceLike(c.grad(0), c.input(0));
    dx[1] = c.ReduceLike(c.Op("Neg", {c.grad(0)}), c.input(1));
    return Status();
  });
  r.Register("Mul", [](GradContext& c, Dx& dx) {
    dx[0] = c.ReduceLike(c.Op("Mul", {c.grad(0), c.input(1)}), c.input(0));
    dx[1] = c.ReduceLike(c.Op("Mul", {c.input(0), c.grad(0)}), c.input(1));
    return Status();
  });
  for (const char* op : {"Div", "RealDiv"}) {
    r.Register(op, [](GradContext& c, Dx& dx) {
      const Output x = c.input(0), y = c.input(1), g = c.grad(0);
      dx[0] = c.ReduceLike(c.Op("Div", {g, y}), x);
      // d(x/y)/dy = -x / y^2, written with the output z = x/y as -g * z / y.
      dx[1] = c.ReduceLike(c.Op("Neg", {c.Op("Div", {c.Op("Mul", {g, c.output(0)}), y})}), y);
      return Status();
    });
  }
  r.Register("FloorMod", [](GradContext& c, Dx& dx) {
    const Output x = c.input(0), y = c.input(1), g = c.grad(0);
    dx[0] = c.ReduceLike(g, x);
    dx[1] = c.ReduceLike(c.Op("Neg", {c.Op("Mul", {g, c.Op("Floor", {c.Op("Div", {x, y})})})}), y);
    return Status();
  });
  r.Register("Pow", [](GradContext& c, Dx& dx) {
    const Output x = c.input(0), y = c.input(1), z = c.output(0), g = c.grad(0);
    // dz/dx = y * x^(y-1); dz/dy = z * log(x) where x > 0, 0 elsewhere.
    Output y_minus_1 = c.Op("Sub", {y, c.Scalar(1, y)});
    dx[0] = c.ReduceLike(c.Op("Mul", {g, c.Op("Mul", {y, c.Op("Pow", {x, y_minus_1})})}), x);
    Output positive = c.Op("Greater", {x, c.Scalar(0, x)});
    Output safe_x = c.Op("Select", {positive, x, c.Op("OnesLike", {x})});
    Output log_x = c.Op("Mul", {c.Op("Log", {safe_x}), Mask(c, positive, x)});
    dx[1] = c.ReduceLike(c.Op("Mul", {g, c.Op("Mul", {z, log_x})}), y);
    return Status();
  });
  for (const char* op : {"Maximum", "Minimum"}) {
    const bool max = std::string(op) == "Maximum";
    r.Register(op, [max](GradContext& c, Dx& dx) {
      const Output x = c.input(0), y = c.input(1), g = c.grad(0);
      // Ties go to x.
      Output x_wins = c.Op(max ? "GreaterEqual" : "LessEqual", {x, y});
      Output gx = c.Op("Mul", {g, Mask(c, x_wins, g)});
      dx[0] = c.ReduceLike(gx, x);
      dx[1] = c.ReduceLike(c.Op("Sub", {g, gx}), y);
      return Status();
    });
  }
  r.Register("SquaredDifference", [](GradContext& c, Dx& dx) {
    const Output x = c.input(0), y = c.input(1), g = c.grad(0);
    Output d = c.Op("Mul", {c.Op("Mul", {g, c.Scalar(2, g)}), c.Op("Sub", {x, y})});
    dx[0] = c.ReduceLike(d, x);
    dx[1] = c.ReduceLike(c.Op("Neg", {d}), y);
    return Status();
  });
  r.Register("Select", [](GradContext& c, Dx& dx) {
    const Output cond = c.input(0), t = c.input(1), e = c.input(2), g = c.grad(0);
    Output zeros = c.Op("ZerosLike", {g});
    dx[1] = c.ReduceLike(c.Op("Select", {cond, g, zeros}), t);
    dx[2] = c.ReduceLike(c.Op("Select", {cond, zeros, g}), e);
    return Status();
  });
  r.Register("ClipByValue", [](GradContext& c, Dx& dx) {
    const Output t = c.input(0), lo = c.input(1), hi = c.input(2), g = c.grad(0);
    Output below = Mask(c, c.Op("Less", {t, lo}), g);
    Output above = Mask(c, c.Op("Greater", {t, hi}), g);
    Output g_below = c.Op("Mul", {g, below});
    Output g_above = c.Op("Mul", {g, above});
    dx[0] = c.ReduceLike(c.Op("Sub", {c.Op("Sub", {g, g_below}), g_above}), t);
    dx[1] = c.ReduceLike(g_below, lo);
    dx[2] = c.ReduceLike(g_above, hi);
    return Status();
  });

  // --- Reductions ---
  r.Register("Sum", [](GradContext& c, Dx& dx) {
    WEFT_ASSIGN_OR_RETURN(auto axes, ReductionAxes(c));
    dx[0] = Broadcast(c, KeepDims(c, c.grad(0), axes), c.input(0));
    return Status();
  });
  r.Register("Mean", [](GradContext& c, Dx& dx) {
    WEFT_ASSIGN_OR_RETURN(auto axes, ReductionAxes(c));
    Output g = Broadcast(c, KeepDims(c, c.grad(0), axes), c.input(0));
    dx[0] = c.Op("Div", {g, ReducedCount(c, c.input(0), c.output(0))});
    return Status();
  });
  for (const char* op : {"Max", "Min"}) {
    r.Register(op, [](GradContext& c, Dx& dx) {
      // The gradient is shared equally by the elements equal to the extreme.
      WEFT_ASSIGN_OR_RETURN(auto axes, ReductionAxes(c));
      const Output x = c.input(0);
      Output y = Broadcast(c, KeepDims(c, c.output(0), axes), x);
      Output mask = Mask(c, c.Op("Equal", {x, y}), x);
      Output count = c.Op("Sum", {mask}, {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}});
      Output g = Broadcast(c, KeepDims(c, c.grad(0), axes), x);
      dx[0] = c.Op("Div", {c.Op("Mul", {g, mask}), count});
      return Status();
    });
  }
  r.Register("Prod", [](GradContext& c, Dx& dx) {
    // d prod / d x_i = the product of the others, computed without dividing
    // (x_i may be 0) as exclusive cumulative products from both sides over
    // the reduced axes, flattened into one trailing axis.
    WEFT_ASSIGN_OR_RETURN(auto axes, ReductionAxes(c));
    const Output x = c.input(0);
    const int64_t rank = x.shape().rank();
    std::vector<int64_t> perm, kept;
    for (int64_t i = 0; i < rank; ++i) {
      if (!std::binary_search(axes.begin(), axes.end(), i)) kept.push_back(i);
    }
    perm = kept;
    perm.insert(perm.end(), axes.begin(), axes.end());
    std::vector<int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) inverse[static_cast<std::size_t>(perm[i])] = static_cast<int64_t>(i);
    Output shape = c.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}});
    auto product_of = [&](const std::vector<int64_t>& dims) {
      Output picked = c.Op("Gather", {shape, c.b().Const(Tensor::FromVector<int64_t>(dims))});
      return c.Op("Prod", {picked}, {{"axis", AttrValue(std::vector<int64_t>{0})}, {"keep_dims", AttrValue(true)}});
    };
    Output flat_shape = c.Op("Concat", {product_of(kept), product_of(axes)}, {{"axis", AttrValue(int64_t{0})}});
    Output transposed = c.Op("Transpose", {x}, {{"perm", AttrValue(perm)}});
    Output flat = c.Op("Reshape", {transposed, flat_shape});
    auto cumprod = [&](bool reverse) {
      return c.Op("Cumprod", {flat, c.b().Const(Tensor::Scalar<int64_t>(1))},
                  {{"exclusive", AttrValue(true)}, {"reverse", AttrValue(reverse)}});
    };
    Output others = c.Op("Mul", {cumprod(false), cumprod(true)});
    Output back = c.Op("Transpose",
                       {c.Op("Reshape", {others, c.Op("Shape", {transposed}, {{"out_type", AttrValue(DType::kI64)}})})},
                       {{"perm", AttrValue(inverse)}});
    Output g = Broadcast(c, KeepDims(c, c.grad(0), axes), x);
    dx[0] = c.Op("Mul", {g, back});
    return Status();
  });

  // --- Matrix products ---
  r.Register("MatMul",
             [](GradContext& c, Dx& dx) { return MatMulGrad(c, dx, "MatMul", "transpose_a", "transpose_b"); });
  r.Register("BatchMatMul", [](GradContext& c, Dx& dx) { return MatMulGrad(c, dx, "BatchMatMul", "adj_x", "adj_y"); });
}

}  // namespace weft::grad
