// Post-training int8 quantization (docs/quantization.md), what
// `weft quantize` runs: pick the products to quantize, observe the ranges
// of the tensors around them on calibration data, and rewrite the graph in
// the QDQ form ONNX uses, with int8 weights:
//
//   QuantizePlan plan = PlanQuantization(graph, options);
//   RangeObserver ranges(RangeObserver::Method::kMinMax, 0);
//   for (pass = 0; pass < ranges.passes(); ++pass)
//     for (each calibration batch) ranges.Observe(plan.tensors[i], fetched[i], pass);
//   WEFT_ASSIGN_OR_RETURN(GraphDef q, QuantizeGraph(graph, plan, ranges, options, &report));
//
// The graph optimizer's quantize_fusion (level 2) turns the QDQ form into
// _QConv2D and _QMatMul; at level 0 it runs in f32 with the same rounding.
#ifndef WEFT_CORE_PASSES_QUANTIZE_H_
#define WEFT_CORE_PASSES_QUANTIZE_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"

namespace weft::passes {

struct QuantizeOptions {
  // Weights to [-127, 127] (8) or [-63, 63] (7: exact in one oneDNN int8
  // product on x86 CPUs without VNNI, where 8-bit ones take two).
  int weight_bits = 8;
  std::set<std::string> exclude;  // products kept in f32, by node name
};

// The products to quantize and the tensors ("node" or "node:k") whose
// ranges that needs: their inputs and residuals, and their outputs where
// another quantized product reads them.
struct QuantizePlan {
  std::vector<std::string> products;
  std::vector<std::string> tensors;
  std::vector<std::string> skipped;  // one sentence per product left in f32, and why
};
QuantizePlan PlanQuantization(const Graph& graph, const QuantizeOptions& options);

// The range each tensor is quantized to, from calibration batches: the
// minimum and maximum (kMinMax), or the |percentile|th percentile at each
// end (kPercentile, which clips rare outliers; it needs a second pass over
// the data, for a histogram over the first pass's range).
class RangeObserver {
 public:
  enum class Method { kMinMax, kPercentile };
  RangeObserver(Method method, double percentile) : method_(method), percentile_(percentile) {}

  int passes() const { return method_ == Method::kPercentile ? 2 : 1; }
  // Adds the finite values of |value| (f32) to |tensor|'s statistics.
  Status Observe(const std::string& tensor, const Tensor& value, int pass);
  // The range observed, or an error when no finite value was seen.
  Expected<std::pair<double, double>> Range(const std::string& tensor) const;

 private:
  struct Stats {
    double min = 0, max = 0;
    bool any = false;
    std::vector<int64_t> histogram;
    int64_t count = 0;
  };
  Method method_;
  double percentile_;
  std::map<std::string, Stats> stats_;
};

struct QuantizeReport {
  int64_t products = 0;
  int64_t tensors = 0;
  int64_t weights_f32_bytes = 0;   // the quantized weights' bytes before
  int64_t weights_int8_bytes = 0;  // and after (with their scales)
  // Per tensor: its range, dtype, scale and zero point.
  std::vector<std::string> lines;
};

Expected<GraphDef> QuantizeGraph(const Graph& graph, const QuantizePlan& plan, const RangeObserver& ranges,
                                 const QuantizeOptions& options, QuantizeReport* report);

}  // namespace weft::passes

#endif  // WEFT_CORE_PASSES_QUANTIZE_H_
