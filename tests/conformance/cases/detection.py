"""NonMaxSuppression: ONNX's (opset 11).

The reference (nms_ref) is a plain greedy loop written from ONNX's
definition: for each batch and class, the boxes whose score is greater than
score_threshold (all of them without one) in decreasing order of score
(equal scores: the lower box index first; NaN scores after every number),
each selected unless its IoU with a box already selected for that class is
greater than iou_threshold, until max_output_boxes_per_class are selected.
The IoU is computed step by step in float32 as ONNX's reference and ONNX
Runtime compute it (SuppressByIOU), so boxes that do not overlap, or have
no area, never suppress each other. It reproduces the outputs of ONNX's
NonMaxSuppression node tests (test_nonmaxsuppression_*, 9 of them)
exactly; the first cases here are those tests' inputs.
"""
import math

import numpy as np

from .array import rng

F32 = np.float32


# --- the reference -------------------------------------------------------------------


def min_max(a, b):
    """(b, a) when a >= b, else (a, b)."""
    return (b, a) if a >= b else (a, b)


def larger(a, b):
    return b if a < b else a


def smaller(a, b):
    return b if b < a else a


def extent(box, centered):
    """(x_min, x_max, y_min, y_max, area) of one box, in float32."""
    b = [F32(v) for v in box]
    if centered:  # [x_center, y_center, width, height]
        half_w, half_h = b[2] / F32(2), b[3] / F32(2)
        x0, x1, y0, y1 = b[0] - half_w, b[0] + half_w, b[1] - half_h, b[1] + half_h
    else:  # [y1, x1, y2, x2], any two opposite corners
        (x0, x1), (y0, y1) = min_max(b[1], b[3]), min_max(b[0], b[2])
    return x0, x1, y0, y1, (x1 - x0) * (y1 - y0)


def suppresses(cand, sel, iou):
    """Whether the selected box |sel| suppresses the candidate |cand|."""
    x0, x1 = larger(cand[0], sel[0]), smaller(cand[1], sel[1])
    if x1 <= x0:
        return False
    y0, y1 = larger(cand[2], sel[2]), smaller(cand[3], sel[3])
    if y1 <= y0:
        return False
    inter = (x1 - x0) * (y1 - y0)
    if inter <= 0:
        return False
    union = cand[4] + sel[4] - inter
    if cand[4] <= 0 or sel[4] <= 0 or union <= 0:
        return False
    return bool(inter / union > F32(iou))


def score_order(scores, i):
    s = float(scores[i])
    return (1, 0.0, i) if math.isnan(s) else (0, -s, i)


def nms_ref(boxes, scores, max_out, iou, score=None, center_point_box=0):
    """selected_indices, int64 [n, 3]. |score| None: no score threshold."""
    rows = []
    with np.errstate(all="ignore"):
        for b in range(boxes.shape[0]):
            ext = [extent(box, center_point_box == 1) for box in boxes[b]]
            for c in range(scores.shape[1]):
                s = scores[b, c]
                cand = [i for i in range(len(s)) if score is None or s[i] > F32(score)]
                cand.sort(key=lambda i: score_order(s, i))
                chosen = []
                for i in cand:
                    if len(chosen) >= max_out:
                        break
                    if not any(suppresses(ext[i], ext[k], iou) for k in chosen):
                        chosen.append(i)
                rows += [[b, c, i] for i in chosen]
    return np.array(rows, np.int64).reshape(-1, 3)


# --- cases ---------------------------------------------------------------------------


def one(v, dtype, shape=(1,)):
    """A threshold input: shape (1,) as ONNX's tests give them, or () for a scalar."""
    return np.array(v, dtype).reshape(shape)


def add(g, name, boxes, scores, max_out, iou, score=None, center_point_box=0, shape=(1,), want=None):
    """One case; |score| None feeds an empty score_threshold (no threshold).
    |want|, when given, must be the reference's result too."""
    boxes, scores = np.asarray(boxes, F32), np.asarray(scores, F32)
    ref = nms_ref(boxes, scores, max_out, iou, score, center_point_box)
    if want is not None:
        assert np.array_equal(ref, np.array(want, np.int64).reshape(-1, 3)), (name, ref, want)
    score_input = np.zeros((0,), F32) if score is None else one(score, F32, shape)
    inputs = [boxes, scores, one(max_out, np.int64, shape), one(iou, F32, shape), score_input]
    attrs = {"center_point_box": center_point_box} if center_point_box else {}
    g.add(f"NonMaxSuppression/{name}", "NonMaxSuppression", inputs, attrs, [ref])


