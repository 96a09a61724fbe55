#include "core/graph/nn_builders.h"

namespace weft {

Expected<std::vector<Output>> LstmCellComposed(GraphBuilder& b, const Output& x, const Output& c_prev,
                                               const Output& h_prev, const Output& w, const Output& bias,
                                               double forget_bias) {
  WEFT_RETURN_IF_ERROR(b.status());
  if (!x.valid() || !c_prev.valid() || !h_prev.valid() || !w.valid() || !bias.valid()) {
    return InvalidArgumentError("LstmCellComposed: every input (x, c_prev, h_prev, w, b) must be a valid output");
  }
  auto scope = b.NameScope("lstm_cell");
  const AttrMap axis1 = {{"axis", AttrValue(int64_t{1})}};
  const Output xh = b.Op("Concat", {x, h_prev}, axis1);
  const Output z = b.Op("Add", {b.Op("MatMul", {xh, w}), bias});
  AttrMap split = axis1;
  split["num_split"] = AttrValue(int64_t{4});
  std::vector<Output> blocks = b.AddNode("Split", {z}, split);
  WEFT_RETURN_IF_ERROR(b.status());
  if (blocks.size() != 4) return InternalError("LstmCellComposed: Split gave ", blocks.size(), " outputs, not 4");
  // The forget bias as a scalar of the cell's dtype.
  Tensor fb_value = Tensor::Scalar<double>(forget_bias);
  if (x.dtype() == DType::kF32) fb_value = Tensor::Scalar<float>(static_cast<float>(forget_bias));
  const Output i = b.Op("Sigmoid", {blocks[0]});
  const Output f = b.Op("Sigmoid", {b.Op("Add", {blocks[1], b.Const(fb_value)})});
  const Output g = b.Op("Tanh", {blocks[2]});
  const Output o = b.Op("Sigmoid", {blocks[3]});
  const Output c = b.Op("Add", {b.Op("Mul", {f, c_prev}), b.Op("Mul", {i, g})});
  const Output h = b.Op("Mul", {o, b.Op("Tanh", {c})});
  const Output gates = b.Op("Concat", {i, f, g, o}, axis1);
  WEFT_RETURN_IF_ERROR(b.status());
  return std::vector<Output>{c, h, gates};
}

}  // namespace weft
