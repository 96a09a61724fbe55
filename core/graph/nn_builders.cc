#include "core/graph/nn_builders.h"

#include "core/graph/control_flow.h"

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

Expected<DynamicLstmResult> DynamicLstm(GraphBuilder& b, const Output& inputs, const Output& sequence_length,
                                        const Output& w, const Output& bias, const Output& c0, const Output& h0,
                                        const DynamicLstmOptions& options) {
  WEFT_RETURN_IF_ERROR(b.status());
  if (sequence_length.dtype() != DType::kI64) {
    return b.Fail(InvalidArgumentError("DynamicLstm: sequence_length '", sequence_length.name(), "' is ",
                                       DTypeName(sequence_length.dtype()), "; it must be i64 [batch]"));
  }
  const DType dtype = inputs.dtype();
  Output steps = b.Op("Max", {sequence_length}, {}, "max_sequence_length");
  const bool accumulate = static_cast<bool>(options.per_step);
  std::vector<Output> init = {b.Scalar<int64_t>(0, "t0"), c0, h0};
  if (accumulate) init.push_back(b.Op("Cast", {b.Scalar<double>(0, "zero")}, {{"DstT", AttrValue(dtype)}}));
  WhileOptions loop;
  loop.parallel_iterations = options.parallel_iterations;
  loop.name = options.name;
  WEFT_ASSIGN_OR_RETURN(
      std::vector<Output> final_values,
      WhileLoop(
          b,
          [&](const std::vector<Output>& v) -> Expected<Output> {
            return b.Op("Less", {v[0], steps});
          },
          [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
            const Output& t = v[0];
            Output x = b.Op("Gather", {inputs, t}, {}, "x_t");
            Output c_new, h_new;
            if (options.fused) {
              std::vector<Output> cell = b.AddNode("LSTMCell", {x, v[1], v[2], w, bias},
                                                   {{"forget_bias", AttrValue(options.forget_bias)}}, "cell");
              WEFT_RETURN_IF_ERROR(b.status());
              c_new = cell[0];
              h_new = cell[1];
            } else {
              WEFT_ASSIGN_OR_RETURN(std::vector<Output> cell,
                                    LstmCellComposed(b, x, v[1], v[2], w, bias, options.forget_bias));
              c_new = cell[0];
              h_new = cell[1];
            }
            Output mask = b.Op("Cast", {b.Op("Less", {t, sequence_length})}, {{"DstT", AttrValue(dtype)}}, "mask");
            Output column = b.Op("ExpandDims", {mask}, {{"axis", AttrValue(int64_t{1})}}, "mask_column");
            auto keep = [&](const Output& next, const Output& prev) {
              return b.Op("Add", {prev, b.Op("Mul", {column, b.Op("Sub", {next, prev})})});
            };
            std::vector<Output> next = {b.Op("Add", {t, b.Scalar<int64_t>(1)}, {}, "next_t"), keep(c_new, v[1]),
                                        keep(h_new, v[2])};
            if (accumulate) {
              WEFT_ASSIGN_OR_RETURN(Output term, options.per_step(t, h_new, mask));
              next.push_back(term.valid() ? b.Op("Add", {v[3], term}, {}, "sum") : v[3]);
            }
            WEFT_RETURN_IF_ERROR(b.status());
            return next;
          },
          init, loop));
  DynamicLstmResult result;
  result.c = final_values[1];
  result.h = final_values[2];
  if (accumulate) result.sum = final_values[3];
  return result;
}

}  // namespace weft
