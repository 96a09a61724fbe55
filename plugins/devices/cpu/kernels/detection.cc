// Kernels of the object-detection ops (core/ops/detection_ops.cc):
// NonMaxSuppression, ONNX's (opset 11).
//
// The three threshold inputs are in host memory. Every check of the shape
// function is repeated here with its message, for shapes and values only
// known at run time. Each (batch, class) pair is independent: the pairs run
// in parallel, each sorting its candidates (score descending, then box
// index ascending, NaN scores last: a total order, so the result does not
// depend on the sort or the thread count) and selecting greedily; the rows
// are then written in the order of the pairs. The overlap test is ONNX
// Runtime's (SuppressByIOU), in f32, on extents computed once per box.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// |v| as the shape function writes it (shortest round trip).
std::string FloatText(float v) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

// --- Inputs -----------------------------------------------------------------------------

// Checks boxes [num_batches, spatial_dimension, 4] against scores
// [num_batches, num_classes, spatial_dimension].
void CheckBoxesAndScores(const Tensor& boxes, const Tensor& scores) {
  if (boxes.rank() != 3 || boxes.dim(2) != 4) {
    Fail("boxes must have shape [num_batches, spatial_dimension, 4], got shape ", DimsString(boxes.dims));
  }
  if (scores.rank() != 3) {
    Fail("scores must have shape [num_batches, num_classes, spatial_dimension], got shape ", DimsString(scores.dims));
  }
  if (boxes.dim(0) != scores.dim(0)) {
    Fail("boxes ", DimsString(boxes.dims), " has ", boxes.dim(0), " batches but scores ", DimsString(scores.dims),
         " has ", scores.dim(0));
  }
  if (boxes.dim(1) != scores.dim(2)) {
    Fail("boxes ", DimsString(boxes.dims), " has ", boxes.dim(1), " boxes per batch but scores ",
         DimsString(scores.dims), " has ", scores.dim(2));
  }
}

// The value of input |i| (named |what|), a scalar or of shape [1]; with
// |may_be_empty|, shape [0] is accepted too and gives false.
template <class T>
bool ReadOne(Context& ctx, int i, const char* what, bool may_be_empty, T* out) {
  const Tensor t = ctx.input(i);
  const bool one = t.rank() == 0 || (t.rank() == 1 && t.dim(0) == 1);
  if (one) {
    *out = t.as<T>()[0];
    return true;
  }
  if (may_be_empty && t.rank() == 1 && t.dim(0) == 0) return false;
  if (may_be_empty) {
    Fail(what, " must be a scalar, have shape [1], or be empty (shape [0]: no threshold), got shape ",
         DimsString(t.dims));
  }
  Fail(what, " must be a scalar or have shape [1], got shape ", DimsString(t.dims));
}

// What a selection is bounded by.
struct Limits {
  int64_t max_per_class = 0;
  float iou = 0;
  bool has_score = false;
  float score = 0;
};

Limits ReadLimits(Context& ctx) {
  Limits l;
  ReadOne<int64_t>(ctx, 2, "max_output_boxes_per_class", false, &l.max_per_class);
  ReadOne<float>(ctx, 3, "iou_threshold", false, &l.iou);
  l.has_score = ReadOne<float>(ctx, 4, "score_threshold", true, &l.score);
  if (!(l.iou >= 0 && l.iou <= 1)) Fail("iou_threshold must be in [0, 1], got ", FloatText(l.iou));
  return l;
}

// --- Overlap ----------------------------------------------------------------------------

// A box's extent and area, as ONNX Runtime derives them from its numbers.
struct Extent {
  float x_min = 0, x_max = 0, y_min = 0, y_max = 0, area = 0;
};

// (b, a) when a >= b, else (a, b): ONNX Runtime's MaxMin.
void MinMax(float a, float b, float& lo, float& hi) {
  lo = a >= b ? b : a;
  hi = a >= b ? a : b;
}

Extent ExtentOf(const float* box, bool centered) {
  Extent e;
  if (centered) {  // [x_center, y_center, width, height]
    const float half_width = box[2] / 2, half_height = box[3] / 2;
    e.x_min = box[0] - half_width;
    e.x_max = box[0] + half_width;
    e.y_min = box[1] - half_height;
    e.y_max = box[1] + half_height;
  } else {  // [y1, x1, y2, x2]
    MinMax(box[1], box[3], e.x_min, e.x_max);
    MinMax(box[0], box[2], e.y_min, e.y_max);
  }
  e.area = (e.x_max - e.x_min) * (e.y_max - e.y_min);
  return e;
}

