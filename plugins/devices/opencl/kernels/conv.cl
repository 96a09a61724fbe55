// Conv2D, its two gradients, MaxPool, AvgPool and theirs, built once per
// float type T: direct loops, one work-item per element of the result.
//
// The geometry comes as an int16, g: s0 batch, s1 in height, s2 in width,
// s3 in channels, s4 out height, s5 out width, s6 out channels, s7 window
// height, s8 window width, s9/sA strides, sB/sC dilations, sD/sE padding
// before (top, left), sF 1 for NCHW data (else NHWC). Filters are HWIO.
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// Element (n, h, w, c) of a [batch, height, width, channels] tensor.
inline ulong at(int16 g, int height, int width, int channels, int n, int h, int w, int c) {
  return g.sF ? (((ulong)n * channels + c) * height + h) * width + w
              : (((ulong)n * height + h) * width + w) * channels + c;
}
inline ulong in_at(int16 g, int n, int h, int w, int c) { return at(g, g.s1, g.s2, g.s3, n, h, w, c); }
inline ulong out_at(int16 g, int n, int h, int w, int c) { return at(g, g.s4, g.s5, g.s6, n, h, w, c); }

// (n, h, w, c) of element i of a tensor of that shape in g's layout.
inline int4 unflatten(int16 g, ulong i, int height, int width, int channels) {
  int4 r;
  if (g.sF) {
    r.z = (int)(i % width);
    i /= width;
    r.y = (int)(i % height);
    i /= height;
    r.w = (int)(i % channels);
    r.x = (int)(i / channels);
  } else {
    r.w = (int)(i % channels);
    i /= channels;
    r.z = (int)(i % width);
    i /= width;
    r.y = (int)(i % height);
    r.x = (int)(i / height);
  }
  return r;
}

inline ulong filter_at(int16 g, int kh, int kw, int ci, int co) {
  return (((ulong)kh * g.s8 + kw) * g.s3 + ci) * g.s6 + co;
}

__kernel void conv2d(__global const T* x, __global const T* f, __global T* y, const int16 g, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int4 o = unflatten(g, i, g.s4, g.s5, g.s6);
  T acc = 0;
  for (int kh = 0; kh < g.s7; ++kh) {
    const int ih = o.y * g.s9 - g.sD + kh * g.sB;
    if (ih < 0 || ih >= g.s1) continue;
    for (int kw = 0; kw < g.s8; ++kw) {
      const int iw = o.z * g.sA - g.sE + kw * g.sC;
      if (iw < 0 || iw >= g.s2) continue;
      for (int ci = 0; ci < g.s3; ++ci) acc += x[in_at(g, o.x, ih, iw, ci)] * f[filter_at(g, kh, kw, ci, o.w)];
    }
  }
  y[i] = acc;
}

// dx[n, ih, iw, ci]: every output position whose window reads it.
__kernel void conv2d_backprop_input(__global const T* f, __global const T* dy, __global T* dx, const int16 g,
                                    const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int4 p = unflatten(g, i, g.s1, g.s2, g.s3);
  T acc = 0;
  for (int kh = 0; kh < g.s7; ++kh) {
    const int th = p.y + g.sD - kh * g.sB;
    if (th < 0 || th % g.s9 != 0 || th / g.s9 >= g.s4) continue;
    const int oh = th / g.s9;
    for (int kw = 0; kw < g.s8; ++kw) {
      const int tw = p.z + g.sE - kw * g.sC;
      if (tw < 0 || tw % g.sA != 0 || tw / g.sA >= g.s5) continue;
      const int ow = tw / g.sA;
      for (int co = 0; co < g.s6; ++co) acc += dy[out_at(g, p.x, oh, ow, co)] * f[filter_at(g, kh, kw, p.w, co)];
    }
  }
  dx[i] = acc;
}

// df[kh, kw, ci, co]: over the batch and every output position.
__kernel void conv2d_backprop_filter(__global const T* x, __global const T* dy, __global T* df, const int16 g,
                                     const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int co = (int)(i % g.s6);
  const int ci = (int)((i / g.s6) % g.s3);
  const int kw = (int)((i / ((ulong)g.s6 * g.s3)) % g.s8);
  const int kh = (int)(i / ((ulong)g.s6 * g.s3 * g.s8));
  T acc = 0;
  for (int b = 0; b < g.s0; ++b) {
    for (int oh = 0; oh < g.s4; ++oh) {
      const int ih = oh * g.s9 - g.sD + kh * g.sB;
      if (ih < 0 || ih >= g.s1) continue;
      for (int ow = 0; ow < g.s5; ++ow) {
        const int iw = ow * g.sA - g.sE + kw * g.sC;
        if (iw < 0 || iw >= g.s2) continue;
        acc += x[in_at(g, b, ih, iw, ci)] * dy[out_at(g, b, oh, ow, co)];
      }
    }
  }
  df[i] = acc;
}

// The maximum (|want_max|) or the average of each window; padding takes no
// part, so an average divides by the window's elements inside the input.
__kernel void pool(__global const T* x, __global T* y, const int16 g, const ulong n, const int want_max) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int4 o = unflatten(g, i, g.s4, g.s5, g.s6);
  T acc = want_max ? -INFINITY : 0;
  int count = 0;
  for (int kh = 0; kh < g.s7; ++kh) {
    const int ih = o.y * g.s9 - g.sD + kh;
    if (ih < 0 || ih >= g.s1) continue;
    for (int kw = 0; kw < g.s8; ++kw) {
      const int iw = o.z * g.sA - g.sE + kw;
      if (iw < 0 || iw >= g.s2) continue;
      const T v = x[in_at(g, o.x, ih, iw, o.w)];
      if (want_max) {
        if (v > acc || isnan(v)) acc = v;  // NaN wins, as NumPy's max
      } else {
        acc += v;
      }
      ++count;
    }
  }
  y[i] = want_max ? acc : acc / (T)count;
}

