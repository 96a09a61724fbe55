#include "tools/conformance/kit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "core/base/strings.h"
#include "core/graph/builder.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/op_kernel.h"
#include "core/runtime/session.h"
#include "core/tensor/npy.h"

namespace weft::conformance {
namespace fs = std::filesystem;

std::string DefaultCasesDir() {
  if (const char* env = std::getenv("WEFT_CONFORMANCE_CASES"); env != nullptr && *env != '\0') return env;
  // <prefix>/lib/weft/plugins -> <prefix>/share/weft/conformance
  const std::string plugins = plugin::DefaultPluginDir();
  if (plugins.empty()) return "";
  return (fs::path(plugins).parent_path().parent_path().parent_path() / "share" / "weft" / "conformance").string();
}

Expected<CaseSet> LoadCases(const std::string& dir) {
  const std::string file = (fs::path(dir) / "cases.toml").string();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    return NotFoundError("no conformance cases at ", Quote(dir), " (", Quote(file),
                         " is missing); they are installed with Weft in share/weft/conformance, or set "
                         "WEFT_CONFORMANCE_CASES or --cases");
  }
  CaseSet set;
  set.dir = dir;
  try {
    set.document = std::make_unique<toml::table>(toml::parse_file(file));
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(file, ":", e.source().begin.line, ":", e.source().begin.column, ": ", e.description());
  }
  auto cases = cases::ReadCases(*set.document);
  if (!cases.ok()) return cases.status().WithContext(file);
  for (cases::Case& c : *cases) {
    std::string op = c.op;
    set.by_op[op].push_back(std::move(c));
  }
  return set;
}

namespace {

bool Match(const char* p, const char* s) {
  if (*p == '\0') return *s == '\0';
  if (*p == '*') return Match(p + 1, s) || (*s != '\0' && Match(p, s + 1));
  if (*s == '\0') return false;
  return (*p == '?' || *p == *s) && Match(p + 1, s + 1);
}

// The largest |got - want| where both are finite.
double WorstError(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape() || got.dtype() == DType::kString || want.dtype() == DType::kString) return 0;
  double worst = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double a = cases::AsDouble(got, i), b = cases::AsDouble(want, i);
    if (std::isfinite(a) && std::isfinite(b)) worst = std::max(worst, std::fabs(a - b));
  }
  return worst;
}

std::string Short(std::string text, std::size_t max = 300) {
  if (text.size() > max) text = text.substr(0, max) + "...";
  return text;
}

}  // namespace

// The one-op graph of |c|: its inputs as constants, every node on |device|.
Expected<Graph> CaseGraph(const cases::Case& c, const std::string& dir, const std::string& device) {
  const OpDef* op = OpRegistry::Global().Find(c.op);
  if (op == nullptr) return NotFoundError("the cases name op ", Quote(c.op), ", which this Weft does not have");
  WEFT_ASSIGN_OR_RETURN(AttrMap attrs, cases::Attrs(c, *op));
  GraphBuilder b;
  std::vector<Output> inputs;
  {
    auto scope = b.DeviceScope(device);
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, cases::LoadTensor(dir, c.inputs[i]));
      inputs.push_back(b.Const(t, StrCat("in", i)));
    }
    b.AddNode(c.op, inputs, attrs, "op");
  }
  return b.Build();
}

bool MatchesPattern(const std::string& pattern, const std::string& name) {
  for (const std::string& one : StrSplit(pattern, ',')) {
    if (!one.empty() && Match(one.c_str(), name.c_str())) return true;
  }
  return false;
}

CaseOutcome RunCase(const cases::Case& c, const std::string& dir, const std::shared_ptr<runtime::DeviceSet>& devices,
                    const std::string& device) {
  CaseOutcome outcome;
  outcome.device = device;
  const runtime::RuntimeDevice* d = devices->Find(device);
  if (d == nullptr) {
    outcome.failure = StrCat("no device ", device);
    return outcome;
  }
  // The case's graph, built (its inputs read) once: for the device's
  // kernel query, then for the session. A runtime op runs everywhere; a
  // case whose graph does not build counts as supported, so its error is
  // checked.
  Expected<Graph> graph = CaseGraph(c, dir, device);
  if (graph.ok()) {
    runtime::EnableKernelServices();  // a kernel's query reads the node through them
    outcome.supported = runtime::QueryKernelSupport(*graph, *graph->Find("op"), *d).supported;
  } else {
    outcome.supported = true;
  }
  if (!outcome.supported) return outcome;

  auto run = [&]() -> Expected<std::vector<Tensor>> {
    WEFT_RETURN_IF_ERROR(graph.status());
    runtime::SessionOptions options;
    options.placement.soft = false;  // the case must run where it is asked to
    options.optimizer.level = 0;     // and the op itself, not a constant folded on the host
    WEFT_ASSIGN_OR_RETURN(auto session, runtime::Session::Create(std::move(*graph), devices, options));
    std::vector<std::string> fetches;
    const Graph::Node* node = session->graph().Find("op");
    for (int i = 0; i < node->num_outputs(); ++i) fetches.push_back(InputRefString("op", i));
    std::vector<Tensor> out;
    if (fetches.empty()) {
      WEFT_RETURN_IF_ERROR(session->Run({}, {}, {"op"}, &out));
    } else {
      WEFT_RETURN_IF_ERROR(session->Run({}, fetches, {}, &out));
    }
    return out;
  };
  auto out = run();
  if (!c.error.empty()) {
    if (out.ok()) {
      outcome.failure = StrCat("expected an error containing ", Quote(c.error), ", got a result");
    } else if (out.status().message().find(c.error) == std::string::npos) {
      outcome.failure = StrCat("expected an error containing ", Quote(c.error), ", got: ", out.status().ToString());
    }
    return outcome;
  }
  if (!out.ok()) {
    outcome.failure = out.status().ToString();
    return outcome;
  }
  if (out->size() != c.outputs.size()) {
    outcome.failure = StrCat(out->size(), " outputs, expected ", c.outputs.size());
    return outcome;
  }
  for (std::size_t i = 0; i < c.outputs.size(); ++i) {
    auto want = ReadNpy((fs::path(dir) / c.outputs[i].file).string());
    if (!want.ok()) {
      outcome.failure = StrCat("reference output ", i, ": ", want.status().ToString());
      return outcome;
    }
    const DType want_dtype = cases::ExpectedDType(*want, c.outputs[i]);
    const std::string diff = cases::Compare((*out)[i], *want, want_dtype, c.rtol, c.atol, c.signed_zeros);
    if ((*out)[i].dtype() == want_dtype)
      outcome.worst_error = std::max(outcome.worst_error, WorstError((*out)[i], *want));
    if (!diff.empty() && outcome.failure.empty()) outcome.failure = StrCat("output ", i, ": ", diff);
  }
  outcome.outputs = std::move(*out);
  return outcome;
}

