// The fused LSTM cell: LSTMCell and LSTMCellGrad, for f32 and f64.
//
// Each is one or two matrix products through MatMul's path (gemm.h) plus
// one pass over [batch, 4 * hidden] for the gates, row by row in parallel.
// The forward op keeps concat(x, h_prev) in a temp so that the gate
// pre-activations are a single product with w; the backward op does the
// same for dw, and gets dx and dh_prev from one product dz @ w^T. db sums
// dz over the batch in double, in a fixed order.
#include <cmath>
#include <cstring>

#include "../kernel_framework.h"
#include "gemm.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

template <class T>
T Sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// Checks that |t| is [rows, cols]; |what| names it.
void ExpectDims(const Tensor& t, const char* what, int64_t rows, int64_t cols, const char* layout) {
  if (t.rank() != 2 || t.dim(0) != rows || t.dim(1) != cols) {
    Fail(what, " has shape ", DimsString(t.dims), ", expected ", layout, " = ", DimsString({rows, cols}));
  }
}

// The sizes of a cell from x [batch, input] and c_prev [batch, hidden],
// with every other input checked against them by the caller.
struct CellSizes {
  int64_t batch, input, hidden;
};

CellSizes SizesOf(const Tensor& x, const Tensor& c_prev) {
  if (x.rank() != 2) Fail("x must have rank 2 ([batch, input]), got ", DimsString(x.dims));
  if (c_prev.rank() != 2) Fail("c_prev must have rank 2 ([batch, hidden]), got ", DimsString(c_prev.dims));
  if (c_prev.dim(0) != x.dim(0)) {
    Fail("c_prev has shape ", DimsString(c_prev.dims), " but x has ", x.dim(0), " rows (the batch)");
  }
  return {x.dim(0), x.dim(1), c_prev.dim(1)};
}

// concat(x, h_prev) along axis 1 into |xh| ([batch, input + hidden]).
template <class T>
void ConcatRows(const T* x, const T* h_prev, T* xh, const CellSizes& s) {
  const int64_t width = s.input + s.hidden;
  ParallelFor(s.batch, width, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(xh + r * width, x + r * s.input, ToSize(s.input) * sizeof(T));
      std::memcpy(xh + r * width + s.input, h_prev + r * s.hidden, ToSize(s.hidden) * sizeof(T));
    }
  });
}

template <class T>
class LstmCellKernel {
 public:
  explicit LstmCellKernel(const InitContext& init) : forget_bias_(static_cast<T>(init.Float("forget_bias"))) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), c_prev = ctx.input(1), h_prev = ctx.input(2), w = ctx.input(3), b = ctx.input(4);
    const CellSizes s = SizesOf(x, c_prev);
    const int64_t hh = s.hidden, gates_width = 4 * hh;
    ExpectDims(h_prev, "h_prev", s.batch, hh, "[batch, hidden]");
    ExpectDims(w, "w", s.input + hh, gates_width, "[input + hidden, 4 * hidden]");
    if (b.rank() != 1 || b.dim(0) != gates_width) {
      Fail("b has shape ", DimsString(b.dims), ", expected [4 * hidden] = [", gates_width, "]");
    }
    Tensor c = ctx.allocate_output(0, {s.batch, hh});
    Tensor h = ctx.allocate_output(1, {s.batch, hh});
    Tensor gates = ctx.allocate_output(2, {s.batch, gates_width});
    if (s.batch == 0 || hh == 0) return;
    Tensor xh = ctx.allocate_temp(DtypeOf<T>(), {s.batch, s.input + hh});
    ConcatRows(x.as<T>(), h_prev.as<T>(), xh.as<T>(), s);
    // The pre-activations z go straight into gates, then are activated in
    // place.
    Gemm<T>(product_, xh.as<T>(), w.as<T>(), gates.as<T>(), s.batch, gates_width, s.input + hh, false, false);
    const T* bias = b.as<T>();
    const T* cp = c_prev.as<T>();
    T* z = gates.as<T>();
    T* co = c.as<T>();
    T* ho = h.as<T>();
    ParallelFor(s.batch, 40 * hh, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        T* zi = z + r * gates_width;
        T* zf = zi + hh;
        T* zg = zf + hh;
        T* zo = zg + hh;
        for (int64_t j = 0; j < hh; ++j) {
          const T i = Sigmoid(zi[j] + bias[j]);
          const T f = Sigmoid(zf[j] + bias[hh + j] + forget_bias_);
          const T g = std::tanh(zg[j] + bias[2 * hh + j]);
          const T o = Sigmoid(zo[j] + bias[3 * hh + j]);
          const T cn = f * cp[r * hh + j] + i * g;
          co[r * hh + j] = cn;
          ho[r * hh + j] = o * std::tanh(cn);
          zi[j] = i;
          zf[j] = f;
          zg[j] = g;
          zo[j] = o;
        }
      }
    });
  }

 private:
  T forget_bias_;
  GemmCache product_;
};

