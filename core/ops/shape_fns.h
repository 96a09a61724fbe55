// Shape functions shared by many ops, and helpers for writing new ones.
#ifndef WEFT_CORE_OPS_SHAPE_FNS_H_
#define WEFT_CORE_OPS_SHAPE_FNS_H_

#include <vector>

#include "core/graph/shape_inference.h"
#include "core/tensor/size.h"

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
// The value of a constant integer scalar input, or nullopt when unknown.
std::optional<int64_t> ConstIntScalar(const InferenceContext& c, int input);

// The number of elements one dimension of size |dim| gives in a
// StridedSlice (NumPy basic indexing: begin and end clamped, or replaced
// when masked); StridedSlice's and StridedSliceGrad's shape functions share
// it.
int64_t StridedSliceLength(int64_t dim, int64_t begin, int64_t end, int64_t stride, bool begin_masked, bool end_masked);

// Reshape's target |target| (one entry may be -1) for a tensor of
// |num_elements| elements (-1 when unknown; the -1 entry then stays),
// described as |what| in errors. Refuses a second -1, a negative entry, a
// rank above kMaxRank, a product past int64 and a count that differs. The
// shape function and the runtime's Reshape kernel share it.
Expected<std::vector<int64_t>> ResolveReshape(std::vector<int64_t> target, int64_t num_elements,
                                              const std::string& what);

// --- Windows (convolutions and pooling) ---------------------------------------

// The output size of a window op over |in| (-1 when |in| or |window| is
// unknown): VALID fits whole (dilated) windows, SAME covers every input.
Expected<int64_t> WindowOutput(int64_t in, int64_t window, int64_t stride, int64_t dilation,
                               const std::string& padding);

// Where batch, height, width and channels sit in a "NHWC" or "NCHW" shape.
struct Layout {
  int n, h, w, c;
};
Layout LayoutOf(const std::string& format);

// The output shape of a (depthwise) convolution of |in| with the HWIO
// |filter| (both rank 4, dims possibly unknown) under the node's
// data_format, strides, dilations and padding attrs, or an error saying why
// the op rejects them. Conv2D's shape function and the backprops' share it.
Expected<Shape> ConvOutput(InferenceContext& c, const Shape& in, const Shape& filter, bool depthwise);

// The output shape of a convolution op with padding SAME, VALID or
// EXPLICIT (explicit_paddings: top, bottom, left, right, added before a
// VALID convolution), as _FusedConv2D and _QConv2D take them: its attrs
// and the ranks of input 0 and filter 1 checked.
Expected<Shape> PaddedConvOutput(InferenceContext& c, bool depthwise);

// The [m, n] product of matrices a (input 0) and b (input 1), either
// transposed, as _FusedMatMul and _QMatMul take them.
Expected<Shape> MatrixProductOutput(InferenceContext& c, bool ta, bool tb);

// Checks a 4-entry window attr (strides, ksize, dilations): entries >= 1,
// and 1 in the batch and channel dimensions.
Status CheckWindowAttr(InferenceContext& c, const char* name, const std::vector<int64_t>& v, const Layout& l);

// The sizes of an LSTM cell (-1 when unknown while building).
struct LstmDims {
  int64_t batch = -1, input = -1, hidden = -1;
};
// One dimension of an LSTM cell's tensor, in terms of those sizes.
enum class LstmDim { kBatch, kInput, kHidden, kGates /* 4 * hidden */, kConcat /* input + hidden */ };
// An input of an LSTM op: its index, its name for messages, and the
// dimensions it must have.
struct LstmArg {
  int index;
  const char* name;
  std::vector<LstmDim> dims;
};
// Checks the inputs |args| of LSTMCell or LSTMCellGrad against one another:
// ranks first, then every known dimension against the sizes the others
// imply, and returns those sizes. The errors name the input, its shape and
// the shape expected.
Expected<LstmDims> CheckLstmShapes(InferenceContext& c, const std::vector<LstmArg>& args);

}  // namespace weft::ops

#endif  // WEFT_CORE_OPS_SHAPE_FNS_H_