// Whether |selected| suppresses |candidate|: their IoU is greater than
// |threshold|. ONNX Runtime's SuppressByIOU, step by step (so NaN and
// degenerate boxes come out as they do there: never suppressed).
bool Suppresses(const Extent& candidate, const Extent& selected, float threshold) {
  const float x_min = std::max(candidate.x_min, selected.x_min);
  const float x_max = std::min(candidate.x_max, selected.x_max);
  if (x_max <= x_min) return false;
  const float y_min = std::max(candidate.y_min, selected.y_min);
  const float y_max = std::min(candidate.y_max, selected.y_max);
  if (y_max <= y_min) return false;
  const float intersection = (x_max - x_min) * (y_max - y_min);
  if (intersection <= 0) return false;
  const float union_area = candidate.area + selected.area - intersection;
  if (candidate.area <= 0 || selected.area <= 0 || union_area <= 0) return false;
  return intersection / union_area > threshold;
}

// --- Selection --------------------------------------------------------------------------

// The boxes of one batch and class selected, in order of selection, from
// |n| boxes with |scores| and |extents|.
std::vector<int64_t> SelectBoxes(const float* scores, const Extent* extents, int64_t n, const Limits& l) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < n; ++i) {
    if (!l.has_score || scores[i] > l.score) order.push_back(i);
  }
  // Score descending, NaN after every number, then box index ascending.
  std::sort(order.begin(), order.end(), [scores](int64_t a, int64_t b) {
    const float sa = scores[a], sb = scores[b];
    if (sa > sb) return true;
    if (sa < sb) return false;
    const bool nan_a = std::isnan(sa), nan_b = std::isnan(sb);
    if (nan_a != nan_b) return nan_b;
    return a < b;
  });
  std::vector<int64_t> selected;
  for (int64_t i : order) {
    if (static_cast<int64_t>(selected.size()) >= l.max_per_class) break;
    bool keep = true;
    for (std::size_t k = 0; k < selected.size() && keep; ++k) {
      keep = !Suppresses(extents[i], extents[selected[k]], l.iou);
    }
    if (keep) selected.push_back(i);
  }
  return selected;
}

class NonMaxSuppressionKernel {
 public:
  explicit NonMaxSuppressionKernel(const InitContext& init) : centered_(init.Int("center_point_box") == 1) {
    const int64_t center = init.Int("center_point_box");
    if (center != 0 && center != 1) Fail("center_point_box must be 0 or 1, got ", center);
  }

  void Compute(Context& ctx) {
    const Tensor boxes = ctx.input(0), scores = ctx.input(1);
    CheckBoxesAndScores(boxes, scores);
    const Limits l = ReadLimits(ctx);
    if (l.max_per_class <= 0 || scores.num_elements == 0) {
      // Nothing to select (the dimensions' product may not even be
      // countable when one of them is 0).
      ctx.allocate_output(0, {0, 3});
      return;
    }
    const std::vector<std::vector<int64_t>> picked = Select(boxes, scores, l);
    int64_t total = 0;
    for (const std::vector<int64_t>& v : picked) total += static_cast<int64_t>(v.size());
    Tensor out = ctx.allocate_output(0, {total, 3});
    int64_t* o = out.as<int64_t>();
    const int64_t classes = scores.dim(1);
    for (std::size_t p = 0; p < picked.size(); ++p) {
      for (int64_t box : picked[p]) {
        *o++ = static_cast<int64_t>(p) / classes;
        *o++ = static_cast<int64_t>(p) % classes;
        *o++ = box;
      }
    }
  }

 private:
  // The boxes selected for each (batch, class) pair, for inputs with
  // elements.
  std::vector<std::vector<int64_t>> Select(const Tensor& boxes, const Tensor& scores, const Limits& l) const {
    const int64_t batches = boxes.dim(0), n = boxes.dim(1), classes = scores.dim(1);
    std::vector<Extent> extents(ToSize(batches * n));
    const float* b = boxes.as<float>();
    const bool centered = centered_;
    ParallelFor(batches * n, 4, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) extents[ToSize(i)] = ExtentOf(b + 4 * i, centered);
    });
    std::vector<std::vector<int64_t>> picked(ToSize(batches * classes));
    const float* s = scores.as<float>();
    ParallelFor(batches * classes, 32 * n, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        picked[ToSize(p)] = SelectBoxes(s + p * n, extents.data() + (p / classes) * n, n, l);
      }
    });
    return picked;
  }

  const bool centered_;
};

}  // namespace

// --- Registration -----------------------------------------------------------------------

void RegisterDetectionKernels(KernelRegistry& r) {
  AddKernel<"NonMaxSuppression", NonMaxSuppressionKernel>(
      r, {}, 0, {"max_output_boxes_per_class", "iou_threshold", "score_threshold"});
}

}  // namespace weft::cpu
