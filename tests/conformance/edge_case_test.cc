// The edge-case suite: every op, for every dtype binding its CPU kernels
// register, fed the edge values of that dtype (NaN, +-inf, +-0, the
// smallest subnormal, the largest finite, the lowest and highest integers,
// -1, 0, 1), empty tensors, scalars, ranks 0 to 8 and broadcasting corners,
// against NumPy's values. The cases are not written by hand: at start the
// test writes the kernels the CPU plugin registers (kernels.toml) and runs
// gen_edge_cases.py, which generates, per op family, the cases of every
// binding and computes the references with NumPy.
//
// Each case runs three ways:
//   static   the inputs are constants: every shape is known while building;
//   unknown  the inputs are fed to placeholders of unknown rank: shape
//            inference knows nothing and the kernel's own checks must hold;
//   poison   as static, with every output buffer filled with 0xA5 bytes
//            before the kernel runs: an element the kernel leaves
//            unwritten shows as a difference.
// The conformance cases (conformance_test) are replayed the same three
// ways, so every op with a conformance case also runs with unknown shapes
// and poisoned outputs. A failure names the op, the dtype binding, the
// case (its inputs are the .npy files it names) and the first elements
// that differ. See docs/development.md "The edge-case suite".
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/graph/builder.h"
#include "core/runtime/op_kernel.h"
#include "tests/conformance/op_tests.h"
#include "tests/support/runtime_env.h"
#include "tools/conformance/case_io.h"

namespace weft {
namespace {

using cases::Case;

enum class Mode { kStatic, kUnknown, kPoison };
constexpr Mode kModes[] = {Mode::kStatic, Mode::kUnknown, Mode::kPoison};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kStatic: return "static shapes";
    case Mode::kUnknown: return "unknown shapes";
    case Mode::kPoison: return "poisoned outputs";
  }
  return "?";
}

struct Source {
  std::string dir;
  std::string label;  // "edge" or "conformance"
  toml::table document;
};

// Type attr -> dtype name.
using Binding = std::map<std::string, std::string>;

struct OpCases {
  std::vector<std::pair<const Source*, Case>> cases;
  std::vector<Binding> bindings;  // the dtype bindings of the edge cases
};

testing::RuntimeEnv* g_env = nullptr;
std::map<std::string, OpCases> g_ops;
std::map<std::string, std::string> g_exempt;        // op -> why it has no generated cases
std::map<std::string, std::string> g_skipped;       // "op binding" -> why
std::map<std::string, std::array<int, 2>> g_count;  // op -> {edge cases, conformance cases}
const runtime::RuntimeDevice* g_cpu = nullptr;

Binding KernelBinding(const weft_kernel_def_t& def) {
  Binding out;
  for (size_t i = 0; i < def.num_constraints; ++i) {
    out[def.constraint_attrs[i]] = std::string(DTypeName(static_cast<DType>(def.constraint_dtypes[i])));
  }
  return out;
}

// "T=f32" or "DstT=f16,SrcT=f64".
std::string BindingName(const Binding& binding) {
  std::string out;
  for (const auto& [attr, dtype] : binding) out += (out.empty() ? "" : ",") + attr + "=" + dtype;
  return out;
}

// Whether |have| sets every attr of |want| as |want| does.
bool Covers(const Binding& have, const Binding& want) {
  for (const auto& [attr, dtype] : want) {
    auto it = have.find(attr);
    if (it == have.end() || it->second != dtype) return false;
  }
  return true;
}

