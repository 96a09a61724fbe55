// Sparse updates (core/train/training_graph.h, sparse_updates): a variable
// the loss reads only through ResourceGather is updated from the rows read,
// by the optimizer's sparse rule or the host's dense fallback; and the
// partitioned variables of core/placement/variable_partition.h, run in one
// process against the unsplit graph.
//
// The model: E f64[6,3] read by ResourceGather(E, ids) with ids
// [[1,4,1],[0,4,5]] (rows 1 and 4 twice, rows 2 and 3 never), and
// loss = sum(C * gathered^2) for a constant C, so the gradient of a row is
// 2 * row * (sum of C over its positions). Expected values: for SGD,
// Adagrad and the fallback (momentum), the same steps with a dense gradient
// (sparse_updates = false), which those rules must match exactly; for Adam,
// torch.optim.SparseAdam's rule written out below in double from the
// formulas of its documentation (only the rows read change, moments
// included).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/graph/builder.h"
#include "core/placement/variable_partition.h"
#include "core/train/training_graph.h"
#include "tests/support/runtime_env.h"

namespace weft {
namespace {

using testing::RuntimeEnv;

constexpr int kRows = 6, kCols = 3;
const std::vector<int64_t> kIds = {1, 4, 1, 0, 4, 5};

std::vector<double> InitialE() {
  std::vector<double> e;
  for (int i = 0; i < kRows * kCols; ++i) e.push_back(0.1 * (i % 7) - 0.25 + 0.01 * i);
  return e;
}

std::vector<double> C() {
  std::vector<double> c;
  for (int i = 0; i < 2 * 3 * kCols; ++i) c.push_back(0.5 + 0.05 * ((i * 5) % 11));
  return c;
}

// The model graph; with |also_read|, E is read whole too (so it must stay
// dense).
Graph Model(bool also_read) {
  GraphBuilder b;
  Output e = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(Shape{kRows, kCols})}}, "E");
  b.Op("Assign", {e, b.Const(Tensor::FromVector<double>(InitialE(), Shape{kRows, kCols}))}, {}, "E/init");
  Output ids = b.Const(Tensor::FromVector<int64_t>(kIds, Shape{2, 3}), "ids");
  Output rows = b.Op("ResourceGather", {e, ids}, {{"dtype", AttrValue(DType::kF64)}}, "rows");
  Output weighted = b.Op("Mul", {b.Op("Square", {rows}), b.Const(Tensor::FromVector<double>(C(), Shape{2, 3, kCols}))});
  Output loss = b.Op("Sum", {weighted}, {{"axis", AttrValue(std::vector<int64_t>{})}}, "loss_rows");
  if (also_read) {
    Output whole = b.Op("ReadVariable", {e}, {{"dtype", AttrValue(DType::kF64)}}, "E/read");
    loss = b.Op("Add", {loss, b.Op("Sum", {whole}, {{"axis", AttrValue(std::vector<int64_t>{})}})});
  }
  b.Op("Identity", {loss}, {}, "loss");
  {
    auto deps = b.ControlDependencies({Output(&b, b.Find("E/init").node(), -1)});
    b.Op("NoOp", {}, {}, "init");
  }
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

struct Trained {
  std::vector<double> e;
  bool sparse = false;
  std::vector<double> first_slot;
};

