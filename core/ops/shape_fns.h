// Shape functions shared by many ops, and helpers for writing new ones.
#ifndef WEFT_CORE_OPS_SHAPE_FNS_H_
#define WEFT_CORE_OPS_SHAPE_FNS_H_

#include <vector>

#include "core/graph/shape_inference.h"

namespace weft::ops {

// Output 0 has input 0's shape.
Status UnchangedShape(InferenceContext& c);
// Every output is a scalar.
Status ScalarShape(InferenceContext& c);
// No outputs (or nothing to say about them).
Status NoOutputShape(InferenceContext& c);
// Output 0 is the NumPy broadcast of all inputs.
Status BroadcastShape(InferenceContext& c);

// The NumPy broadcast of two (partial) shapes, or an error naming both.
Expected<Shape> Broadcast(const Shape& a, const Shape& b);

// |axis| in [-rank, rank) made non-negative, or an error naming it.
Expected<int> NormalizeAxis(int64_t axis, int rank, std::string_view what = "axis");

// The reduction axes of attr "axis" (empty = every axis), normalised,
// rejecting repeats.
Expected<std::vector<int>> ReductionAxes(const std::vector<int64_t>& axis, int rank);

// The values of a constant 1-D integer input, or nullopt when unknown.
std::optional<std::vector<int64_t>> ConstIntVector(const InferenceContext& c, int input);

}  // namespace weft::ops

#endif  // WEFT_CORE_OPS_SHAPE_FNS_H_
