// ONNX's training losses, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (opsets 12/13), composed of Weft ops: the class
// of each target picked with GatherElements along axis 1, weighted by
// Gather(weight, target), ignored targets masked with Select, then the
// reduction (the conventions are in core/onnx/converters.h).
#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// -log_prob[n, target[n, d...], d...] weighted and reduced as ONNX's
// NegativeLogLikelihoodLoss defines it; |log_prob| is [N, C, d...].
Expected<Output> Nll(NodeContext& c, const Output& log_prob, int target_input, int weight_input) {
  WEFT_ASSIGN_OR_RETURN(Output target, c.In(target_input));
  if (target.dtype() != DType::kI32 && target.dtype() != DType::kI64) {
    return c.Error("target must be int32 or int64, got ", DTypeName(target.dtype()));
  }
  const std::string reduction = c.Str("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return c.Error("attr 'reduction' is ", Quote(reduction), "; ONNX defines none, sum and mean");
  }
  const DType dt = log_prob.dtype();
  // Targets equal to ignore_index pick class 0 and weigh nothing.
  Output mask, index = target;
  if (c.HasAttr("ignore_index")) {
    WEFT_ASSIGN_OR_RETURN(Output ii,
                          ScalarLike(c, target.dtype(), static_cast<double>(c.Int("ignore_index", 0)), "ignore_index"));
    mask = Op(c, "NotEqual", {target, ii}, {}, "kept");
    WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, target.dtype(), 0, "class0"));
    index = Op(c, "Select", {mask, target, zero}, {}, "target_kept");
  }
  Output picked =
      Op(c, "GatherElements", {log_prob, Op(c, "ExpandDims", {index}, {{"axis", AttrValue(int64_t{1})}}, "target_1")},
         {{"axis", AttrValue(int64_t{1})}}, "picked");
  picked = Op(c, "Squeeze", {picked}, {{"axis", AttrValue(std::vector<int64_t>{1})}}, "picked_squeezed");
  Output weight;
  if (c.has_input(weight_input)) {
    WEFT_ASSIGN_OR_RETURN(Output w, c.In(weight_input));
    weight = Op(c, "Gather", {w, index}, {{"axis", AttrValue(int64_t{0})}}, "weight");
    if (mask.valid()) {
      WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, dt, 0, "weight0"));
      weight = Op(c, "Select", {mask, weight, zero}, {}, "weight_kept");
    }
  } else if (mask.valid()) {
    weight = Op(c, "Cast", {mask}, {{"DstT", AttrValue(dt)}}, "weight");
  }
  Output loss = Op(c, "Neg", {picked}, {}, "nll");
  if (weight.valid()) loss = Op(c, "Mul", {loss, weight}, {}, "weighted");
  if (reduction == "none") return loss;
  Output sum = Op(c, "Sum", {loss}, {}, "sum");
  if (reduction == "sum") return sum;
  if (!weight.valid()) return Op(c, "Mean", {loss}, {}, "mean");
  return Op(c, "Div", {sum, Op(c, "Sum", {weight}, {}, "weight_sum")}, {}, "mean");
}

Status CheckScores(NodeContext& c, const Output& x) {
  if (!IsFloating(x.dtype())) return c.Error("input 0 must be floating-point, got ", DTypeName(x.dtype()));
  const int rank = x.shape().rank();
  if (rank >= 0 && rank < 2) return c.Error("input 0 must be [N, C, d1, ...], got rank ", rank);
  return Status();
}

Status NegativeLogLikelihoodLoss(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output log_prob, c.In(0));
  WEFT_RETURN_IF_ERROR(CheckScores(c, log_prob));
  WEFT_ASSIGN_OR_RETURN(Output loss, Nll(c, log_prob, 1, 2));
  c.SetOut(0, Op(c, "Identity", {loss}));
  return Status();
}

Status SoftmaxCrossEntropyLoss(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output scores, c.In(0));
  WEFT_RETURN_IF_ERROR(CheckScores(c, scores));
  Output log_prob = Op(c, "LogSoftmax", {scores}, {{"axis", AttrValue(int64_t{1})}}, "log_prob");
  WEFT_ASSIGN_OR_RETURN(Output loss, Nll(c, log_prob, 1, 2));
  c.SetOut(0, Op(c, "Identity", {loss}));
  if (c.has_output(1)) c.SetOut(1, log_prob);
  return Status();
}

}  // namespace

void AddLossConverters(ConverterTable& t) {
  t["NegativeLogLikelihoodLoss"] = NegativeLogLikelihoodLoss;
  t["SoftmaxCrossEntropyLoss"] = SoftmaxCrossEntropyLoss;
}

}  // namespace weft::onnx_io::convert
