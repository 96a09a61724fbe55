// The ONNX op converters (internal to core/onnx): each maps one ONNX node
// (of opsets 7 to 17) onto Weft ops, with the op's attribute defaults and
// its opset's form (attrs that became inputs in opset 10, 11 or 13).
// docs/onnx.md has the table. One file per op family adds its entries to
// the table (Converters(), onnx_ops.cc):
//   onnx_elementwise.cc   unary, binary and variadic ops, activations, Cast
//   onnx_nn.cc            MatMul, Gemm, Conv, pools, normalisations, Resize
//   onnx_shape.cc         shapes, indexing, constants, reductions, TopK
//   onnx_recurrent.cc     LSTM, GRU, RNN
//   onnx_control_flow.cc  If, Loop, Scan
//   onnx_einsum.cc        Einsum
//   onnx_losses.cc        NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
//   onnx_activations.cc   ThresholdedRelu, Shrink, Celu, Hardmax, MeanVarianceNormalization, CastLike
//   onnx_conv_transpose.cc ConvTranspose
//   onnx_quantize.cc      QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
//                         ConvInteger, QLinearMatMul, QLinearConv
//   onnx_training.cc      ai.onnx.preview.training's Adagrad, Momentum, Adam
//   onnx_signal.cc        HannWindow, HammingWindow, BlackmanWindow
//   onnx_indexing.cc      ScatterND, GatherND, ReverseSequence, Det
//   onnx_dynamic.cc       Slice, Pad, Tile, ReduceSum, Unsqueeze, Squeeze, Split with run-time shape inputs
//   onnx_array.cc         Trilu, EyeLike, OneHot, DepthToSpace, SpaceToDepth, Compress
//
// Conventions: the node's main Weft node is named after the ONNX node
// (c.Name()), helpers under it (c.Name("MatMul")). Inputs that are attrs
// in Weft (axes, pads, shapes, perm) must be known at import time
// (KnownInts); where ONNX Runtime takes one at run time, the converter
// hands the node to onnx_dynamic.cc's Dynamic* forms instead.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/onnx/importer.h"

namespace weft::onnx_io::convert {

using ConverterTable = std::map<std::string, Converter, std::less<>>;

void AddElementwiseConverters(ConverterTable& t);
void AddNnConverters(ConverterTable& t);
void AddShapeConverters(ConverterTable& t);
void AddRecurrentConverters(ConverterTable& t);
void AddControlFlowConverters(ConverterTable& t);
void AddEinsumConverters(ConverterTable& t);
void AddLossConverters(ConverterTable& t);
void AddActivationConverters(ConverterTable& t);
void AddArrayConverters(ConverterTable& t);
void AddConvTransposeConverters(ConverterTable& t);
void AddQuantizeConverters(ConverterTable& t);
void AddTrainingConverters(ConverterTable& t);
void AddSignalConverters(ConverterTable& t);
void AddIndexingConverters(ConverterTable& t);

// Shape-like inputs computed at run time (onnx_dynamic.cc): whether input
// |i| is given but not known at import, and the converters that take such
// inputs as tensors.
bool Fed(NodeContext& c, int i);
Status DynamicSliceOp(NodeContext& c);
Status DynamicPadOp(NodeContext& c);
// |weft_op| (DynamicTile, DynamicExpandDims, DynamicSqueeze) of input 0 and
// the index input 1 named |what|.
Status DynamicIndexOp(NodeContext& c, std::string_view weft_op, std::string_view what);
Status DynamicReduceSum(NodeContext& c);
Status DynamicSplitOp(NodeContext& c, int64_t axis);
Status RuntimeResize(NodeContext& c, bool upsample);
// BatchNormalization with training_mode = 1 (onnx_training.cc).
Status BatchNormTraining(NodeContext& c);
// Dropout with training_mode true or fed (onnx_training.cc).
Status DropoutTraining(NodeContext& c);
// MaxPool and AveragePool of [N, C, D, H, W] (onnx_pool3d.cc).
Status Pool3d(NodeContext& c, bool max);
// 2-D pooling with dilations (onnx_pool3d.cc).
Status DilatedPool(NodeContext& c, bool max);

// Helpers every family uses (onnx_ops.cc).

// Weft op |op| of |in|, named c.Name(suffix).
Output Op(NodeContext& c, std::string_view op, const std::vector<Output>& in, AttrMap attrs = {},
          std::string_view suffix = {});
Output ConstOf(NodeContext& c, const Tensor& t, std::string_view suffix);
Expected<Output> ScalarLike(NodeContext& c, DType dtype, double value, std::string_view suffix);
// Normalises axis |a| for |rank|; an error naming |what| when out of range.
Expected<int64_t> Axis(NodeContext& c, int64_t a, int rank, std::string_view what);

// Layouts. Images run channels-last (ImportOptions::channels_last): Conv,
// pools and BatchNormalization make NHWC outputs; elementwise ops keep an
// input's NHWC form; any other op reads the NCHW form, made by one
// Transpose.

// Input |i| of an elementwise op: its NHWC form when it has one.
Expected<std::pair<Output, bool>> ElementwiseIn(NodeContext& c, int i);
void SetOutAs(NodeContext& c, int i, const Output& y, bool nhwc);
// The inputs of an op with NumPy broadcasting, all NHWC when one is (a
// lower-rank operand is padded to 4-D and permuted as the NCHW one would
// be), else all as ONNX has them. Returns the inputs and whether NHWC.
Expected<std::pair<std::vector<Output>, bool>> BroadcastIns(NodeContext& c, const std::vector<int>& indices);
// |x| (one element) as a scalar, its nodes named after |what|; as an
// int64 scalar (cast from another integer type).
Output AsScalar(NodeContext& c, const Output& x, std::string_view what);
Expected<Output> ScalarI64(NodeContext& c, const Output& x, std::string_view what);
// A one-input elementwise op, and a broadcasting two-input one.
Status Unary(NodeContext& c, std::string_view weft_op);
Status Binary(NodeContext& c, std::string_view weft_op);

}  // namespace weft::onnx_io::convert
