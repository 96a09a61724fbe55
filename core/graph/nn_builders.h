// Neural-network cells composed from primitive ops, for models whose
// device has no fused kernel and as references for the fused ops (tests
// and tools/bench compare the two).
//
//   GraphBuilder b;
//   WEFT_ASSIGN_OR_RETURN(std::vector<Output> ch, LstmCellComposed(b, x, c, h, w, bias, 1.0));
//   Output c_next = ch[0], h_next = ch[1];
#ifndef WEFT_CORE_GRAPH_NN_BUILDERS_H_
#define WEFT_CORE_GRAPH_NN_BUILDERS_H_

#include <functional>
#include <string>
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

struct DynamicLstmOptions {
  // The fused LSTMCell op, or LstmCellComposed.
  bool fused = true;
  double forget_bias = 1.0;
  int parallel_iterations = 10;
  // The loop's name scope.
  std::string name = "rnn";
  // Called inside the loop at each step with the step t (i64 scalar), the
  // step's new hidden state h [batch, hidden] and mask [batch] (1 where
  // t < sequence_length, else 0, of h's dtype). It may return a scalar of
  // h's dtype that is summed over the steps (DynamicLstmResult::sum), or
  // an invalid Output.
  std::function<Expected<Output>(const Output& t, const Output& h, const Output& mask)> per_step;
};

struct DynamicLstmResult {
  Output c, h;  // the states after each sequence's last step
  Output sum;   // of what per_step returned (invalid without per_step)
};

// Runs an LSTM over a batch of sequences of different lengths with a
// while loop (no unrolling): |inputs| is [time, batch, input] (time-major),
// |sequence_length| i64 [batch] (each <= time), |w| [input + hidden,
// 4 * hidden], |bias| [4 * hidden], |c0| and |h0| [batch, hidden]. The
// loop runs max(sequence_length) steps; a sequence whose length has been
// reached keeps its state (c = c_prev + mask (c_new - c_prev)), so its
// final state is the one after its own last step.
Expected<DynamicLstmResult> DynamicLstm(GraphBuilder& b, const Output& inputs, const Output& sequence_length,
                                        const Output& w, const Output& bias, const Output& c0, const Output& h0,
                                        const DynamicLstmOptions& options = {});

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_NN_BUILDERS_H_
