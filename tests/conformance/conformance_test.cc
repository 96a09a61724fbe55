// The conformance suite: every case of gen_cases.py (inputs and NumPy's
// expected outputs) run on every device that has a kernel for the op and
// the case's dtypes, and
// compared with dtype-aware tolerances; with more than one device, the
// devices are also compared with each other. One gtest per op.
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <map>
#include <memory>

#include "core/graph/builder.h"
#include "core/runtime/op_kernel.h"
#include "core/tensor/npy.h"
#include "tests/conformance/case_io.h"
#include "tests/integration/runtime_env.h"

namespace weft {
namespace {

using cases::Case;
using cases::Compare;
using cases::ExpectedDType;

std::string g_dir;
toml::table g_document;
std::map<std::string, std::vector<Case>> g_cases;  // by op
testing::RuntimeEnv* g_env = nullptr;
std::map<std::string, int> g_ran;  // cases run, by device

// The one-op graph of |c|, its nodes on |device|.
Expected<Graph> CaseGraph(const Case& c, const std::string& device) {
  const OpDef* op = OpRegistry::Global().Find(c.op);
  if (op == nullptr) return InternalError("unknown op ", c.op);
  WEFT_ASSIGN_OR_RETURN(AttrMap attrs, cases::Attrs(c, *op));
  GraphBuilder b;
  std::vector<Output> inputs;
  {
    auto scope = b.DeviceScope(device);
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, cases::LoadTensor(g_dir, c.inputs[i]));
      inputs.push_back(b.Const(t, StrCat("in", i)));
    }
    b.AddNode(c.op, inputs, attrs, "op");
  }
  return b.Build();
}

// Whether |device| has a kernel for the case's binding of type attrs: a
// device may implement an op for some dtypes only (OpenCL has no f16).
// A case whose graph does not build (a shape error) runs everywhere.
bool Supports(const Case& c, const runtime::RuntimeDevice& device) {
  if (runtime::IsRuntimeOp(c.op)) return true;
  auto graph = CaseGraph(c, device.name());
  if (!graph.ok()) return true;
  const Graph::Node* node = graph->Find("op");
  for (const weft_kernel_def_t* def : device.kernels().ForOp(c.op)) {
    bool matches = true;
    for (size_t i = 0; i < def->num_constraints && matches; ++i) {
      auto it = node->def.attrs.find(def->constraint_attrs[i]);
      matches = it != node->def.attrs.end() && it->second.holds<DType>() &&
                static_cast<weft_dtype_t>(it->second.get<DType>()) == def->constraint_dtypes[i];
    }
    if (matches) return true;
  }
  return false;
}

// Runs |c| on |device|; returns the outputs or the error.
Expected<std::vector<Tensor>> RunCase(const Case& c, const std::string& device) {
  WEFT_ASSIGN_OR_RETURN(Graph graph, CaseGraph(c, device));
  auto session = runtime::Session::Create(std::move(graph), g_env->devices());
  WEFT_RETURN_IF_ERROR(session.status());
  std::vector<std::string> fetches;
  const Graph::Node* node = (*session)->graph().Find("op");
  for (int i = 0; i < node->num_outputs(); ++i) fetches.push_back(InputRefString("op", i));
  std::vector<Tensor> out;
  if (fetches.empty()) {
    WEFT_RETURN_IF_ERROR((*session)->Run({}, {}, {"op"}, &out));
  } else {
    WEFT_RETURN_IF_ERROR((*session)->Run({}, fetches, {}, &out));
  }
  return out;
}

// The devices that can run |op|.
std::vector<std::string> DevicesFor(const std::string& op) {
  std::vector<std::string> names;
  for (const auto& d : g_env->devices()->devices()) {
    if (runtime::IsRuntimeOp(op) || !d->kernels().ForOp(op).empty()) names.push_back(d->name());
  }
  return names;
}

void RunOpCases(const std::string& op) {
  const std::vector<std::string> devices = DevicesFor(op);
  ASSERT_FALSE(devices.empty()) << "no device has a kernel for " << op;
  for (const Case& c : g_cases[op]) {
    std::vector<std::vector<Tensor>> results;
    std::vector<std::string> ran_on;
    for (const std::string& device : devices) {
      if (!Supports(c, *g_env->devices()->Find(device))) continue;
      ++g_ran[device];
      SCOPED_TRACE(StrCat("case ", c.name, " on ", device));
      auto out = RunCase(c, device);
      if (!c.error.empty()) {
        EXPECT_FALSE(out.ok()) << "expected an error containing \"" << c.error << "\"";
        if (!out.ok()) {
          EXPECT_NE(out.status().message().find(c.error), std::string::npos) << out.status().message();
        }
        continue;
      }
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      ASSERT_EQ(out->size(), c.outputs.size());
      for (std::size_t i = 0; i < c.outputs.size(); ++i) {
        auto want = ReadNpy(g_dir + "/" + c.outputs[i].file);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        const std::string diff =
            Compare((*out)[i], *want, ExpectedDType(*want, c.outputs[i]), c.rtol, c.atol, c.signed_zeros);
        EXPECT_EQ(diff, "") << "output " << i;
      }
      results.push_back(std::move(*out));
      ran_on.push_back(device);
    }
    // Devices agree with each other, too.
    for (std::size_t d = 1; d < results.size(); ++d) {
      for (std::size_t i = 0; i < results[0].size(); ++i) {
        const std::string diff = Compare(results[d][i], results[0][i], results[0][i].dtype(), c.rtol, c.atol);
        EXPECT_EQ(diff, "") << "case " << c.name << ": " << ran_on[d] << " differs from " << ran_on[0] << " in output "
                            << i;
      }
    }
  }
}