// What gen_edge_cases.py needs: every op, its signature, and the dtype
// bindings of its CPU kernels.
toml::table KernelTable() {
  toml::array ops;
  for (const OpDef* op : OpRegistry::Global().All()) {
    toml::table entry;
    entry.insert("name", op->name);
    entry.insert("stateful", op->stateful);
    entry.insert("runtime", runtime::IsRuntimeOp(op->name));
    toml::array inputs;
    for (const ArgDef& arg : op->inputs) inputs.push_back(arg.ToString());
    entry.insert("inputs", std::move(inputs));
    toml::array outputs;
    for (const ArgDef& arg : op->outputs) outputs.push_back(arg.ToString());
    entry.insert("outputs", std::move(outputs));
    toml::array bindings;
    for (const weft_kernel_def_t* def : g_cpu->kernels().ForOp(op->name)) {
      bindings.push_back(BindingName(KernelBinding(*def)));
    }
    if (bindings.empty() && runtime::IsRuntimeOp(op->name)) {
      // The host runs these for any dtype: every combination of the
      // dtypes its type attrs allow.
      std::vector<Binding> all = {{}};
      for (const AttrDef& attr : op->attrs) {
        if (attr.type != AttrType::kType || attr.allowed_types.empty()) continue;
        std::vector<Binding> next;
        for (const Binding& b : all) {
          for (DType t : attr.allowed_types) {
            Binding more = b;
            more[attr.name] = std::string(DTypeName(t));
            next.push_back(std::move(more));
          }
        }
        all = std::move(next);
      }
      for (const Binding& b : all) {
        if (!b.empty()) bindings.push_back(BindingName(b));
      }
    }
    entry.insert("bindings", std::move(bindings));
    ops.push_back(std::move(entry));
  }
  toml::table doc;
  doc.insert("op", std::move(ops));
  return doc;
}

// The type attrs the case sets.
Binding CaseBinding(const Case& c) {
  Binding out;
  if (c.attrs == nullptr) return out;
  const OpDef* op = OpRegistry::Global().Find(c.op);
  for (const auto& [key, node] : *c.attrs) {
    const AttrDef* def = op == nullptr ? nullptr : op->FindAttr(key.str());
    if (def != nullptr && def->type == AttrType::kType) out[std::string(key.str())] = node.value_or(std::string());
  }
  return out;
}

// The one-op graph of |c| in |mode|.
Expected<Graph> CaseGraph(const Source& source, const Case& c, Mode mode,
                          std::vector<std::pair<std::string, Tensor>>* feeds) {
  const OpDef* op = OpRegistry::Global().Find(c.op);
  if (op == nullptr) return InternalError("unknown op ", c.op);
  WEFT_ASSIGN_OR_RETURN(AttrMap attrs, cases::Attrs(c, *op));
  GraphBuilder b;
  std::vector<Output> inputs;
  auto scope = b.DeviceScope(g_cpu->name());
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Tensor t, cases::LoadTensor(source.dir, c.inputs[i]));
    const std::string name = StrCat("in", i);
    if (mode == Mode::kUnknown) {
      inputs.push_back(b.Placeholder(t.dtype(), Shape::UnknownRank(), name));
      feeds->emplace_back(name, std::move(t));
    } else {
      inputs.push_back(b.Const(t, name));
    }
  }
  b.AddNode(c.op, inputs, attrs, "op");
  return b.Build();
}

Expected<std::vector<Tensor>> RunCase(const Source& source, const Case& c, Mode mode) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  WEFT_ASSIGN_OR_RETURN(Graph graph, CaseGraph(source, c, mode, &feeds));
  WEFT_ASSIGN_OR_RETURN(auto session, runtime::Session::Create(std::move(graph), g_env->devices()));
  std::vector<std::string> fetches;
  const Graph::Node* node = session->graph().Find("op");
  for (int i = 0; i < node->num_outputs(); ++i) fetches.push_back(InputRefString("op", i));
  std::vector<Tensor> out;
  runtime::SetPoisonOutputs(mode == Mode::kPoison);
  Status s = fetches.empty() ? session->Run(feeds, {}, {"op"}, &out) : session->Run(feeds, fetches, {}, &out);
  runtime::SetPoisonOutputs(false);
  WEFT_RETURN_IF_ERROR(s);
  return out;
}

