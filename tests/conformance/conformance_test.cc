// The conformance suite: the conformance kit (tools/conformance/kit.h, what
// `weft conformance` runs) over every built device: every case of
// gen_cases.py (inputs and NumPy's expected outputs) run on every device
// that has a kernel for the op and the case's dtypes, compared with
// dtype-aware tolerances; with more than one device, the devices are also
// compared with each other. One gtest per op.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "core/runtime/op_kernel.h"
#include "tests/conformance/op_tests.h"
#include "tests/support/runtime_env.h"
#include "tools/conformance/kit.h"

namespace weft {
namespace {

conformance::CaseSet g_set;
testing::RuntimeEnv* g_env = nullptr;
std::map<std::string, int> g_ran;  // cases run, by device

// The devices that can run |op|.
std::vector<std::string> DevicesFor(const std::string& op) {
  std::vector<std::string> names;
  for (const auto& d : g_env->devices()->devices()) {
    if (runtime::IsRuntimeOp(op) || !d->kernels().ForOp(op).empty()) names.push_back(d->name());
  }
  return names;
}

// Each case on every device with a kernel for it, through the kit; with
// more than one device, the devices also agree with each other.
void RunOpCases(const std::string& op) {
  const std::vector<std::string> devices = DevicesFor(op);
  ASSERT_FALSE(devices.empty()) << "no device has a kernel for " << op;
  for (const cases::Case& c : g_set.by_op[op]) {
    std::vector<conformance::CaseOutcome> ran;
    for (const std::string& device : devices) {
      conformance::CaseOutcome outcome = conformance::RunCase(c, g_set.dir, g_env->devices(), device);
      if (!outcome.supported) continue;
      ++g_ran[device];
      EXPECT_EQ(outcome.failure, "") << "case " << c.name << " on " << device;
      if (outcome.failure.empty() && c.error.empty()) ran.push_back(std::move(outcome));
    }
    for (std::size_t d = 1; d < ran.size(); ++d) {
      for (std::size_t i = 0; i < ran[0].outputs.size(); ++i) {
        const std::string diff =
            cases::Compare(ran[d].outputs[i], ran[0].outputs[i], ran[0].outputs[i].dtype(), c.rtol, c.atol);
        EXPECT_EQ(diff, "") << "case " << c.name << ": " << ran[d].device << " differs from " << ran[0].device
                            << " in output " << i;
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
      {"GradientAccumulator", "sync_ops_test.cc (accumulators and step tokens: stale, late, timeouts, threads)"},
      {"AccumulatorApplyGradient", "sync_ops_test.cc"},
      {"AccumulatorTakeGradient", "sync_ops_test.cc (the mean against a hand sum, in replica order)"},
      {"AccumulatorSetGlobalStep", "sync_ops_test.cc"},
      {"StepTokenQueue", "sync_ops_test.cc"},
      {"StepTokenPut", "sync_ops_test.cc"},
      {"StepTokenTake", "sync_ops_test.cc"},
      {"StepTokenClose", "sync_ops_test.cc"},
      {"CollectiveAllReduce", "collectives_test.cc (ranks as threads over the gloo plugin, against hand sums)"},
      {"CollectiveBroadcast", "collectives_test.cc"},
      {"CollectiveAllGather", "collectives_test.cc"},
  };
  return exempt;
}

TEST(Conformance, EveryOpHasCases) {
  for (const OpDef* op : OpRegistry::Global().All()) {
    if (op->name[0] == '_' || Exempt().count(op->name) != 0) continue;
    EXPECT_FALSE(g_set.by_op[op->name].empty()) << op->name << " has no conformance case";
  }
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto set = weft::conformance::LoadCases(WEFT_CONFORMANCE_DIR);
  if (!set.ok()) {
    std::fprintf(stderr, "%s\n", set.status().ToString().c_str());
    return 1;
  }
  weft::g_set = std::move(*set);
  weft::testing::RuntimeEnv env(std::getenv("WEFT_CONFORMANCE_CONFIG") ? std::getenv("WEFT_CONFORMANCE_CONFIG") : "");
  weft::g_env = &env;
  std::vector<std::string> ops;
  for (const auto& entry : weft::g_set.by_op) ops.push_back(entry.first);
  weft::cases::RegisterOpTests("Conformance", ops, weft::RunOpCases);
  const int result = RUN_ALL_TESTS();
  for (const auto& [device, count] : weft::g_ran) std::printf("%d cases ran on %s\n", count, device.c_str());
  return result;
}