// Trains |model| for |steps| steps of |optimizer| (default hyper-parameters
// but |lr|) and returns E (and its first slot).
Trained Train(RuntimeEnv& env, const Graph& model, const std::string& optimizer, bool sparse, int steps, double lr,
              const std::string& variable = "E") {
  Trained out;
  const plugin::OptimizerPlugin* plugin = env.host().optimizers().Find(optimizer);
  EXPECT_NE(plugin, nullptr) << optimizer;
  if (plugin == nullptr) return out;
  auto opt = train::Optimizer::Create(*plugin, static_cast<const config::Section*>(nullptr));
  EXPECT_TRUE(opt.ok()) << opt.status().ToString();
  if (!opt.ok()) return out;
  train::TrainingGraphOptions options;
  options.loss = "loss";
  options.init = "init";
  options.sparse_updates = sparse;
  auto tg = train::BuildTrainingGraph(model, options, **opt);
  EXPECT_TRUE(tg.ok()) << tg.status().ToString();
  if (!tg.ok()) return out;
  std::string slot;
  for (const train::TrainedVariable& v : tg->variables) {
    if (v.name == variable) {
      out.sparse = v.sparse;
      if (!v.slots.empty()) slot = v.slots[0];
    }
  }
  auto session = env.Session(tg->graph);
  if (session == nullptr) return out;
  EXPECT_TRUE(session->Run({}, {}, {tg->init}, nullptr).ok());
  for (int s = 0; s < steps; ++s) {
    Status status =
        session->Run({{tg->learning_rate, Tensor::Scalar<float>(static_cast<float>(lr))}}, {}, {tg->train}, nullptr);
    EXPECT_TRUE(status.ok()) << status.ToString();
  }
  std::vector<std::string> fetches;
  for (std::size_t i = 0; i < tg->state.size(); ++i) {
    if (tg->state[i] == variable || tg->state[i] == slot) fetches.push_back(tg->state_reads[i]);
  }
  std::vector<Tensor> values;
  Status status = session->Run({}, fetches, {}, &values);
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (!status.ok()) return out;
  // state is sorted: "E" before its slots.
  out.e.assign(values[0].data<double>(), values[0].data<double>() + values[0].num_elements());
  if (values.size() > 1) {
    out.first_slot.assign(values[1].data<double>(), values[1].data<double>() + values[1].num_elements());
  }
  return out;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
  }
}

TEST(SparseUpdates, AVariableReadOnlyByGathersGetsASparseUpdateOthersADenseOne) {
  RuntimeEnv env;
  EXPECT_TRUE(Train(env, Model(false), "sgd", true, 1, 0.1).sparse);
  EXPECT_FALSE(Train(env, Model(false), "sgd", false, 1, 0.1).sparse);
  EXPECT_FALSE(Train(env, Model(true), "sgd", true, 1, 0.1).sparse);
}

// SGD and Adagrad leave a row with a zero gradient as it is, so their
// sparse rule is the dense rule; momentum has no sparse rule and goes
// through the host's fallback (the rows made dense next to the variable).
TEST(SparseUpdates, SgdAdagradAndTheDenseFallbackMatchTheDenseRule) {
  RuntimeEnv env;
  for (const char* optimizer : {"sgd", "adagrad", "momentum"}) {
    const Trained sparse = Train(env, Model(false), optimizer, true, 4, 0.05);
    const Trained dense = Train(env, Model(false), optimizer, false, 4, 0.05);
    EXPECT_TRUE(sparse.sparse) << optimizer;
    ExpectNear(sparse.e, dense.e, 1e-12, optimizer);
    ExpectNear(sparse.first_slot, dense.first_slot, 1e-12, std::string(optimizer) + " slot");
    // And something moved.
    EXPECT_GT(std::fabs(sparse.e[1 * kCols] - InitialE()[1 * kCols]), 1e-4) << optimizer;
  }
}

TEST(SparseUpdates, AdamUpdatesTheRowsReadAsSparseAdam) {
  // The learning rate is fed as f32 (the trainer's placeholder) and cast.
  const double lr = static_cast<float>(0.05), b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const int steps = 3;
  // torch.optim.SparseAdam, by hand.
  std::vector<double> e = InitialE(), m(kRows * kCols, 0), v(kRows * kCols, 0);
  const std::vector<double> c = C();
  for (int t = 1; t <= steps; ++t) {
    std::map<int64_t, std::vector<double>> grad;  // row -> gradient
    for (std::size_t p = 0; p < kIds.size(); ++p) {
      auto& g = grad[kIds[p]];
      g.resize(kCols, 0);
      for (int j = 0; j < kCols; ++j) g[j] += 2 * e[kIds[p] * kCols + j] * c[p * kCols + j];
    }
    const double step_size = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    for (const auto& [row, g] : grad) {
      for (int j = 0; j < kCols; ++j) {
        const std::size_t k = static_cast<std::size_t>(row * kCols + j);
        m[k] += (1 - b1) * (g[j] - m[k]);
        v[k] += (1 - b2) * (g[j] * g[j] - v[k]);
        e[k] -= step_size * m[k] / (std::sqrt(v[k]) + eps);
      }
    }
  }
  RuntimeEnv env;
  const Trained got = Train(env, Model(false), "adam", true, steps, 0.05);
  EXPECT_TRUE(got.sparse);
  ExpectNear(got.e, e, 1e-12, "E");
  ExpectNear(got.first_slot, m, 1e-12, "m");
  // Rows 2 and 3 were never read: untouched, moments at 0.
  for (int j = 0; j < kCols; ++j) {
    EXPECT_EQ(got.e[2 * kCols + j], InitialE()[2 * kCols + j]);
    EXPECT_EQ(got.first_slot[3 * kCols + j], 0.0);
  }
}