// Whether the CPU device has a kernel for the case's binding (a
// conformance case may name a dtype only another device implements).
bool CpuSupports(const Case& c) {
  if (runtime::IsRuntimeOp(c.op)) return true;
  const Binding binding = CaseBinding(c);
  for (const weft_kernel_def_t* def : g_cpu->kernels().ForOp(c.op)) {
    if (Covers(binding, KernelBinding(*def))) return true;
  }
  // A case meant to be refused while building runs anyway.
  return !c.error.empty();
}

void RunOne(const Source& source, const Case& c) {
  for (Mode mode : kModes) {
    const std::string where = StrCat(c.op, " [", BindingName(CaseBinding(c)), "] case ", Quote(c.name), " (",
                                     source.label, ", inputs in ", source.dir, "), ", ModeName(mode));
    auto out = RunCase(source, c, mode);
    if (!c.error.empty()) {
      if (out.ok()) {
        ADD_FAILURE() << where << ": expected an error containing " << Quote(c.error) << ", got outputs";
      } else if (source.label == "conformance" && mode == Mode::kUnknown) {
        // With unknown shapes the kernel refuses what shape inference
        // refused in the static run; a conformance case's words are the
        // shape function's, so here the refusal must name the node.
        if (out.status().message().find("node 'op'") == std::string::npos) {
          ADD_FAILURE() << where << ": the error does not name the node: " << out.status().ToString();
        }
      } else if (out.status().message().find(c.error) == std::string::npos) {
        // The edge cases' expected words are the same for the shape
        // function and the kernel.
        ADD_FAILURE() << where << ": expected an error containing " << Quote(c.error) << ", got "
                      << out.status().ToString();
      }
      continue;
    }
    if (!out.ok()) {
      ADD_FAILURE() << where << ": " << out.status().ToString();
      continue;
    }
    if (out->size() != c.outputs.size()) {
      ADD_FAILURE() << where << ": " << out->size() << " outputs, expected " << c.outputs.size();
      continue;
    }
    for (std::size_t i = 0; i < c.outputs.size(); ++i) {
      auto want = cases::LoadTensor(source.dir, {c.outputs[i].file, false});
      if (!want.ok()) {
        ADD_FAILURE() << where << ": " << want.status().ToString();
        continue;
      }
      const std::string diff =
          cases::Compare((*out)[i], *want, cases::ExpectedDType(*want, c.outputs[i]), c.rtol, c.atol, c.signed_zeros);
      if (!diff.empty()) ADD_FAILURE() << where << ": output " << i << ": " << diff;
    }
  }
}

void RunOpCases(const std::string& op) {
  for (const auto& [source, c] : g_ops[op].cases) RunOne(*source, c);
}

TEST(EdgeCases, EveryOpWithACpuKernelIsCoveredOrExemptWithAReason) {
  for (const OpDef* op : OpRegistry::Global().All()) {
    const auto& defs = g_cpu->kernels().ForOp(op->name);
    if (op->name[0] == '_' || (defs.empty() && !runtime::IsRuntimeOp(op->name))) continue;
    if (g_exempt.count(op->name) != 0) {
      EXPECT_FALSE(g_exempt[op->name].empty()) << op->name << " is exempt without a reason";
      continue;
    }
    EXPECT_GT(g_count[op->name][0], 0) << op->name << " has no generated edge cases and is not exempt";
    for (const weft_kernel_def_t* def : defs) {
      const Binding binding = KernelBinding(*def);
      if (g_skipped.count(op->name + " " + BindingName(binding)) != 0) continue;
      const auto& have = g_ops[op->name].bindings;
      EXPECT_TRUE(std::any_of(have.begin(), have.end(), [&](const Binding& b) { return Covers(b, binding); }))
          << op->name << " [" << BindingName(binding) << "] has a CPU kernel and no edge case";
    }
  }
}

int Setup(const std::string& dir) {
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/kernels.toml");
    out << "# The CPU plugin's kernels, written by edge_case_test for gen_edge_cases.py.\n" << KernelTable() << "\n";
    if (!out) {
      std::fprintf(stderr, "cannot write %s/kernels.toml\n", dir.c_str());
      return 1;
    }
  }
  const std::string command =
      StrCat("'", WEFT_PYTHON3, "' '", WEFT_EDGE_GENERATOR, "' '", dir, "/kernels.toml' '", dir, "'");
  if (std::system(command.c_str()) != 0) {
    std::fprintf(stderr, "the generator failed: %s\n", command.c_str());
    return 1;
  }
  return 0;
}

