// In-place variable updates, built once per element type T: AssignAdd and
// AssignSub (integers wrap), and the fused optimizer updates for floats.
//
// The arithmetic is done in T in the order of the CPU kernels (and of
// PyTorch's); the scalar factors computed in double (Adam's bias
// corrections) come from the host, rounded to T.
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

__kernel void assign_update(__global T* var, __global const T* delta, const ulong n, const int subtract) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
#if defined(WEFT_INT)
  var[i] = subtract ? AS_T((UT)var[i] - (UT)delta[i]) : AS_T((UT)var[i] + (UT)delta[i]);
#else
  var[i] = subtract ? var[i] - delta[i] : var[i] + delta[i];
#endif
}

#if defined(WEFT_FLOAT)

__kernel void apply_gradient_descent(__global T* var, __global const T* g, const T lr, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  var[i] = var[i] - lr * g[i];
}

__kernel void apply_momentum(__global T* var, __global T* accum, __global const T* g, const T lr, const T momentum,
                             const int nesterov, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  accum[i] = momentum * accum[i] + g[i];
  if (nesterov) {
    var[i] = var[i] - lr * (g[i] + momentum * accum[i]);
  } else {
    var[i] = var[i] - lr * accum[i];
  }
}

// Adam, and AdamW with |decay| = 1 - lr * weight_decay (1 for Adam).
__kernel void apply_adam(__global T* var, __global T* m, __global T* v, __global const T* g, const T step_size,
                         const T bc2_sqrt, const T beta1, const T beta2, const T one_minus_beta1,
                         const T one_minus_beta2, const T epsilon, const T decay, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  var[i] = var[i] * decay;
  m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
  v[i] = beta2 * v[i] + one_minus_beta2 * g[i] * g[i];
  const T denom = sqrt(v[i]) / bc2_sqrt + epsilon;
  var[i] = var[i] - step_size * m[i] / denom;
}

// RMSprop; centered also averages the gradient in mg (NULL otherwise).
__kernel void apply_rmsprop(__global T* var, __global T* mg, __global T* ms, __global T* mom, __global const T* g,
                            const T lr, const T rho, const T one_minus_rho, const T momentum, const T epsilon,
                            const int centered, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  if (centered) mg[i] = rho * mg[i] + one_minus_rho * g[i];
  ms[i] = rho * ms[i] + one_minus_rho * g[i] * g[i];
  const T avg = sqrt(centered ? ms[i] - mg[i] * mg[i] : ms[i]) + epsilon;
  mom[i] = momentum * mom[i] + g[i] / avg;
  var[i] = var[i] - lr * mom[i];
}

__kernel void apply_adagrad(__global T* var, __global T* accum, __global const T* g, const T lr, const T epsilon,
                            const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  accum[i] = accum[i] + g[i] * g[i];
  var[i] = var[i] - lr * g[i] / (sqrt(accum[i]) + epsilon);
}

#endif  // WEFT_FLOAT
