"""The edge-case generator's families (gen_edge_cases.py runs them; its
docstring says what they generate). FAMILIES maps an op to the function
that adds its cases for one dtype binding, EXEMPT an op without cases to the
reason. The modules expect tests/conformance/ on sys.path, for gen_cases and
the conformance suite's references in cases/.

  values.py       the edge values per dtype, their arrays and layouts, Edge
  elementwise.py  unary, binary, activation gradients
  reductions.py   reductions and scans
  movement.py     data movement, casts, the shape helpers of gradients
  indexing.py     gathers, scatters, segments, TopK, NonZero, ...
  nn.py           matrix products, windows, softmax, losses, normalisation, cells
  dynamic_shape.py  the ops with run-time shape inputs (ONNX's Slice, Pad, Tile, ...)
  resize.py       Resize (ONNX's, with run-time scales or sizes)
  detection.py    NonMaxSuppression (ONNX's)
  unique.py       OnnxUnique (ONNX's Unique)
  quantize.py     QuantizeLinear, DequantizeLinear
"""
from .detection import gen_detection
from .dynamic_shape import GEN as DYNAMIC_SHAPE, gen_dynamic_shape
from .elementwise import BINARY, COMPARE, GRADS, LOGICAL, PREDICATES, UNARY, gen_binary, gen_grad, gen_unary
from .indexing import gen_elements, gen_indexing
from .movement import gen_cast, gen_movement, gen_shape_helpers
from .nn import gen_addn, gen_bias, gen_clip, gen_lstm, gen_matmul, gen_norm, gen_range, gen_softmax, gen_window, \
    gen_xent
from .quantize import gen_quantize
from .reductions import gen_arg, gen_logical_reduce, gen_reduce, gen_scan
from .resize import gen_resize
from .unique import gen_unique
from .values import Edge, parse_binding

__all__ = ["EXEMPT", "FAMILIES", "Edge", "parse_binding"]


# --- the families ---------------------------------------------------------------------

FAMILIES = {}
for _op in list(UNARY) + list(PREDICATES) + ["LogicalNot", "Gelu"]:
    FAMILIES[_op] = gen_unary
for _op in list(BINARY) + list(COMPARE) + list(LOGICAL):
    FAMILIES[_op] = gen_binary
for _op in list(GRADS) + ["GeluGrad", "SoftplusGrad"]:
    FAMILIES[_op] = gen_grad
for _op in ("Sum", "Mean", "Prod", "Max", "Min"):
    FAMILIES[_op] = gen_reduce
FAMILIES.update({"ArgMax": gen_arg, "ArgMin": gen_arg, "All": gen_logical_reduce, "Any": gen_logical_reduce,
                 "Cumsum": gen_scan, "Cumprod": gen_scan, "Cast": gen_cast, "MatMul": gen_matmul,
                 "BatchMatMul": gen_matmul, "BiasAdd": gen_bias, "BiasAddGrad": gen_bias, "AddN": gen_addn,
                 "ClipByValue": gen_clip, "Range": gen_range, "Softmax": gen_softmax, "LogSoftmax": gen_softmax,
                 "SoftmaxCrossEntropyWithLogits": gen_xent, "SparseSoftmaxCrossEntropyWithLogits": gen_xent,
                 "FusedBatchNorm": gen_norm, "FusedBatchNormGrad": gen_norm, "LayerNorm": gen_norm,
                 "LayerNormGrad": gen_norm, "LSTMCell": gen_lstm, "LSTMCellGrad": gen_lstm,
                 "ConcatOffset": gen_shape_helpers, "SumToShape": gen_shape_helpers,
                 "StridedSliceGrad": gen_shape_helpers})
for _op in ("Identity", "StopGradient", "ZerosLike", "OnesLike", "Shape", "Size", "Rank", "Reshape", "ExpandDims",
            "Squeeze", "Transpose", "Reverse", "Tile", "Pad", "Slice", "StridedSlice", "Concat", "Pack", "Split",
            "BroadcastTo", "Fill", "Select"):
    FAMILIES[_op] = gen_movement
for _op in DYNAMIC_SHAPE:
    FAMILIES[_op] = gen_dynamic_shape
FAMILIES["Resize"] = gen_resize
FAMILIES["NonMaxSuppression"] = gen_detection
FAMILIES["OnnxUnique"] = gen_unique
FAMILIES["QuantizeLinear"] = gen_quantize
FAMILIES["DequantizeLinear"] = gen_quantize
for _op in ("Gather", "GatherNd", "ScatterNd", "UnsortedSegmentSum", "DynamicPartition", "DynamicStitch", "Unique",
            "OneHot", "InvertPermutation"):
    FAMILIES[_op] = gen_indexing
for _op in ("GatherElements", "ScatterElements", "TopK", "NonZero"):
    FAMILIES[_op] = gen_elements
for _op in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2D",
            "DepthwiseConv2DBackpropInput", "DepthwiseConv2DBackpropFilter", "MaxPool", "AvgPool", "MaxPoolGrad",
            "AvgPoolGrad"):
    FAMILIES[_op] = gen_window

# Ops a one-op graph of constants cannot exercise on its own, and where
# their edges are tested instead.
EXEMPT = {
    "Const": "every case's inputs are Const nodes of the edge values (static and poisoned runs)",
    "Placeholder": "every case's inputs are placeholders in the unknown-shape run",
    "NoOp": "has no inputs or outputs (session_test runs it as a target)",
    "RandomUniform": "values NumPy cannot predict; random_test.cc checks empty and huge shapes and the distribution",
    "RandomNormal": "as RandomUniform", "TruncatedNormal": "as RandomUniform",
    "RandomShuffle": "random order; random_test.cc",
}
for _op in ("VarHandle", "ReadVariable", "Assign", "AssignAdd", "AssignSub", "ResourceGather", "ResourceScatterAdd",
            "VarIsInitialized", "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam",
            "ResourceApplyAdamW", "ResourceApplyRMSProp", "ResourceApplyCenteredRMSProp", "ResourceApplyAdagrad"):
    EXEMPT[_op] = "reads or writes a variable, which a one-op graph does not have (variable_test, apply_ops_test)"
for _op in ("Save", "SaveShard", "Restore"):
    EXEMPT[_op] = "writes or reads files (checkpoint_ops_test, checkpoint_fault_test)"
for _op in ("FIFOQueue", "RandomShuffleQueue", "QueueEnqueueMany", "QueueDequeueMany", "QueueClose", "QueueSize",
            "Stack", "StackPush", "StackPop"):
    EXEMPT[_op] = "needs a queue or stack resource made by another node (queue_test, stack_test)"
for _op in ("GradientAccumulator", "AccumulatorApplyGradient", "AccumulatorTakeGradient", "AccumulatorSetGlobalStep",
            "StepTokenQueue", "StepTokenPut", "StepTokenTake", "StepTokenClose"):
    EXEMPT[_op] = "synchronous training: needs an accumulator or token resource and other steps (sync_ops_test)"
for _op in ("CollectiveAllReduce", "CollectiveBroadcast", "CollectiveAllGather"):
    EXEMPT[_op] = "needs a collective group of several ranks (collectives_test)"
for _op in ("Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"):
    EXEMPT[_op] = "control flow: needs a frame (loop_executor_test, control_flow_test)"
