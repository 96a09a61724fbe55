// NumPy broadcasting for the CPU kernels: output shapes, and a loop over
// the output that hands each operand's offset and step to the innermost
// run, with adjacent dimensions of equal broadcast pattern collapsed so the
// common cases (same shape, scalar operand, bias over rows) are one or two
// flat loops.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_BROADCAST_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_BROADCAST_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "../kernel_framework.h"

namespace weft::cpu {

// The broadcast of |a| and |b|; throws when they do not broadcast.
using sdk::BroadcastDims;

template <std::size_t N>
struct BroadcastPlan {
  Dims out;                                     // collapsed output dims
  std::array<std::vector<int64_t>, N> strides;  // element strides per operand (0 = broadcast)
  int64_t total = 1;
};

// Plans a loop over |out| reading operands of |ins| dims (the SDK's
// PlanBroadcast, in arrays).
template <std::size_t N>
BroadcastPlan<N> PlanBroadcast(const Dims& out, const std::array<Dims, N>& ins) {
  std::vector<const Dims*> operands;
  for (const Dims& in : ins) operands.push_back(&in);
  sdk::BroadcastLayout layout = sdk::PlanBroadcast(out, operands);
  BroadcastPlan<N> plan;
  plan.out = std::move(layout.dims);
  for (std::size_t k = 0; k < N; ++k) plan.strides[k] = std::move(layout.strides[k]);
  for (int64_t d : plan.out) plan.total *= d;
  return plan;
}

// Calls fn(out_offset, in_offsets, count, in_steps) for every run of the
// innermost (collapsed) dimension, in parallel over runs.
template <std::size_t N, class F>
void ForEachRun(const BroadcastPlan<N>& plan, int64_t cost_per_element, F&& fn) {
  const int64_t inner = plan.out.back();
  const int64_t runs = plan.total / inner;
  const int outer_rank = static_cast<int>(plan.out.size()) - 1;
  std::array<int64_t, N> steps;
  for (std::size_t k = 0; k < N; ++k) steps[k] = plan.strides[k].back();
  ParallelFor(runs, inner * cost_per_element, [&](int64_t begin, int64_t end) {
    for (int64_t run = begin; run < end; ++run) {
      std::array<int64_t, N> offsets{};
      int64_t rest = run;
      for (int d = outer_rank - 1; d >= 0; --d) {
        const int64_t extent = plan.out[static_cast<std::size_t>(d)];
        const int64_t index = rest % extent;
        rest /= extent;
        for (std::size_t k = 0; k < N; ++k) offsets[k] += index * plan.strides[k][static_cast<std::size_t>(d)];
      }
      fn(run * inner, offsets, inner, steps);
    }
  });
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_BROADCAST_H_