# ONNX's test boxes: two clusters of three overlapping boxes and one alone.
BOXES = [[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9], [0.0, 10.0, 1.0, 11.0],
         [0.0, 10.1, 1.0, 11.1], [0.0, 100.0, 1.0, 101.0]]
SCORES = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3]


def onnx_cases(g):
    """The inputs of ONNX's node tests, with their expected outputs."""
    add(g, "onnx_suppress_by_IOU", [BOXES], [[SCORES]], 3, 0.5, 0.0, want=[[0, 0, 3], [0, 0, 0], [0, 0, 5]])
    add(g, "onnx_suppress_by_IOU_and_scores", [BOXES], [[SCORES]], 3, 0.5, 0.4, want=[[0, 0, 3], [0, 0, 0]])
    flipped = [[1.0, 1.0, 0.0, 0.0], [0.0, 0.1, 1.0, 1.1], [0.0, 0.9, 1.0, -0.1], [0.0, 10.0, 1.0, 11.0],
               [1.0, 10.1, 0.0, 11.1], [1.0, 101.0, 0.0, 100.0]]
    add(g, "onnx_flipped_coordinates", [flipped], [[SCORES]], 3, 0.5, 0.0, want=[[0, 0, 3], [0, 0, 0], [0, 0, 5]])
    add(g, "onnx_identical_boxes", [[[0.0, 0.0, 1.0, 1.0]] * 10], [[[0.9] * 10]], 3, 0.5, 0.0, want=[[0, 0, 0]])
    add(g, "onnx_limit_output_size", [BOXES], [[SCORES]], 2, 0.5, 0.0, want=[[0, 0, 3], [0, 0, 0]])
    add(g, "onnx_single_box", [[[0.0, 0.0, 1.0, 1.0]]], [[[0.9]]], 3, 0.5, 0.0, want=[[0, 0, 0]])
    add(g, "onnx_two_batches", [BOXES, BOXES], [[SCORES], [SCORES]], 2, 0.5, 0.0,
        want=[[0, 0, 3], [0, 0, 0], [1, 0, 3], [1, 0, 0]])
    add(g, "onnx_two_classes", [BOXES], [[SCORES, SCORES]], 2, 0.5, 0.0,
        want=[[0, 0, 3], [0, 0, 0], [0, 1, 3], [0, 1, 0]])
    centered = [[0.5, 0.5, 1.0, 1.0], [0.5, 0.6, 1.0, 1.0], [0.5, 0.4, 1.0, 1.0], [0.5, 10.5, 1.0, 1.0],
                [0.5, 10.6, 1.0, 1.0], [0.5, 100.5, 1.0, 1.0]]
    add(g, "onnx_center_point_box_format", [centered], [[SCORES]], 3, 0.5, 0.0, center_point_box=1,
        want=[[0, 0, 3], [0, 0, 0], [0, 0, 5]])


def random_boxes(r, batches, n, centered, spread=10.0):
    """Boxes of random corners (in any order) or centres and sizes, crowded
    enough to overlap often."""
    if centered:
        centre = r.uniform(0, spread, (batches, n, 2))
        size = r.uniform(0.5, 4, (batches, n, 2))
        return np.concatenate([centre, size], axis=2).astype(F32)
    return r.uniform(0, spread, (batches, n, 4)).astype(F32)


def random_cases(g, r):
    for centered in (0, 1):
        for iou in (0.0, 0.3, 0.5, 0.9, 1.0):
            boxes = random_boxes(r, 2, 40, centered)
            scores = r.uniform(0, 1, (2, 3, 40)).astype(F32)
            add(g, f"random_center{centered}_iou{iou}", boxes, scores, 10, iou, 0.2, centered)
            add(g, f"random_center{centered}_iou{iou}_no_threshold", boxes, scores, 1000, iou, None, centered)
    boxes = random_boxes(r, 1, 30, 0)
    scores = r.uniform(-1, 1, (1, 2, 30)).astype(F32)
    add(g, "random_scalar_inputs", boxes, scores, 5, 0.4, -0.5, shape=())
    add(g, "random_negative_threshold", boxes, scores, 30, 0.4, -0.25)
    # Larger: 3 batches, 4 classes, 600 boxes.
    boxes = random_boxes(r, 3, 600, 0, spread=40.0)
    scores = r.uniform(0, 1, (3, 4, 600)).astype(F32)
    add(g, "large", boxes, scores, 200, 0.5, 0.05)
    add(g, "large_centered", random_boxes(r, 3, 600, 1, spread=40.0), scores, 50, 0.3, 0.5, 1)


