// Neural-network cells composed from primitive ops, for models whose
// device has no fused kernel and as references for the fused ops (tests
// and tools/bench compare the two).
//
//   GraphBuilder b;
//   WEFT_ASSIGN_OR_RETURN(std::vector<Output> ch, LstmCellComposed(b, x, c, h, w, bias, 1.0));
//   Output c_next = ch[0], h_next = ch[1];
#ifndef WEFT_CORE_GRAPH_NN_BUILDERS_H_
#define WEFT_CORE_GRAPH_NN_BUILDERS_H_

#include <vector>

#include "core/graph/builder.h"

namespace weft {

// One LSTM cell step, LSTMCell's math built from Concat, MatMul, Add,
// Split, Sigmoid, Tanh and Mul: with z = concat(x, h_prev) @ w + b split
// into i, f, g, o blocks of hidden columns, c = sigmoid(z_f + forget_bias)
// * c_prev + sigmoid(z_i) * tanh(z_g) and h = sigmoid(z_o) * tanh(c).
// |x| is [batch, input], |c_prev| and |h_prev| [batch, hidden], |w|
// [input + hidden, 4 * hidden], |b| [4 * hidden], all f32 or all f64.
// Returns {c, h, gates}, gates being concat(i, f, g, o) activated,
// as LSTMCell's outputs; or the builder's first error (a shape mismatch
// names the node that found it).
Expected<std::vector<Output>> LstmCellComposed(GraphBuilder& b, const Output& x, const Output& c_prev,
                                               const Output& h_prev, const Output& w, const Output& bias,
                                               double forget_bias = 1.0);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_NN_BUILDERS_H_