template <class T>
class LstmCellGradKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), c_prev = ctx.input(1), h_prev = ctx.input(2), w = ctx.input(3);
    const Tensor c = ctx.input(4), gates = ctx.input(5), dc = ctx.input(6), dh = ctx.input(7);
    const CellSizes s = SizesOf(x, c_prev);
    const int64_t hh = s.hidden, gates_width = 4 * hh, width = s.input + hh;
    ExpectDims(h_prev, "h_prev", s.batch, hh, "[batch, hidden]");
    ExpectDims(w, "w", width, gates_width, "[input + hidden, 4 * hidden]");
    ExpectDims(c, "c", s.batch, hh, "[batch, hidden]");
    ExpectDims(gates, "gates", s.batch, gates_width, "[batch, 4 * hidden]");
    ExpectDims(dc, "dc", s.batch, hh, "[batch, hidden]");
    ExpectDims(dh, "dh", s.batch, hh, "[batch, hidden]");
    Tensor dx = ctx.allocate_output(0, {s.batch, s.input});
    Tensor dc_prev = ctx.allocate_output(1, {s.batch, hh});
    Tensor dh_prev = ctx.allocate_output(2, {s.batch, hh});
    Tensor dw = ctx.allocate_output(3, {width, gates_width});
    Tensor db = ctx.allocate_output(4, {gates_width});
    Tensor dz = ctx.allocate_temp(DtypeOf<T>(), {s.batch, gates_width});
    const T* gt = gates.as<T>();
    const T* cp = c_prev.as<T>();
    const T* cn = c.as<T>();
    const T* dcv = dc.as<T>();
    const T* dhv = dh.as<T>();
    T* dzv = dz.as<T>();
    T* dcp = dc_prev.as<T>();
    ParallelFor(s.batch, 30 * hh, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* g4 = gt + r * gates_width;
        T* d4 = dzv + r * gates_width;
        for (int64_t j = 0; j < hh; ++j) {
          const int64_t e = r * hh + j;
          const T i = g4[j], f = g4[hh + j], g = g4[2 * hh + j], o = g4[3 * hh + j];
          const T tc = std::tanh(cn[e]);
          const T dct = dcv[e] + dhv[e] * o * (T(1) - tc * tc);
          d4[j] = dct * g * i * (T(1) - i);
          d4[hh + j] = dct * cp[e] * f * (T(1) - f);
          d4[2 * hh + j] = dct * i * (T(1) - g * g);
          d4[3 * hh + j] = dhv[e] * tc * o * (T(1) - o);
          dcp[e] = dct * f;
        }
      }
    });
    // concat(dx, dh_prev) = dz @ w^T, split by rows.
    Tensor dxh = ctx.allocate_temp(DtypeOf<T>(), {s.batch, width});
    Gemm<T>(to_inputs_, dzv, w.as<T>(), dxh.as<T>(), s.batch, width, gates_width, false, true);
    T* dxv = dx.as<T>();
    T* dhp = dh_prev.as<T>();
    const T* dxhv = dxh.as<T>();
    for (int64_t r = 0; r < s.batch; ++r) {
      std::memcpy(dxv + r * s.input, dxhv + r * width, ToSize(s.input) * sizeof(T));
      std::memcpy(dhp + r * hh, dxhv + r * width + s.input, ToSize(hh) * sizeof(T));
    }
    // dw = concat(x, h_prev)^T @ dz.
    Tensor xh = ctx.allocate_temp(DtypeOf<T>(), {s.batch, width});
    ConcatRows(x.as<T>(), h_prev.as<T>(), xh.as<T>(), s);
    Gemm<T>(to_weights_, xh.as<T>(), dzv, dw.as<T>(), width, gates_width, s.batch, true, false);
    const std::vector<double> sums =
        ChannelSums<double>(s.batch, gates_width, 1, [dzv](int64_t, int64_t k) { return static_cast<double>(dzv[k]); });
    T* dbv = db.as<T>();
    for (int64_t k = 0; k < gates_width; ++k) dbv[k] = static_cast<T>(sums[ToSize(k)]);
  }

 private:
  GemmCache to_inputs_, to_weights_;
};

}  // namespace

void RegisterRnnKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    AddKernel<"LSTMCell", LstmCellKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
    AddKernel<"LSTMCellGrad", LstmCellGradKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
  };
  add.template operator()<float>();
  add.template operator()<double>();
}

}  // namespace weft::cpu