def tie_cases(g, r):
    # Equal scores: the lower box index is taken first, then suppresses the rest.
    boxes = [[[0, 0, 2, 2], [0, 0, 2, 2.1], [5, 5, 6, 6], [0, 0.1, 2, 2]]]
    add(g, "ties_lower_index_first", boxes, [[[0.5, 0.5, 0.5, 0.5]]], 4, 0.5, None, want=[[0, 0, 0], [0, 0, 2]])
    add(g, "ties_with_higher", boxes, [[[0.5, 0.7, 0.5, 0.5]]], 4, 0.5, None, want=[[0, 0, 1], [0, 0, 2]])
    # Rounded scores: many ties among 100 boxes.
    add(g, "ties_many", random_boxes(r, 1, 100, 0), np.round(r.uniform(0, 1, (1, 2, 100)), 1), 100, 0.3, None)
    # +0 and -0 are one score: index order.
    add(g, "ties_signed_zero", boxes, [[[-0.0, 0.0, -0.0, 0.0]]], 4, 0.5, None, want=[[0, 0, 0], [0, 0, 2]])


def threshold_cases(g):
    # A score equal to score_threshold is dropped (only greater ones take part).
    add(g, "score_equal_to_threshold_dropped", [BOXES], [[SCORES]], 6, 0.5, 0.75, want=[[0, 0, 3], [0, 0, 0]])
    add(g, "score_threshold_above_all", [BOXES], [[SCORES]], 6, 0.5, 0.99, want=[])
    add(g, "empty_score_threshold_keeps_all", [BOXES], [[SCORES]], 6, 1.0, None,
        want=[[0, 0, 3], [0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 0, 5]])
    # iou_threshold 0: any overlap at all suppresses; 1: nothing does.
    add(g, "iou_zero", [BOXES], [[SCORES]], 6, 0.0, None, want=[[0, 0, 3], [0, 0, 0], [0, 0, 5]])
    add(g, "iou_one_identical_boxes", [[[0.0, 0.0, 1.0, 1.0]] * 3], [[[0.9, 0.8, 0.7]]], 6, 1.0, None,
        want=[[0, 0, 0], [0, 0, 1], [0, 0, 2]])
    # IoU exactly at the threshold does not suppress: [0,0,1,2] and [0,0,1,1] overlap by 1/2.
    add(g, "iou_equal_to_threshold_kept", [[[0, 0, 1, 2], [0, 0, 1, 1]]], [[[0.9, 0.8]]], 2, 0.5, None,
        want=[[0, 0, 0], [0, 0, 1]])
    add(g, "iou_just_above_threshold", [[[0, 0, 1, 2], [0, 0, 1, 1]]], [[[0.9, 0.8]]], 2, 0.49, None,
        want=[[0, 0, 0]])
    # Touching boxes do not overlap.
    add(g, "touching", [[[0, 0, 1, 1], [0, 1, 1, 2], [1, 0, 2, 1]]], [[[0.9, 0.8, 0.7]]], 3, 0.0, None,
        want=[[0, 0, 0], [0, 0, 1], [0, 0, 2]])


def count_cases(g):
    add(g, "max_zero", [BOXES], [[SCORES]], 0, 0.5, 0.0, want=[])
    add(g, "max_negative", [BOXES], [[SCORES]], -3, 0.5, 0.0, want=[])
    add(g, "max_huge", [BOXES], [[SCORES]], 2 ** 63 - 1, 0.5, 0.0, want=[[0, 0, 3], [0, 0, 0], [0, 0, 5]])
    add(g, "max_one_per_class", [BOXES, BOXES], [[SCORES, SCORES[::-1]], [SCORES[::-1], SCORES]], 1, 0.5, 0.0,
        want=[[0, 0, 3], [0, 1, 2], [1, 0, 2], [1, 1, 3]])
    add(g, "no_boxes", np.zeros((2, 0, 4)), np.zeros((2, 3, 0)), 5, 0.5, 0.0, want=[])
    add(g, "no_classes", [BOXES], np.zeros((1, 0, 6)), 5, 0.5, 0.0, want=[])
    add(g, "no_batches", np.zeros((0, 6, 4)), np.zeros((0, 2, 6)), 5, 0.5, 0.0, want=[])
    add(g, "all_suppressed_but_one", [[[0, 0, 1, 1]] * 5], [[[0.1, 0.5, 0.3, 0.2, 0.4]]], 5, 0.1, None,
        want=[[0, 0, 1]])


