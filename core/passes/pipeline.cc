#include <algorithm>
#include <chrono>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes {
namespace {

struct PassEntry {
  const char* name;
  int level;
  internal::PassFn run;
  const char* doc;
};

// In the order they run: cheap rewrites first, so that folding and CSE
// see the simplest graph.
constexpr PassEntry kPasses[] = {
    {"identity_removal", 1, internal::RemoveIdentities,
     "Removes nodes that pass their input through unchanged: Identity, StopGradient, a Cast to the same dtype, a "
     "Reshape, Squeeze or ExpandDims to the shape the input already has, a Transpose with the identity "
     "permutation. Their readers read the input instead."},
    {"arithmetic", 1, internal::SimplifyArithmetic,
     "Rewrites arithmetic that gives bitwise the same values: x*1, 1*x, x/1, x+(-0.0), x-0.0 (and integer "
     "zeros) become x; -(-x) becomes x; Reshape of a Reshape reshapes once; Transpose of a Transpose permutes "
     "once, or not at all when the two cancel; a Transpose that moves only axes of size 1 becomes a Reshape (no "
     "copy). x+0.0 is kept: -0.0+0.0 is 0.0."},
    {"shape_folding", 1, internal::FoldShapes,
     "Shape, Size and Rank of a tensor whose shape is known when the graph is built become constants (they still "
     "run after the tensor, so they stay in its loop or branch)."},
    {"weight_folding", 2, internal::FoldIntoWeights,
     "In a frozen graph, an inference-mode FusedBatchNorm after a Conv2D, DepthwiseConv2D or MatMul with constant "
     "weights becomes new weights (filter * scale / sqrt(variance + epsilon)) and a BiasAdd (offset - mean * that "
     "scale); a Mul by a constant per-channel vector becomes new weights. Constant folding, next, computes them."},
    {"constant_folding", 1, internal::FoldConstants,
     "Evaluates once, on the host, every node whose inputs are all constants, and replaces the outputs the rest "
     "of the graph reads by Const nodes with the same names. Never stateful or random ops, control flow, or a "
     "node asked (by the graph or a pin) to run on another device; inside a loop only values that do not change "
     "between iterations; "
     "never a constant over 10 MiB. A node that fails is left to fail at run time, naming it."},
    {"cse", 1, internal::EliminateCommonSubexpressions,
     "Common subexpression elimination: of two nodes with the same op, attrs, inputs, control inputs and "
     "requested device ([placement.pins] included), the later one's readers read the earlier one. Constants with "
     "the same value merge too; stateful nodes never do."},
    {"gelu_fusion", 2, internal::FuseGelus,
     "The erf form of GELU as ONNX exports write it, x * (1 + erf(x / sqrt(2))) * 0.5 in five ops (the factors in "
     "either order, or x * 0.5 first), becomes one Gelu."},
    {"reshape_sinking", 2, internal::SinkReshapes,
     "A Reshape (of fully known shapes) read only by an elementwise op moves after it: a unary op, or a binary one "
     "with a constant scalar or a vector along the last axis both shapes share. A MatMul (2-D) then meets the bias "
     "and activation an exported graph applies to its 3-D result, and the Reshape back to 2-D meets the first and "
     "both go."},
    {"conv_fusion", 2, internal::FuseConvolutions,
     "An f32 Conv2D or DepthwiseConv2D, with a zero Pad of the spatial axes before it (a VALID convolution), and "
     "after it a BiasAdd (or Add of a [channels] vector), an Add of a tensor of its shape (a residual) and an "
     "activation (Relu, Relu6, ClipByValue of constants, Elu, Sigmoid, Tanh, Gelu, x * Sigmoid(x)), each "
     "optional, becomes one _FusedConv2D, which the CPU runs as one oneDNN convolution with post-ops. A "
     "convolution alone is fused when its filter is a constant. Only values nothing else reads are fused, and only "
     "where every device the node could run on has the fused kernel."},
    {"matmul_fusion", 2, internal::FuseMatMuls,
     "An f32 MatMul with a BiasAdd (or Add of a [n] vector), a residual Add and an activation after it, as "
     "conv_fusion, becomes one _FusedMatMul."},
    {"quantize_fusion", 2, internal::FuseQuantized,
     "A Conv2D, DepthwiseConv2D or MatMul (or their fused ops, with a Relu, Relu6 or Clip) whose input is a "
     "DequantizeLinear of int8 values and whose weights a DequantizeLinear of constant symmetric int8 weights, as "
     "weft quantize and ONNX's QDQ models write them, becomes a _QConv2D or _QMatMul, with the QuantizeLinear "
     "after it when one alone reads it and a dequantized int8 residual: int8 products with 32-bit sums "
     "(docs/quantization.md)."},
    {"winograd", 3, internal::AllowWinograd,
     "A _FusedConv2D with a constant 3x3 filter, strides and dilations 1 (not depthwise) is allowed Winograd's "
     "minimal filtering: the CPU runs it as oneDNN's Winograd convolution in oneDNN's blocked layout, reordering "
     "the input and output at its edges, where oneDNN has one for its shape (about half the time of the direct "
     "convolution at ResNet's sizes), and the direct one for data holding an infinity or NaN. Results differ from "
     "the direct sum by about 1e-6 of the output's largest magnitude."},
};

constexpr int kMaxRounds = 4;

std::vector<std::string> PassNames() {
  std::vector<std::string> names;
  for (const PassEntry& p : kPasses) names.push_back(p.name);
  return names;
}

}  // namespace