int Report::failures() const {
  int n = 0;
  for (const AbiResult& r : abi) n += r.error.empty() ? 0 : 1;
  for (const OpRow& r : ops) n += r.failed;
  return n;
}

Report Run(const std::shared_ptr<runtime::DeviceSet>& devices, const CaseSet& cases, const Options& options) {
  Report report;
  for (const std::string& name : options.devices) {
    const runtime::RuntimeDevice* device = devices->Find(name);
    if (device == nullptr) continue;
    if (options.abi_checks) {
      if (options.progress) options.progress(StrCat("device ABI checks on ", name));
      for (AbiResult& r : RunAbiChecks(device->device())) report.abi.push_back(std::move(r));
    }
    for (const auto& [op, op_cases] : cases.by_op) {
      if (!options.ops.empty() && !MatchesPattern(options.ops, op)) continue;
      if (!runtime::IsRuntimeOp(op) && device->kernels().ForOp(op).empty()) continue;
      if (options.progress) options.progress(StrCat(op, " on ", name));
      OpRow row;
      row.device = name;
      row.op = op;
      for (const cases::Case& c : op_cases) {
        CaseOutcome outcome = RunCase(c, cases.dir, devices, name);
        if (!outcome.supported) continue;
        ++report.cases_run;
        row.worst_error = std::max(row.worst_error, outcome.worst_error);
        if (outcome.failure.empty()) {
          ++row.passed;
        } else {
          ++row.failed;
          if (row.failures.size() < 3) row.failures.push_back(StrCat(c.name, ": ", Short(outcome.failure)));
        }
      }
      if (row.passed + row.failed > 0) report.ops.push_back(std::move(row));
    }
  }
  return report;
}

void PrintReport(std::ostream& out, const Report& report) {
  auto pad = [](std::string s, std::size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
  };
  if (!report.abi.empty()) {
    out << "Device ABI checks\n";
    std::size_t width = 0;
    for (const AbiResult& r : report.abi) width = std::max(width, r.check.size());
    for (const AbiResult& r : report.abi) {
      out << "  " << (r.error.empty() ? "pass  " : "FAIL  ") << pad(r.check, width) << "  " << r.device << "  "
          << (r.error.empty() ? r.what : r.error) << '\n';
    }
    out << '\n';
  }
  if (!report.ops.empty()) {
    std::size_t op_width = 2, device_width = 6;
    for (const OpRow& r : report.ops) {
      op_width = std::max(op_width, r.op.size());
      device_width = std::max(device_width, r.device.size());
    }
    out << "Op conformance (NumPy's values)\n";
    out << "  " << pad("OP", op_width) << "  " << pad("DEVICE", device_width) << "  PASS  FAIL  WORST ERROR\n";
    for (const OpRow& r : report.ops) {
      std::ostringstream worst;
      worst << std::setprecision(2) << std::scientific << r.worst_error;
      out << "  " << pad(r.op, op_width) << "  " << pad(r.device, device_width) << "  " << std::setw(4) << r.passed
          << "  " << std::setw(4) << r.failed << "  " << worst.str() << (r.failed > 0 ? "  FAIL" : "") << '\n';
    }
    bool any = false;
    for (const OpRow& r : report.ops) {
      for (const std::string& f : r.failures) {
        if (!any) out << "\nFailures\n";
        any = true;
        out << "  " << r.op << " on " << r.device << ": " << f << '\n';
      }
      if (r.failed > static_cast<int>(r.failures.size())) {
        out << "  " << r.op << " on " << r.device << ": and " << r.failed - static_cast<int>(r.failures.size())
            << " more\n";
      }
    }
    out << '\n';
  }
  int abi_failed = 0;
  for (const AbiResult& r : report.abi) abi_failed += r.error.empty() ? 0 : 1;
  int op_failed = 0;
  for (const OpRow& r : report.ops) op_failed += r.failed > 0 ? 1 : 0;
  out << (report.ok() ? "PASS" : "FAIL") << ": " << report.abi.size() - abi_failed << " of " << report.abi.size()
      << " ABI checks, " << report.ops.size() - op_failed << " of " << report.ops.size() << " ops (" << report.cases_run
      << " cases, " << report.failures() - abi_failed << " failed)\n";
}

}  // namespace weft::conformance