def degenerate_cases(g):
    # Zero-area boxes (a point, a line) never suppress or get suppressed.
    boxes = [[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]]]
    add(g, "zero_area", boxes, [[[0.9, 0.8, 0.7, 0.6]]], 4, 0.0, None,
        want=[[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 3]])
    # Centred boxes of negative width or height overlap nothing.
    boxes = [[[0, 0, -1, 1], [0, 0, 1, 1], [0, 0, -1, -1], [0, 0, 1, 1]]]
    add(g, "negative_size_centered", boxes, [[[0.9, 0.8, 0.7, 0.6]]], 4, 0.0, None, center_point_box=1,
        want=[[0, 0, 0], [0, 0, 1], [0, 0, 2]])
    # NaN scores come after every number; with a threshold they are dropped.
    boxes = [[[0, 0, 1, 1], [0, 2, 1, 3], [0, 4, 1, 5], [0, 6, 1, 7]]]
    scores = [[[np.nan, 0.1, np.nan, -np.inf]]]
    add(g, "nan_scores_last", boxes, scores, 4, 0.5, None, want=[[0, 0, 1], [0, 0, 3], [0, 0, 0], [0, 0, 2]])
    add(g, "nan_scores_dropped", boxes, scores, 4, 0.5, -1.0, want=[[0, 0, 1]])
    # A NaN coordinate makes the IoU NaN: that box suppresses nothing.
    boxes = [[[0, 0, 1, 1], [0, 0, np.nan, 1], [0, 0, 1, 1]]]
    add(g, "nan_coordinate", boxes, [[[0.9, 0.8, 0.7]]], 3, 0.5, None, want=[[0, 0, 0], [0, 0, 1]])


def error_cases(g):
    b, s = np.asarray([BOXES], F32), np.asarray([[SCORES]], F32)

    def error(name, message, boxes=b, scores=s, max_out=one(3, np.int64), iou=one(0.5, F32),
              score=one(0.0, F32), **attrs):
        g.add(f"NonMaxSuppression/{name}", "NonMaxSuppression", [boxes, scores, max_out, iou, score], attrs,
              error=message)

    error("boxes_rank2", "boxes must have shape [num_batches, spatial_dimension, 4], got shape [6,4]", boxes=b[0])
    error("boxes_five_numbers", "boxes must have shape [num_batches, spatial_dimension, 4], got shape [1,6,5]",
          boxes=np.zeros((1, 6, 5), F32))
    error("scores_rank2", "scores must have shape [num_batches, num_classes, spatial_dimension], got shape [1,6]",
          scores=s[0])
    error("batches_differ", "boxes [1,6,4] has 1 batches but scores [2,1,6] has 2", scores=np.zeros((2, 1, 6), F32))
    error("boxes_differ", "boxes [1,6,4] has 6 boxes per batch but scores [1,1,5] has 5", scores=s[:, :, :5])
    error("max_two_values", "max_output_boxes_per_class must be a scalar or have shape [1], got shape [2]",
          max_out=np.int64([3, 3]))
    error("max_empty", "max_output_boxes_per_class must be a scalar or have shape [1], got shape [0]",
          max_out=np.zeros((0,), np.int64))
    error("iou_rank2", "iou_threshold must be a scalar or have shape [1], got shape [1,1]", iou=np.float32([[0.5]]))
    error("score_two_values", "score_threshold must be a scalar, have shape [1], or be empty (shape [0]: no "
          "threshold), got shape [2]", score=np.float32([0, 0]))
    error("iou_above_one", "iou_threshold must be in [0, 1], got 1.5", iou=one(1.5, F32))
    error("iou_negative", "iou_threshold must be in [0, 1], got -0.1", iou=one(-0.1, F32))
    error("iou_nan", "iou_threshold must be in [0, 1], got nan", iou=one(np.nan, F32))
    error("center_point_box_2", "center_point_box must be 0 or 1, got 2", center_point_box=2)


def cases(g):
    r = rng(51)
    onnx_cases(g)
    random_cases(g, r)
    tie_cases(g, r)
    threshold_cases(g)
    count_cases(g)
    degenerate_cases(g)
    error_cases(g)
