// Object detection: NonMaxSuppression, ONNX's (opset 11), for the ONNX
// importer.
//
// The output's length is only known by running the op, so the shape
// function gives [?, 3]; it checks the inputs' shapes against one another,
// and the attr and the thresholds whose values it sees, with the messages
// of the CPU kernel (plugins/devices/cpu/kernels/detection.cc repeats
// every check).
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// Checks that input |i| (named |what|) is a scalar or has shape [1]; with
// |may_be_empty| shape [0] is accepted too.
Status CheckOneValue(InferenceContext& c, int i, const char* what, bool may_be_empty) {
  const Shape& s = c.input_shape(i);
  if (s.unknown_rank() || s.rank() == 0) return Status();
  if (s.rank() == 1 && (s.dim(0) < 0 || s.dim(0) == 1 || (may_be_empty && s.dim(0) == 0))) return Status();
  if (may_be_empty) {
    return c.Error(what, " must be a scalar, have shape [1], or be empty (shape [0]: no threshold), got shape ",
                   s.ToString());
  }
  return c.Error(what, " must be a scalar or have shape [1], got shape ", s.ToString());
}

// Checks boxes [num_batches, spatial_dimension, 4] against scores
// [num_batches, num_classes, spatial_dimension].
Status CheckBoxesAndScores(InferenceContext& c) {
  const Shape& boxes = c.input_shape(0);
  const Shape& scores = c.input_shape(1);
  if (!boxes.unknown_rank() && (boxes.rank() != 3 || (boxes.dim(2) >= 0 && boxes.dim(2) != 4))) {
    return c.Error("boxes must have shape [num_batches, spatial_dimension, 4], got shape ", boxes.ToString());
  }
  if (!scores.unknown_rank() && scores.rank() != 3) {
    return c.Error("scores must have shape [num_batches, num_classes, spatial_dimension], got shape ",
                   scores.ToString());
  }
  if (boxes.unknown_rank() || scores.unknown_rank()) return Status();
  if (boxes.dim(0) >= 0 && scores.dim(0) >= 0 && boxes.dim(0) != scores.dim(0)) {
    return c.Error("boxes ", boxes.ToString(), " has ", boxes.dim(0), " batches but scores ", scores.ToString(),
                   " has ", scores.dim(0));
  }
  if (boxes.dim(1) >= 0 && scores.dim(2) >= 0 && boxes.dim(1) != scores.dim(2)) {
    return c.Error("boxes ", boxes.ToString(), " has ", boxes.dim(1), " boxes per batch but scores ", scores.ToString(),
                   " has ", scores.dim(2));
  }
  return Status();
}

Status NonMaxSuppressionShape(InferenceContext& c) {
  const int64_t center = c.Int("center_point_box");
  if (center != 0 && center != 1) return c.Error("center_point_box must be 0 or 1, got ", center);
  WEFT_RETURN_IF_ERROR(CheckBoxesAndScores(c));
  WEFT_RETURN_IF_ERROR(CheckOneValue(c, 2, "max_output_boxes_per_class", false));
  WEFT_RETURN_IF_ERROR(CheckOneValue(c, 3, "iou_threshold", false));
  WEFT_RETURN_IF_ERROR(CheckOneValue(c, 4, "score_threshold", true));
  const Tensor* iou = c.input_value(3);
  if (iou != nullptr && iou->num_elements() == 1) {
    const float v = iou->data<float>()[0];
    if (!(v >= 0 && v <= 1)) return c.Error("iou_threshold must be in [0, 1], got ", v);
  }
  c.set_output(0, Shape{Shape::kUnknownDim, 3});
  return Status();
}

}  // namespace

Status RegisterDetectionOps(OpRegistry& r) {
  return r.Register(
      OpDefBuilder("NonMaxSuppression")
          .Input("boxes: f32")
          .Input("scores: f32")
          .Input("max_output_boxes_per_class: i64")
          .Input("iou_threshold: f32")
          .Input("score_threshold: f32")
          .Output("selected_indices: i64")
          .Attr("center_point_box: int = 0")
          .Shape(NonMaxSuppressionShape)
          .Doc("ONNX's NonMaxSuppression (opset 11). boxes is [num_batches, spatial_dimension, 4], scores "
               "[num_batches, num_classes, spatial_dimension]. For each batch and class, the boxes are taken in "
               "decreasing order of score (equal scores: the lower box index first; NaN scores after every "
               "number) and a box is selected unless its IoU with a box already selected for that class is "
               "greater than iou_threshold, until max_output_boxes_per_class are selected. Boxes whose score is "
               "not greater than score_threshold take no part; an empty score_threshold (shape [0]) means no "
               "threshold. max_output_boxes_per_class (0 or negative: none), iou_threshold (in [0, 1]) and "
               "score_threshold are scalars or have shape [1]. center_point_box 0 gives boxes as [y1, x1, y2, "
               "x2], any two opposite corners; 1 as [x_center, y_center, width, height]. IoU is computed in f32 "
               "as ONNX Runtime computes it: boxes that do not overlap, or of zero (or, centred, negative) width "
               "or height, never suppress each other. selected_indices holds one row [batch_index, class_index, "
               "box_index] per selected box, by batch, then class, then order of selection. Not "
               "differentiable."));
}

}  // namespace weft::ops
