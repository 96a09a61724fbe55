// The fixture of the graph optimizer's tests (graph_optimizer_test.cc:
// the passes of level 1; graph_optimizer_fusion_test.cc: the fusions of
// level 2): a graph optimized as a run would optimize it, and the graph
// run at a level.
#ifndef WEFT_TESTS_INTEGRATION_GRAPH_OPTIMIZER_FIXTURE_H_
#define WEFT_TESTS_INTEGRATION_GRAPH_OPTIMIZER_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/passes/pass.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/run_rewrite.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft::testing {

// Both files' tests are TEST_Fs of this fixture: it lives outside an
// anonymous namespace so that GoogleTest sees one fixture class.
class GraphOptimizer : public ::testing::Test {
 protected:
  using OptimizeOptions = passes::OptimizeOptions;
  using OptimizeResult = passes::OptimizeResult;
  using PassReport = passes::PassReport;

  // The elements of an f32 tensor.
  static std::vector<float> Values(const Tensor& t) { return Floats(t); }

  // The graph a run of |fetches| (and |targets|) executes, optimized at
  // |options|. Fails the test on an error.
  OptimizeResult Optimize(const GraphBuilder& b, const std::vector<std::string>& fetches,
                          const std::vector<std::string>& feeds = {}, OptimizeOptions options = {},
                          const std::vector<std::string>& targets = {}) {
    auto built = b.Build();
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    graph_ = std::make_unique<Graph>(std::move(*built));
    evaluator_ = env_.Session(Graph(*graph_));
    auto run = runtime::RewriteForRun(*graph_, feeds, fetches, targets);
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    passes::PassContext context;
    context.keep.insert(run->roots.begin(), run->roots.end());
    context.evaluate = [this](GraphDef def, const std::vector<std::string>& outputs) {
      return evaluator_->EvaluateOnHost(std::move(def), outputs);
    };
    context.has_fused_kernel = [this](const NodeDef& node, const NodeDef& fused) {
      return has_fused_kernel_ && runtime::FusedKernelEverywhere(*env_.devices(), {}, node, fused);
    };
    auto result = passes::Optimize(run->graph, options, context);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? std::move(*result) : OptimizeResult{};
  }

  // Runs |fetches| of what |b| built at |level|.
  std::vector<Tensor> RunAt(const GraphBuilder& b, int level, const std::vector<std::string>& fetches,
                            const std::vector<std::pair<std::string, Tensor>>& feeds = {}) {
    runtime::SessionOptions options;
    options.optimizer.level = level;
    auto session = env_.Session(b, options);
    std::vector<Tensor> out;
    Status s = session->Run(feeds, fetches, {}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  static int Count(const Graph& g, std::string_view op) {
    int n = 0;
    for (const Graph::Node& node : g.nodes()) n += node.op_name() == op ? 1 : 0;
    return n;
  }
  static const PassReport* Report(const OptimizeResult& r, std::string_view pass) {
    for (const PassReport& p : r.reports) {
      if (p.pass == pass) return &p;
    }
    return nullptr;
  }
  // The input of the _Retval of fetch |index|.
  static const Graph::Node& Fetched(const Graph& g, int index = 0) {
    for (const Graph::Node& node : g.nodes()) {
      if (node.op_name() == "_Retval" && node.def.attrs.at("index").get<int64_t>() == index) {
        return g.node(node.inputs[0].node);
      }
    }
    ADD_FAILURE() << "no _Retval " << index;
    return g.node(0);
  }

  RuntimeEnv env_;
  bool has_fused_kernel_ = true;  // what the devices say, or false: none has
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<runtime::Session> evaluator_;
};

// An f32 tensor of |v| in |shape|.
inline Tensor F32(std::vector<float> v, Shape shape) { return Tensor::FromVector(v, shape); }

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_GRAPH_OPTIMIZER_FIXTURE_H_