// Ops whose results NumPy cannot predict, or that change variables (a
// case builds a one-op graph of constants), tested elsewhere.
const std::map<std::string, std::string>& Exempt() {
  static const std::map<std::string, std::string> exempt = {
      {"RandomUniform", "random_test.cc checks distribution and determinism"},
      {"RandomNormal", "random_test.cc"},
      {"TruncatedNormal", "random_test.cc"},
      {"RandomShuffle", "random_test.cc"},
      {"VarHandle", "session_test.cc (variables)"},
      {"ReadVariable", "session_test.cc"},
      {"Assign", "session_test.cc"},
      {"AssignAdd", "session_test.cc"},
      {"AssignSub", "variable_test.cc"},
      {"ResourceGather", "variable_test.cc"},
      {"ResourceScatterAdd", "variable_test.cc"},
      {"VarIsInitialized", "session_test.cc"},
      {"Placeholder", "session_test.cc (feeds)"},
      {"NoOp", "session_test.cc (targets)"},
      {"ResourceApplyGradientDescent", "apply_ops_test.cc (stateful: updates variables)"},
      {"ResourceApplyMomentum", "apply_ops_test.cc"},
      {"ResourceApplyAdam", "apply_ops_test.cc"},
      {"ResourceApplyAdamW", "apply_ops_test.cc"},
      {"ResourceApplyRMSProp", "apply_ops_test.cc"},
      {"ResourceApplyCenteredRMSProp", "apply_ops_test.cc"},
      {"ResourceApplyAdagrad", "apply_ops_test.cc"},
      {"Save", "checkpoint_ops_test.cc (round trip through a session, errors)"},
      {"SaveShard",
       "checkpoint_test.cc (sharded bundles) and ps_train_test.cc "
       "(a cluster's checkpoint)"},
      {"Restore", "checkpoint_ops_test.cc"},
      {"FIFOQueue", "queue_test.cc (queues: order, capacity, close, threads)"},
      {"RandomShuffleQueue", "queue_test.cc (seeded order against shuffle_reference.py)"},
      {"QueueEnqueueMany", "queue_test.cc"},
      {"QueueDequeueMany", "queue_test.cc"},
      {"QueueClose", "queue_test.cc"},
      {"Switch", "loop_executor_test.cc (control flow: frames, iterations, dead values)"},
      {"Merge", "loop_executor_test.cc"},
      {"Enter", "loop_executor_test.cc"},
      {"Exit", "loop_executor_test.cc"},
      {"NextIteration", "loop_executor_test.cc"},
      {"LoopCond", "loop_executor_test.cc"},
      {"QueueSize", "queue_test.cc"},
      {"Stack", "stack_test.cc (per-step stacks: push and pop by index, errors)"},
      {"StackPush", "stack_test.cc"},
      {"StackPop", "stack_test.cc"},
  };
  return exempt;
}

TEST(Conformance, EveryOpHasCases) {
  for (const OpDef* op : OpRegistry::Global().All()) {
    if (op->name[0] == '_' || Exempt().count(op->name) != 0) continue;
    EXPECT_FALSE(g_cases[op->name].empty()) << op->name << " has no conformance case";
  }
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  weft::g_dir = WEFT_CONFORMANCE_DIR;
  try {
    weft::g_document = toml::parse_file(weft::g_dir + "/cases.toml");
  } catch (const toml::parse_error& e) {
    std::fprintf(stderr, "cannot read %s/cases.toml: %s\n", weft::g_dir.c_str(), std::string(e.description()).c_str());
    return 1;
  }
  for (weft::cases::Case& c : weft::cases::ReadCases(weft::g_document)) {
    std::string op = c.op;
    weft::g_cases[op].push_back(std::move(c));
  }
  weft::testing::RuntimeEnv env(std::getenv("WEFT_CONFORMANCE_CONFIG") ? std::getenv("WEFT_CONFORMANCE_CONFIG") : "");
  weft::g_env = &env;
  std::vector<std::string> ops;
  for (const auto& entry : weft::g_cases) ops.push_back(entry.first);
  weft::cases::RegisterOpTests("Conformance", ops, weft::RunOpCases);
  const int result = RUN_ALL_TESTS();
  for (const auto& [device, count] : weft::g_ran) std::printf("%d cases ran on %s\n", count, device.c_str());
  return result;
}
