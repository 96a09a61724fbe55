// NumPy broadcasting for the CPU kernels: output shapes, and a loop over
// the output that hands each operand's offset and step to the innermost
// run, with adjacent dimensions of equal broadcast pattern collapsed so the
// common cases (same shape, scalar operand, bias over rows) are one or two
// flat loops.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_BROADCAST_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_BROADCAST_H_

#include <array>
#include <cstdint>

#include "../kernel_framework.h"

namespace weft::cpu {

// The broadcast of |a| and |b|; throws when they do not broadcast.
Dims BroadcastDims(const Dims& a, const Dims& b);

template <std::size_t N>
struct BroadcastPlan {
  Dims out;                                  // collapsed output dims
  std::array<std::vector<int64_t>, N> strides;  // element strides per operand (0 = broadcast)
  int64_t total = 1;
};

// Plans a loop over |out| reading operands of |ins| dims.
template <std::size_t N>
BroadcastPlan<N> PlanBroadcast(const Dims& out, const std::array<Dims, N>& ins) {
  const std::size_t rank = out.size();
  // Per operand, per output dim: the stride, 0 where broadcast.
  std::array<std::vector<int64_t>, N> full;
  for (std::size_t k = 0; k < N; ++k) {
    full[k].assign(rank, 0);
    const Dims& in = ins[k];
    int64_t stride = 1;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::size_t d = in.size() - 1 - i;
      const std::size_t o = rank - 1 - i;
      full[k][o] = in[d] == 1 && out[o] != 1 ? 0 : stride;
      stride *= in[d];
    }
  }
  BroadcastPlan<N> plan;
  for (std::size_t k = 0; k < N; ++k) plan.strides[k].clear();
  for (std::size_t o = 0; o < rank; ++o) {
    if (out[o] == 1) continue;  // contributes nothing
    bool merge = !plan.out.empty();
    for (std::size_t k = 0; k < N && merge; ++k) {
      // Mergeable with the previous kept dim when each operand's stride there
      // equals this stride times this extent (or both are broadcast).
      const int64_t prev = plan.strides[k].back();
      const int64_t cur = full[k][o];
      merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * out[o]);
    }
    if (merge) {
      plan.out.back() *= out[o];
      for (std::size_t k = 0; k < N; ++k) plan.strides[k].back() = full[k][o];
    } else {
      plan.out.push_back(out[o]);
      for (std::size_t k = 0; k < N; ++k) plan.strides[k].push_back(full[k][o]);
    }
  }
  if (plan.out.empty()) {
    plan.out.push_back(1);
    for (std::size_t k = 0; k < N; ++k) plan.strides[k].push_back(0);
  }
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