// The graph split in 3 parts (rows 2, 2, 2) computes what the whole one
// does: same loss, same trained E once the parts are joined.
TEST(PartitionedVariables, ASplitGraphTrainsLikeTheWholeOne) {
  RuntimeEnv env;
  const Graph model = Model(false);
  auto split = dist::PartitionVariables(model, 3, /*threshold_bytes=*/0, "");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->variables.size(), 1u);
  EXPECT_EQ(split->graph.Find("E"), nullptr);
  ASSERT_NE(split->graph.Find("E/part_2"), nullptr);
  const Trained whole = Train(env, model, "adagrad", true, 3, 0.1);
  std::vector<double> joined;
  for (int k = 0; k < 3; ++k) {
    const Trained part = Train(env, split->graph, "adagrad", true, 3, 0.1, "E/part_" + std::to_string(k));
    EXPECT_TRUE(part.sparse) << k;
    joined.insert(joined.end(), part.e.begin(), part.e.end());
  }
  ExpectNear(joined, whole.e, 1e-12, "E joined from its parts");
}

TEST(PartitionedVariables, SplitRowsGivesTheFirstPartsTheExtraRows) {
  const auto parts = dist::SplitRows("v", 10, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].name, "v/part_0");
  EXPECT_EQ(parts[0].rows, 4);
  EXPECT_EQ(parts[1].offset, 4);
  EXPECT_EQ(parts[1].rows, 3);
  EXPECT_EQ(parts[2].offset, 7);
  EXPECT_EQ(parts[2].rows, 3);
}

TEST(PartitionedVariables, ParsePartNameFindsThePartComponent) {
  EXPECT_EQ(dist::ParsePartName("emb/part_1/adam/m").whole, "emb/adam/m");
  EXPECT_EQ(dist::ParsePartName("emb/part_1/adam/m").part, 1);
  EXPECT_EQ(dist::ParsePartName("emb/part_12").part, 12);
  EXPECT_EQ(dist::ParsePartName("emb/part_x").part, -1);
  EXPECT_EQ(dist::ParsePartName("emb/partial_1").part, -1);
  EXPECT_EQ(dist::ParsePartName("emb").whole, "emb");
  EXPECT_EQ(dist::ParsePartName("emb/part_99999999999999999999").part, -1);
}

TEST(PartitionedVariables, SmallVariablesStayWhole) {
  const Graph model = Model(false);
  auto split = dist::PartitionVariables(model, 2, /*threshold_bytes=*/kRows * kCols * 8, "");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_TRUE(split->variables.empty());
  EXPECT_NE(split->graph.Find("E"), nullptr);
}

TEST(PartitionedVariables, AnOpThatCannotUseASplitVariableIsNamed) {
  GraphBuilder b;
  Output e = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{4, 2})}}, "E");
  b.Op("AssignAdd", {e, b.Const(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{4, 2}))}, {}, "bump");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto split = dist::PartitionVariables(*graph, 2, 0, "");
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("node \"bump\" (AssignAdd) uses variable \"E\" (f32[4,2]"), std::string::npos)
      << split.status().ToString();
  EXPECT_NE(split.status().message().find("raise [cluster] partition_mb"), std::string::npos);
}

}  // namespace
}  // namespace weft