bool Load(Source& source) {
  try {
    source.document = toml::parse_file(source.dir + "/cases.toml");
  } catch (const toml::parse_error& e) {
    std::fprintf(stderr, "cannot read %s/cases.toml: %s\n", source.dir.c_str(), std::string(e.description()).c_str());
    return false;
  }
  return true;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using weft::Source;
  // CPU only: the suite is about the kernels of one plugin at a time.
  weft::testing::RuntimeEnv env("[plugins]\ndisable = [\"opencl\", \"cuda\", \"hip\"]\n");
  weft::g_env = &env;
  weft::g_cpu = env.devices() ? env.devices()->Find("/device:CPU:0") : nullptr;
  if (weft::g_cpu == nullptr) {
    std::fprintf(stderr, "no CPU device\n");
    return 1;
  }
  static Source edge{WEFT_EDGE_DIR, "edge", {}};
  static Source conformance{WEFT_CONFORMANCE_DIR, "conformance", {}};
  if (weft::Setup(edge.dir) != 0 || !weft::Load(edge) || !weft::Load(conformance)) return 1;
  for (const Source* source : {&edge, &conformance}) {
    auto cases = weft::cases::ReadCases(source->document);
    if (!cases.ok()) {
      std::fprintf(stderr, "%s: %s\n", source->dir.c_str(), cases.status().ToString().c_str());
      return 1;
    }
    for (weft::cases::Case& c : *cases) {
      if (source == &conformance && !weft::CpuSupports(c)) continue;
      auto& op = weft::g_ops[c.op];
      ++weft::g_count[c.op][source == &edge ? 0 : 1];
      if (source == &edge) {
        weft::Binding b = weft::CaseBinding(c);
        if (std::find(op.bindings.begin(), op.bindings.end(), b) == op.bindings.end()) op.bindings.push_back(b);
      }
      op.cases.emplace_back(source, std::move(c));
    }
  }
  if (const toml::array* exempt = edge.document["exempt"].as_array()) {
    for (const toml::node& n : *exempt) {
      const toml::table& t = *n.as_table();
      weft::g_exempt[t["op"].value_or(std::string())] = t["reason"].value_or(std::string());
    }
  }
  if (const toml::array* skipped = edge.document["skipped"].as_array()) {
    for (const toml::node& n : *skipped) {
      const toml::table& t = *n.as_table();
      weft::g_skipped[t["op"].value_or(std::string()) + " " + t["binding"].value_or(std::string())] =
          t["reason"].value_or(std::string());
    }
  }
  std::vector<std::string> ops;
  for (const auto& entry : weft::g_ops) ops.push_back(entry.first);
  weft::cases::RegisterOpTests("EdgeCases", ops, weft::RunOpCases);
  const int result = RUN_ALL_TESTS();
  int edge_total = 0, conformance_total = 0;
  std::printf("cases per op (each run with static shapes, unknown shapes and poisoned outputs):\n");
  for (const auto& [op, count] : weft::g_count) {
    std::printf("  %-36s %5d edge  %5d conformance  over %zu dtype bindings\n", op.c_str(), count[0], count[1],
                weft::g_ops[op].bindings.size());
    edge_total += count[0];
    conformance_total += count[1];
  }
  for (const auto& [op, reason] : weft::g_exempt) std::printf("  %-36s exempt: %s\n", op.c_str(), reason.c_str());
  for (const auto& [what, reason] : weft::g_skipped) std::printf("  %-36s skipped: %s\n", what.c_str(), reason.c_str());
  std::printf("%d edge cases and %d conformance cases on %zu ops, %d runs\n", edge_total, conformance_total,
              weft::g_count.size(), 3 * (edge_total + conformance_total));
  return result;
}
