// The graph optimizer changes no result (docs/optimizer.md): every graph
// the tests have runs at level 0 and at each level, and the outputs agree.
//  - every op conformance case (tests/conformance/gen_cases.py), as its
//    one-op graph of constants on the CPU: at level 1 the op itself is
//    folded on the host, so this also checks that folding computes what
//    the run would have, bitwise, and that a case that fails fails with
//    the same message;
//  - the sample models of configs/models (the MLPs, the CNNs, the
//    bag-of-words model, the character LSTM's loop), initialised, with
//    seeded inputs, every output they have.
// The level-1 passes change no arithmetic, so results must be bitwise
// equal; the levels above allow 1e-5 relative (none has passes of its own
// yet, so they are run only when their pass list differs).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "core/graph/serialize.h"
#include "core/passes/pass.h"
#include "core/runtime/op_kernel.h"
#include "tests/support/runtime_env.h"
#include "tools/conformance/kit.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

// The levels worth comparing with level 0: each whose passes differ from
// the level below it.
std::vector<int> Levels() {
  std::vector<int> levels;
  std::size_t seen = 0;
  for (int level = 1; level <= passes::kMaxLevel; ++level) {
    std::size_t n = 0;
    for (const passes::PassInfo& p : passes::ListPasses()) n += p.level <= level ? 1 : 0;
    if (n != seen) levels.push_back(level);
    seen = n;
  }
  return levels;
}

struct Outcome {
  Status status;
  std::vector<Tensor> outputs;
  int64_t rewrites = 0;
};

Outcome RunAt(const Graph& graph, int level, const std::vector<std::pair<std::string, Tensor>>& feeds,
              const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
              const std::vector<std::string>& first_targets = {},
              std::shared_ptr<runtime::DeviceSet> devices = nullptr) {
  Outcome out;
  if (devices == nullptr) devices = testing::SharedRuntimeEnv().devices();
  runtime::SessionOptions options;
  options.optimizer.level = level;
  options.placement.soft = false;
  auto session = runtime::Session::Create(Graph(graph), devices, options);
  if (!session.ok()) {
    out.status = session.status();
    return out;
  }
  if (!first_targets.empty()) {
    out.status = (*session)->Run({}, {}, first_targets, nullptr);
    if (!out.status.ok()) return out;
  }
  out.status = (*session)->Run(feeds, fetches, targets, &out.outputs);
  for (const passes::PassReport& r : (*session)->last_optimization()) out.rewrites += r.changed;
  return out;
}

// "" when |got| and |want| agree: bitwise, or within |rtol| of the largest
// magnitude of |want| for floats when |rtol| > 0.
std::string Differs(const Tensor& got, const Tensor& want, double rtol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return StrCat(got.TypeString(), " vs ", want.TypeString());
  }
  if (got.BitwiseEquals(want)) return "";
  if (rtol <= 0 || (got.dtype() != DType::kF32 && got.dtype() != DType::kF64)) return "not bitwise equal";
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    const double w = want.dtype() == DType::kF32 ? want.data<float>()[i] : want.data<double>()[i];
    const double g = got.dtype() == DType::kF32 ? got.data<float>()[i] : got.data<double>()[i];
    if (std::isnan(w) != std::isnan(g)) return StrCat("NaN at element ", i);
    if (std::isnan(w)) continue;
    scale = std::max(scale, std::fabs(w));
    worst = std::max(worst, std::fabs(g - w));
  }
  return worst <= rtol * std::max(scale, 1e-30) ? "" : StrCat("relative error ", worst / scale);
}