// The range [*lo, *hi] of windows along one dimension that contain |p|.
inline void windows_over(int p, int pad, int window, int stride, int outs, int* lo, int* hi) {
  const int t = p + pad - window + 1;
  *lo = t <= 0 ? 0 : (t + stride - 1) / stride;
  *hi = min((p + pad) / stride, outs - 1);
}

// dx[n, ih, iw, c] of MaxPool: the gradient of every window whose maximum
// is this element, the first in row-major order that equals it.
__kernel void max_pool_grad(__global const T* x, __global const T* dy, __global T* dx, const int16 g,
                            const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int4 p = unflatten(g, i, g.s1, g.s2, g.s3);
  int oh_lo, oh_hi, ow_lo, ow_hi;
  windows_over(p.y, g.sD, g.s7, g.s9, g.s4, &oh_lo, &oh_hi);
  windows_over(p.z, g.sE, g.s8, g.sA, g.s5, &ow_lo, &ow_hi);
  T acc = 0;
  for (int oh = oh_lo; oh <= oh_hi; ++oh) {
    for (int ow = ow_lo; ow <= ow_hi; ++ow) {
      T best = 0;
      int bh = -1, bw = -1;
      for (int kh = 0; kh < g.s7; ++kh) {
        const int h = oh * g.s9 - g.sD + kh;
        if (h < 0 || h >= g.s1) continue;
        for (int kw = 0; kw < g.s8; ++kw) {
          const int w = ow * g.sA - g.sE + kw;
          if (w < 0 || w >= g.s2) continue;
          const T v = x[in_at(g, p.x, h, w, p.w)];
          if (bh < 0 || v > best) {
            best = v;
            bh = h;
            bw = w;
          }
        }
      }
      if (bh == p.y && bw == p.z) acc += dy[out_at(g, p.x, oh, ow, p.w)];
    }
  }
  dx[i] = acc;
}

// dx[n, ih, iw, c] of AvgPool: each window's gradient over its count.
__kernel void avg_pool_grad(__global const T* dy, __global T* dx, const int16 g, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int4 p = unflatten(g, i, g.s1, g.s2, g.s3);
  int oh_lo, oh_hi, ow_lo, ow_hi;
  windows_over(p.y, g.sD, g.s7, g.s9, g.s4, &oh_lo, &oh_hi);
  windows_over(p.z, g.sE, g.s8, g.sA, g.s5, &ow_lo, &ow_hi);
  T acc = 0;
  for (int oh = oh_lo; oh <= oh_hi; ++oh) {
    const int h0 = oh * g.s9 - g.sD;
    const int rows = min(h0 + g.s7, g.s1) - max(h0, 0);
    for (int ow = ow_lo; ow <= ow_hi; ++ow) {
      const int w0 = ow * g.sA - g.sE;
      const int cols = min(w0 + g.s8, g.s2) - max(w0, 0);
      acc += dy[out_at(g, p.x, oh, ow, p.w)] / (T)(rows * cols);
    }
  }
  dx[i] = acc;
}

// --- im2col: convolutions as matrix products (conv.cc) ---------------------------------
//
// The column matrix of an input has one row per output position (n, oh, ow)
// and one column per filter tap (kh, kw, c), HWIO order, so that
// col x filter (as [KH*KW*C, OC]) is the NHWC output.

__kernel void im2col(__global const T* x, __global T* col, const int16 g, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const ulong taps = (ulong)g.s7 * g.s8 * g.s3;
  const ulong row = i / taps, tap = i % taps;
  const int c = (int)(tap % g.s3);
  const int kw = (int)((tap / g.s3) % g.s8);
  const int kh = (int)(tap / ((ulong)g.s3 * g.s8));
  const int ow = (int)(row % g.s5);
  const int oh = (int)((row / g.s5) % g.s4);
  const int b = (int)(row / ((ulong)g.s5 * g.s4));
  const int ih = oh * g.s9 - g.sD + kh * g.sB;
  const int iw = ow * g.sA - g.sE + kw * g.sC;
  col[i] = (ih < 0 || ih >= g.s1 || iw < 0 || iw >= g.s2) ? (T)0 : x[in_at(g, b, ih, iw, c)];
}

// dx[n, ih, iw, c]: the sum of the column matrix's entries that read it.
__kernel void col2im(__global const T* col, __global T* dx, const int16 g, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const int4 p = unflatten(g, i, g.s1, g.s2, g.s3);
  const ulong taps = (ulong)g.s7 * g.s8 * g.s3;
  T acc = 0;
  for (int kh = 0; kh < g.s7; ++kh) {
    const int th = p.y + g.sD - kh * g.sB;
    if (th < 0 || th % g.s9 != 0 || th / g.s9 >= g.s4) continue;
    const int oh = th / g.s9;
    for (int kw = 0; kw < g.s8; ++kw) {
      const int tw = p.z + g.sE - kw * g.sC;
      if (tw < 0 || tw % g.sA != 0 || tw / g.sA >= g.s5) continue;
      const int ow = tw / g.sA;
      const ulong row = ((ulong)p.x * g.s4 + oh) * g.s5 + ow;
      acc += col[row * taps + ((ulong)kh * g.s8 + kw) * g.s3 + p.w];
    }
  }
  dx[i] = acc;
}
