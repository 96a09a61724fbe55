"""NonMaxSuppression (ONNX's): boxes and scores made of the f32 edge values
(NaN, +-inf, +-0, subnormals, the largest finite), in both box formats, with
and without a score threshold (an edge value too), the extreme counts of
max_output_boxes_per_class, and empty batches, classes and boxes, against
the conformance suite's reference (cases/detection.py). NaN scores sort
after every number and fail every threshold; a box whose IoU is NaN (a NaN
or an infinite coordinate) suppresses nothing."""
import numpy as np

from cases.detection import nms_ref

from .values import INF, NAN, edges, tiled

F32 = np.float32
I64_MIN, I64_MAX = -2 ** 63, 2 ** 63 - 1


def gen_detection(edge, op, binding):
    e = edges("f32")
    n = len(e)
    # Every edge value as every coordinate (the list shifted per column), and
    # as a score of every class.
    boxes = F32([[tiled("f32", 4 * n)[4 * i:4 * i + 4] for i in range(n)]])
    boxes[0, :, 2] = np.roll(boxes[0, :, 2], 3)
    scores = F32([[e, e[::-1], tiled("f32", n + 5)[5:]]])
    # A crowd of ordinary boxes among them, so that some do suppress.
    crowd = F32([[0, 0, 1, 1], [0, 0.5, 1, 1.5], [0.25, 0, 1.25, 1], [1, 1, 0, 0], [3, 3, 3, 3]])
    mixed = np.concatenate([boxes, crowd[None]], axis=1)
    mixed_scores = np.concatenate([scores, F32([[[0.5, 0.5, -0.0, 0.0, NAN]] * 3])], axis=2)

    def add(layout, b, s, max_out, iou, score=None, center=0, shape=(1,)):
        score_input = np.zeros((0,), F32) if score is None else np.array(score, F32).reshape(shape)
        inputs = [b, s, np.array(max_out, np.int64).reshape(shape), np.array(iou, F32).reshape(shape), score_input]
        want = nms_ref(b, s, max_out, iou, score, center)
        edge.add(op, binding, layout, inputs, [want], {"center_point_box": center})

    for center in (0, 1):
        for iou in (0.0, 0.5, 1.0):
            add(f"edges_center{center}_iou{iou}", boxes, scores, I64_MAX, iou, center=center)
            add(f"mixed_center{center}_iou{iou}", mixed, mixed_scores, I64_MAX, iou, center=center)
        for score in (NAN, -INF, 0.0, INF, e[5]):
            add(f"threshold_{score}_center{center}", mixed, mixed_scores, 4, 0.5, score, center, shape=())
    for max_out in (I64_MIN, -1, 0, 1):
        add(f"max_{max_out}", mixed, mixed_scores, max_out, 0.5)
    add("no_boxes", np.zeros((2, 0, 4), F32), np.zeros((2, 3, 0), F32), I64_MAX, 0.5)
    add("no_classes", boxes, np.zeros((1, 0, n), F32), I64_MAX, 0.5)
    add("no_batches", np.zeros((0, n, 4), F32), np.zeros((0, 3, n), F32), I64_MAX, 0.5, 0.0)
    add("one_box", boxes[:, :1], scores[:, :, :1], I64_MAX, 0.0, None, 1)
    edge.add(op, binding, "iou_nan", [boxes, scores, np.int64([1]), F32([NAN]), F32([0])],
             error="iou_threshold must be in [0, 1], got nan")
    edge.add(op, binding, "boxes_differ", [boxes, scores[:, :, 1:], np.int64([1]), F32([0.5]), F32([0])],
             error=f"boxes [1,{n},4] has {n} boxes per batch but scores [1,3,{n - 1}] has {n - 1}")