std::vector<PassInfo> ListPasses() {
  std::vector<PassInfo> out;
  for (const PassEntry& p : kPasses) out.push_back({p.name, p.level, p.doc});
  return out;
}

Status ValidateOptions(const OptimizeOptions& options) {
  if (options.level < 0 || options.level > kMaxLevel) {
    return InvalidArgumentError("optimization level ", options.level, " does not exist: levels go from 0 (none) to ",
                                kMaxLevel, "");
  }
  const std::vector<std::string> names = PassNames();
  for (const std::string& name : options.disable) {
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    const std::string hint = ClosestMatch(name, names);
    return InvalidArgumentError("no graph optimizer pass is called ", Quote(name),
                                hint.empty() ? "" : StrCat("; did you mean ", Quote(hint), "?"),
                                " (the passes: ", StrJoin(names, ", "), ")");
  }
  return Status();
}

Expected<OptimizeResult> Optimize(std::shared_ptr<const Graph> graph, const OptimizeOptions& options,
                                  const PassContext& context) {
  WEFT_RETURN_IF_ERROR(ValidateOptions(options));
  OptimizeResult result;
  result.nodes_before = graph->num_nodes();
  std::vector<const PassEntry*> passes;
  for (const PassEntry& p : kPasses) {
    if (p.level > options.level) continue;
    if (std::find(options.disable.begin(), options.disable.end(), p.name) != options.disable.end()) continue;
    passes.push_back(&p);
    PassReport report;
    report.pass = p.name;
    report.level = p.level;
    result.reports.push_back(std::move(report));
  }
  for (int round = 0; round < kMaxRounds && !passes.empty(); ++round) {
    bool any = false;
    for (std::size_t i = 0; i < passes.size(); ++i) {
      const PassEntry& p = *passes[i];
      PassReport& report = result.reports[i];
      const auto start = std::chrono::steady_clock::now();
      GraphEditor edit(*graph);
      Expected<int64_t> changed = p.run(edit, context, options, report);
      auto fail = [&](const Status& why) {
        return InternalError("the graph optimizer's pass ", Quote(p.name), " failed: ", why.message(),
                             ". This is a bug in Weft; run with --optimize 0 (or [graph_optimizer] level = 0, or ",
                             "disable = [", Quote(p.name), "]) to go around it");
      };
      if (!changed.ok()) return fail(changed.status());
      if (*changed > 0) {
        Expected<Graph> next = Graph::FromGraphDef(edit.Finish(context.keep));
        if (!next.ok()) return fail(next.status());
        graph = std::make_shared<const Graph>(std::move(*next));
        report.changed += *changed;
        any = true;
      }
      report.milliseconds +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (!any) break;
  }
  result.nodes_after = graph->num_nodes();
  result.graph = std::move(graph);
  return result;
}

}  // namespace weft::passes