TEST(OptimizerDifferential, EveryConformanceCaseGivesTheSameResultAtEveryLevel) {
  auto set = conformance::LoadCases(WEFT_CONFORMANCE_DIR);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const std::string cpu = testing::SharedRuntimeEnv().devices()->default_device()->name();
  int cases = 0, folded = 0, errors = 0;
  for (const auto& [op, list] : set->by_op) {
    for (const cases::Case& c : list) {
      auto graph = conformance::CaseGraph(c, set->dir, cpu);
      if (!graph.ok()) continue;  // the builder refuses it: no run to compare
      const Graph::Node* node = graph->Find("op");
      std::vector<std::string> fetches, targets;
      for (int i = 0; i < node->num_outputs(); ++i) fetches.push_back(InputRefString("op", i));
      if (fetches.empty()) targets.push_back("op");
      const Outcome base = RunAt(*graph, 0, {}, fetches, targets);
      for (int level : Levels()) {
        const Outcome got = RunAt(*graph, level, {}, fetches, targets);
        ASSERT_EQ(got.status.ok(), base.status.ok())
            << c.name << " at level " << level << ": " << got.status.ToString() << " / " << base.status.ToString();
        if (!base.status.ok()) {
          EXPECT_EQ(got.status.message(), base.status.message()) << c.name << " at level " << level;
          ++errors;
          continue;
        }
        ASSERT_EQ(got.outputs.size(), base.outputs.size()) << c.name;
        for (std::size_t i = 0; i < base.outputs.size(); ++i) {
          EXPECT_EQ(Differs(got.outputs[i], base.outputs[i], level > 1 ? 1e-5 : 0), "")
              << c.name << " output " << i << " at level " << level;
        }
        folded += got.rewrites > 0 ? 1 : 0;
      }
      ++cases;
    }
  }
  std::cout << cases << " conformance cases compared at levels 0 and " << StrJoin(Levels(), ", ") << "; " << folded
            << " of them rewritten (folded on the host), " << errors << " failing the same way at every level"
            << std::endl;
  EXPECT_GT(cases, 500);
  EXPECT_GT(folded, cases / 2);
}

// Seeded values for a Placeholder: floats in [-1, 1), integers in {0, 1}
// (labels, token ids and lengths the sample models all accept), unknown
// dimensions 4.
Tensor Seeded(DType dtype, const Shape& declared, std::mt19937& rng) {
  std::vector<int64_t> dims;
  for (int64_t d : declared.dims()) dims.push_back(d < 0 ? 4 : d);
  Tensor t = *Tensor::Allocate(dtype, Shape(dims));
  std::uniform_real_distribution<float> real(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (dtype) {
      case DType::kF32: t.data<float>()[i] = real(rng); break;
      case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 2); break;
      case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 2); break;
      case DType::kU8: t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 2); break;
      default: std::memset(t.raw_data(), 0, t.byte_size());
    }
  }
  return t;
}

TEST(OptimizerDifferential, EverySampleModelGivesTheSameOutputsAtEveryLevel) {
  int models = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(WEFT_SOURCE_DIR) / "configs" / "models")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".wgt" && entry.path().extension() != ".wg") continue;
    auto def = ReadGraphFile(path);
    ASSERT_TRUE(def.ok()) << def.status().ToString();
    auto graph = Graph::FromGraphDef(std::move(*def));
    ASSERT_TRUE(graph.ok()) << path << ": " << graph.status().ToString();
    std::mt19937 rng(7);
    std::vector<std::pair<std::string, Tensor>> feeds;
    std::vector<std::string> fetches;
    for (const Graph::Node& node : graph->nodes()) {
      if (node.op_name() == "Placeholder") {
        feeds.emplace_back(node.name(), Seeded(node.output_types[0], node.output_shapes[0], rng));
      }
    }
    // Every output nothing reads (the model's outputs, loss and metrics),
    // but not the initialiser's or the training step's updates.
    for (const Graph::Node& node : graph->nodes()) {
      if (node.op->stateful || node.num_outputs() == 0) continue;
      if (!graph->consumers()[static_cast<std::size_t>(node.id)].empty()) continue;
      bool resource = false;
      for (DType t : node.output_types) resource = resource || t == DType::kResource;
      if (resource) continue;
      for (int k = 0; k < node.num_outputs(); ++k) fetches.push_back(InputRefString(node.name(), k));
    }
    ASSERT_FALSE(fetches.empty()) << path;
    std::vector<std::string> init;
    if (graph->Find("init") != nullptr) init.push_back("init");
    // Devices of its own: variables live in a device's resources, and two
    // models may name different variables alike.
    testing::RuntimeEnv env;
    const Outcome base = RunAt(*graph, 0, feeds, fetches, {}, init, env.devices());
    ASSERT_TRUE(base.status.ok()) << path << ": " << base.status.ToString();
    for (int level : Levels()) {
      const Outcome got = RunAt(*graph, level, feeds, fetches, {}, init, env.devices());
      ASSERT_TRUE(got.status.ok()) << path << " at level " << level << ": " << got.status.ToString();
      for (std::size_t i = 0; i < fetches.size(); ++i) {
        EXPECT_EQ(Differs(got.outputs[i], base.outputs[i], level > 1 ? 1e-5 : 0), "")
            << path << ": " << fetches[i] << " at level " << level;
      }
      std::cout << entry.path().filename().string() << ": " << fetches.size() << " outputs agree at level " << level
                << " (" << got.rewrites << " rewrites)" << std::endl;
    }
    ++models;
  }
  EXPECT_GE(models, 6);
}

}  // namespace
}  // namespace weft
