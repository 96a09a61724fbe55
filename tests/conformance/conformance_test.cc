// The conformance suite: every case of gen_cases.py (inputs and NumPy's
// expected outputs) run on every device that has a kernel for the op and
// the case's dtypes, and
// compared with dtype-aware tolerances; with more than one device, the
// devices are also compared with each other. One gtest per op.
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cmath>
#include <map>
#include <memory>

#include "core/graph/builder.h"
#include "core/runtime/op_kernel.h"
#include "core/tensor/npy.h"
#include "tests/integration/runtime_env.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

struct IoSpec {
  std::string file;
  bool bf16 = false;
};

struct Case {
  std::string name;
  std::string op;
  std::vector<IoSpec> inputs;
  std::vector<IoSpec> outputs;
  std::string error;
  double rtol = 0;
  double atol = 0;
  // Zeros must carry the sign NumPy gives them (where IEEE defines it).
  bool signed_zeros = false;
  const toml::table* attrs = nullptr;
};

std::string g_dir;
toml::table g_document;
std::map<std::string, std::vector<Case>> g_cases;  // by op
testing::RuntimeEnv* g_env = nullptr;
std::map<std::string, int> g_ran;  // cases run, by device

std::vector<IoSpec> ReadSpecs(const toml::array* array) {
  std::vector<IoSpec> specs;
  if (array == nullptr) return specs;
  for (const toml::node& n : *array) {
    const toml::table& t = *n.as_table();
    specs.push_back({t["file"].value_or(std::string()), t["dtype"].value_or(std::string()) == "bf16"});
  }
  return specs;
}

Expected<Tensor> LoadTensor(const IoSpec& spec) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, ReadNpy(g_dir + "/" + spec.file));
  if (!spec.bf16) return t;
  WEFT_ASSIGN_OR_RETURN(Tensor b, Tensor::Allocate(DType::kBF16, t.shape()));
  for (int64_t i = 0; i < t.num_elements(); ++i) b.data<uint16_t>()[i] = sdk::FloatToBfloat16(t.data<float>()[i]);
  return b;
}

// The case's attrs, converted by the types the op declares.
Expected<AttrMap> Attrs(const Case& c, const OpDef& op) {
  AttrMap out;
  if (c.attrs == nullptr) return out;
  for (const auto& [key, node] : *c.attrs) {
    const std::string name(key.str());
    const AttrDef* def = op.FindAttr(name);
    if (def == nullptr) return InvalidArgumentError("case attr ", Quote(name), " is not an attr of ", op.name);
    switch (def->type) {
      case AttrType::kType: {
        auto d = ParseDType(node.value_or(std::string()));
        if (!d) return InvalidArgumentError("attr ", name, ": bad dtype");
        out[name] = AttrValue(*d);
        break;
      }
      case AttrType::kString: out[name] = AttrValue(node.value_or(std::string())); break;
      case AttrType::kInt: out[name] = AttrValue(node.value_or(int64_t{0})); break;
      case AttrType::kFloat: out[name] = AttrValue(node.value_or(0.0)); break;
      case AttrType::kBool: out[name] = AttrValue(node.value_or(false)); break;
      case AttrType::kIntList:
      case AttrType::kShape: {
        std::vector<int64_t> values;
        for (const toml::node& e : *node.as_array()) values.push_back(e.value_or(int64_t{0}));
        if (def->type == AttrType::kShape) {
          out[name] = AttrValue(Shape(values));
        } else {
          out[name] = AttrValue(values);
        }
        break;
      }
      case AttrType::kFloatList: {
        std::vector<double> values;
        for (const toml::node& e : *node.as_array()) values.push_back(e.value_or(0.0));
        out[name] = AttrValue(values);
        break;
      }
      default:
        return InvalidArgumentError("attr ", name, ": type ", AttrTypeName(def->type), " not supported in cases");
    }
  }
  return out;
}

double AsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[i];
    case DType::kF64: return t.data<double>()[i];
    case DType::kF16: return sdk::HalfToFloat(t.data<uint16_t>()[i]);
    case DType::kBF16: return sdk::Bfloat16ToFloat(t.data<uint16_t>()[i]);
    case DType::kI8: return t.data<int8_t>()[i];
    case DType::kI16: return t.data<int16_t>()[i];
    case DType::kI32: return t.data<int32_t>()[i];
    case DType::kI64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kU8: return t.data<uint8_t>()[i];
    case DType::kBool: return t.data<bool>()[i] ? 1 : 0;
    default: return std::nan("");
  }
}

// Empty when |got| matches |want| within tolerance; else what differs.
std::string Compare(const Tensor& got, const Tensor& want, DType want_dtype, double rtol, double atol,
                    bool signed_zeros = false) {
  if (got.dtype() != want_dtype) return StrCat("dtype ", DTypeName(got.dtype()), ", expected ", DTypeName(want_dtype));
  if (got.shape() != want.shape())
    return StrCat("shape ", got.shape().ToString(), ", expected ", want.shape().ToString());
  const bool integral = !IsFloating(want_dtype);
  std::string report;
  int bad = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (integral && want_dtype == DType::kI64 && got.data<int64_t>()[i] != want.data<int64_t>()[i]) {
      if (bad++ < 5)
        report += StrCat(" [", i, "] got ", got.data<int64_t>()[i], " want ", want.data<int64_t>()[i], ";");
      continue;
    }
    const double g = AsDouble(got, i), w = AsDouble(want, i);
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else if (signed_zeros && w == 0) {
      ok = g == 0 && std::signbit(g) == std::signbit(w);
    } else if (integral) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    }
    if (!ok && bad++ < 5) report += StrCat(" [", i, "] got ", g, " want ", w, ";");
  }
  if (bad == 0) return "";
  return StrCat(bad, " of ", got.num_elements(), " elements differ:", report);
}

DType ExpectedDType(const Tensor& file_tensor, const IoSpec& spec) {
  return spec.bf16 ? DType::kBF16 : file_tensor.dtype();
}

// The one-op graph of |c|, its nodes on |device|.
Expected<Graph> CaseGraph(const Case& c, const std::string& device) {
  const OpDef* op = OpRegistry::Global().Find(c.op);
  if (op == nullptr) return InternalError("unknown op ", c.op);
  WEFT_ASSIGN_OR_RETURN(AttrMap attrs, Attrs(c, *op));
  GraphBuilder b;
  std::vector<Output> inputs;
  {
    auto scope = b.DeviceScope(device);
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, LoadTensor(c.inputs[i]));
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
  for (const toml::node& node : *weft::g_document["case"].as_array()) {
    const toml::table& t = *node.as_table();
    weft::Case c;
    c.name = t["name"].value_or(std::string());
    c.op = t["op"].value_or(std::string());
    c.inputs = weft::ReadSpecs(t["inputs"].as_array());
    c.outputs = weft::ReadSpecs(t["outputs"].as_array());
    c.error = t["error"].value_or(std::string());
    c.rtol = t["rtol"].value_or(0.0);
    c.atol = t["atol"].value_or(0.0);
    c.signed_zeros = t["signed_zeros"].value_or(false);
    c.attrs = t["attrs"].as_table();
    weft::g_cases[c.op].push_back(std::move(c));
  }
  weft::testing::RuntimeEnv env(std::getenv("WEFT_CONFORMANCE_CONFIG") ? std::getenv("WEFT_CONFORMANCE_CONFIG") : "");
  weft::g_env = &env;
  for (const auto& [op, cases] : weft::g_cases) {
    const std::string name = op;
    ::testing::RegisterTest("Conformance", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [name]() -> ::testing::Test* {
                              struct OpTest : ::testing::Test {
                                std::string op;
                                explicit OpTest(std::string o) : op(std::move(o)) {}
                                void TestBody() override { weft::RunOpCases(op); }
                              };
                              return new OpTest(name);
                            });
  }
  const int result = RUN_ALL_TESTS();
  for (const auto& [device, count] : weft::g_ran) std::printf("%d cases ran on %s\n", count, device.c_str());
  return result;
}
