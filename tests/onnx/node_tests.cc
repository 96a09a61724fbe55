// ONNX's backend node tests through Weft (docs/onnx.md, "Conformance"):
// every case under ONNX's test data (one small model per operator and
// variant, with inputs and expected outputs; Debian's libonnx-testdata) is
// imported as `weft run` imports it (initializers frozen), run through a
// Session with the default graph optimizer, and its outputs compared with
// ONNX's expected ones at the tolerances of ONNX's own backend runner
// (same dtype and shape; |got - want| <= 1e-7 + 1e-3 * |want|, NaN equal
// to NaN; exact for integers, booleans and strings).
//
//   onnx_node_tests --expected tests/onnx/node_tests_expected_failures.txt
//                   [--data DIR] [--filter SUBSTRING] [--verbose]
//                   [--write-expected FILE]
//
// The expected-failures file lists the cases known to fail, one per line,
// "test_name  reason". The run fails when a case not on the list fails (a
// regression) and when a listed case passes (take it off the list): so the
// count passing can only go up. --write-expected writes the list this run
// found, with each failure's reason, for a maintainer to review and check in.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/base/strings.h"
#include "core/config/config.h"
#include "core/graph/graph.h"
#include "core/onnx/importer.h"
#include "core/onnx/onnx.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/session.h"
#include "tools/conformance/case_io.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

constexpr double kRtol = 1e-3;  // ONNX's backend runner (onnx/backend/test/loader)
constexpr double kAtol = 1e-7;

struct Args {
  std::string data = "/usr/share/libonnx-testdata/data/node";
  std::string expected;
  std::string write_expected;
  std::string filter;
  bool verbose = false;
};

const char kUsage[] =
    "usage: onnx_node_tests [--data DIR] [--expected FILE] [--write-expected FILE] [--filter SUBSTRING] "
    "[--verbose]\n"
    "Runs ONNX's backend node tests (DIR: one folder per case with model.onnx and test_data_set_*/) through\n"
    "Weft's importer and a Session; fails on a case that fails but is not listed in FILE, and on a listed\n"
    "case that passes.\n";

Expected<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& out) -> Status {
      if (i + 1 >= argc) return InvalidArgumentError(a, " needs a value");
      out = argv[++i];
      return Status();
    };
    if (a == "--data") {
      WEFT_RETURN_IF_ERROR(value(args.data));
    } else if (a == "--expected") {
      WEFT_RETURN_IF_ERROR(value(args.expected));
    } else if (a == "--write-expected") {
      WEFT_RETURN_IF_ERROR(value(args.write_expected));
    } else if (a == "--filter") {
      WEFT_RETURN_IF_ERROR(value(args.filter));
    } else if (a == "--verbose") {
      args.verbose = true;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      return InvalidArgumentError("unknown argument ", Quote(a), "\n", kUsage);
    }
  }
  return args;
}

// The expected-failures file: "test_name  reason" lines, '#' comments.
Expected<std::map<std::string, std::string>> ReadExpected(const std::string& path) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    const auto end = line.find_first_of(" \t", start);
    const std::string name = line.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string reason = end == std::string::npos ? std::string() : line.substr(end);
    reason.erase(0, std::min(reason.size(), reason.find_first_not_of(" \t")));
    if (reason.empty()) return InvalidArgumentError(path, ":", number, ": ", Quote(name), " has no reason");
    if (!out.emplace(name, reason).second) return InvalidArgumentError(path, ":", number, ": ", Quote(name), " twice");
  }
  return out;
}

// The TensorProto in |path|, for a value the model declares as |info|.
// ONNX 1.12's test data stores bfloat16 values as UINT16 (numpy has no
// bfloat16): those bits are taken as the bfloat16 the model declares.
Expected<onnx::TensorProto> ReadTensorProto(const fs::path& path, const onnx::ValueInfoProto& info) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path.string()));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return InvalidArgumentError(path.string(), ": not a TensorProto");
  if (proto.data_type() == onnx::TensorProto::UINT16 && info.type().has_tensor_type() &&
      info.type().tensor_type().elem_type() == onnx::TensorProto::BFLOAT16) {
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  }
  return proto;
}

// OK when |got| matches |want| as ONNX's runner compares them.
Status Compare(const std::string& name, const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return InvalidArgumentError("output ", Quote(name), ": dtype ", DTypeName(got.dtype()), ", expected ",
                                DTypeName(want.dtype()));
  }
  if (got.shape() != want.shape()) {
    return InvalidArgumentError("output ", Quote(name), ": shape ", got.shape().ToString(), ", expected ",
                                want.shape().ToString());
  }
  if (got.dtype() == DType::kString) {
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      if (got.string_at(i) != want.string_at(i)) {
        return InvalidArgumentError("output ", Quote(name), "[", i, "] = ", Quote(got.string_at(i)), ", expected ",
                                    Quote(want.string_at(i)));
      }
    }
    return Status();
  }
  if (got.dtype() == DType::kI64) {
    for (int64_t i = 0; i < got.num_elements(); ++i) {
      if (got.data<int64_t>()[i] != want.data<int64_t>()[i]) {
        return InvalidArgumentError("output ", Quote(name), "[", i, "] = ", got.data<int64_t>()[i], ", expected ",
                                    want.data<int64_t>()[i]);
      }
    }
    return Status();
  }
  const bool exact = !IsFloating(got.dtype());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double g = cases::AsDouble(got, i), w = cases::AsDouble(want, i);
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g) || exact) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= kAtol + kRtol * std::fabs(w);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
      if (!std::isnan(g - w)) worst = std::max(worst, std::fabs(g - w));
    }
  }
  if (bad == 0) return Status();
  return InvalidArgumentError("output ", Quote(name), ": ", bad, " of ", got.num_elements(),
                              " elements differ (largest difference ", worst, "); first [", first,
                              "] = ", cases::AsDouble(got, first), ", expected ", cases::AsDouble(want, first));
}

// One data set of a case: feeds the inputs, compares the outputs.
Status RunDataSet(const onnx::ModelProto& model, const onnx_io::ImportedModel& imported, runtime::Session& session,
                  const fs::path& dir) {
  const onnx::GraphProto& graph = model.graph();
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& in : graph.input()) {
    if (initializers.count(in.name()) == 0) inputs.push_back(&in);
  }
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const fs::path file = dir / StrCat("input_", i, ".pb");
    if (!fs::exists(file)) continue;  // an optional input the case leaves out
    if (!inputs[i]->type().has_tensor_type()) {
      return UnimplementedError(
          "input ", Quote(inputs[i]->name()), " is a ",
          inputs[i]->type().value_case() == onnx::TypeProto::kSequenceType ? "sequence" : "non-tensor value");
    }
    WEFT_ASSIGN_OR_RETURN(onnx::TensorProto proto, ReadTensorProto(file, *inputs[i]));
    auto t = onnx_io::TensorFromProto(proto, dir.string());
    if (!t.ok()) return t.status().WithContext(StrCat("input ", Quote(inputs[i]->name())));
    if (i >= imported.inputs.size()) return InternalError("the imported model has fewer inputs than the case feeds");
    feeds.emplace_back(imported.inputs[i], std::move(*t));
  }
  std::vector<Tensor> outputs;
  runtime::RunOptions options;
  options.timeout_ms = 60000;
  WEFT_RETURN_IF_ERROR(session.Run(feeds, imported.outputs, {}, &outputs, options));
  for (int k = 0; k < graph.output_size(); ++k) {
    const fs::path file = dir / StrCat("output_", k, ".pb");
    WEFT_ASSIGN_OR_RETURN(onnx::TensorProto proto, ReadTensorProto(file, graph.output(k)));
    auto want = onnx_io::TensorFromProto(proto, dir.string());
    if (!want.ok()) return want.status().WithContext(StrCat("expected output ", Quote(graph.output(k).name())));
    WEFT_RETURN_IF_ERROR(Compare(graph.output(k).name(), outputs[static_cast<std::size_t>(k)], *want));
  }
  return Status();
}

Status RunCase(const fs::path& dir, const std::shared_ptr<runtime::DeviceSet>& devices,
               const runtime::SessionOptions& session_options) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadFile((dir / "model.onnx").string()));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return InvalidArgumentError("model.onnx does not parse");
  for (const auto& out : model.graph().output()) {
    if (!out.type().has_tensor_type()) {
      return UnimplementedError("output ", Quote(out.name()), " is a ",
                                out.type().value_case() == onnx::TypeProto::kSequenceType ? "sequence" : "non-tensor",
                                " value");
    }
  }
  onnx_io::ImportOptions import_options;
  import_options.freeze = true;
  WEFT_ASSIGN_OR_RETURN(onnx_io::ImportedModel imported,
                        onnx_io::ImportOnnxBytes(bytes, "model.onnx", dir.string(), import_options));
  WEFT_ASSIGN_OR_RETURN(Graph graph, Graph::FromGraphDef(imported.def));
  WEFT_ASSIGN_OR_RETURN(auto session, runtime::Session::Create(std::move(graph), devices, session_options));
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(entry.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return InvalidArgumentError("no test_data_set_* folder");
  for (const fs::path& set : sets) {
    Status s = RunDataSet(model, imported, *session, set);
    if (!s.ok()) return s.WithContext(set.filename().string());
  }
  return Status();
}

// The first line of |message|, shortened to fit the list file.
std::string Reason(const Status& status) {
  std::string m = status.message();
  const auto nl = m.find('\n');
  if (nl != std::string::npos) {
    // CheckOpsSupported lists the ops on the following lines.
    std::string rest = m.substr(nl + 1);
    m.erase(nl);
    const auto first = rest.find_first_not_of(' ');
    if (m.find("cannot be imported") != std::string::npos && first != std::string::npos) {
      m = "no converter: " + rest.substr(first, rest.find(' ', first) - first);
    }
  }
  for (char& ch : m) {
    if (ch == '#') ch = '_';
  }
  if (m.size() > 200) m = m.substr(0, 197) + "...";
  return StrCat(CodeName(status.code()), ": ", m);
}

int Main(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args.ok()) {
    std::cerr << "onnx_node_tests: " << args.status().message() << "\n";
    return 2;
  }
  auto expected = ReadExpected(args->expected);
  if (!expected.ok()) {
    std::cerr << "onnx_node_tests: " << expected.status().ToString() << "\n";
    return 2;
  }
  std::error_code ec;
  if (!fs::is_directory(args->data, ec)) {
    std::cerr << "onnx_node_tests: " << Quote(args->data)
              << " is not a folder of ONNX node tests (Debian's libonnx-testdata installs them; tools/setup.sh "
                 "does)\n";
    return 2;
  }
  auto config = config::DefaultConfig();
  if (!config.ok()) {
    std::cerr << "onnx_node_tests: " << config.status().ToString() << "\n";
    return 2;
  }
  config->plugins.paths = {WEFT_BUILT_PLUGIN_DIR};
  plugin::PluginHost host(*config);
  Status loaded = host.LoadAll();
  if (!loaded.ok()) {
    std::cerr << "onnx_node_tests: " << loaded.ToString() << "\n";
    return 2;
  }
  auto opened = runtime::DeviceSet::Open(host);
  if (!opened.ok()) {
    std::cerr << "onnx_node_tests: " << opened.status().ToString() << "\n";
    return 2;
  }
  const std::shared_ptr<runtime::DeviceSet> devices = std::move(*opened);
  const runtime::SessionOptions session_options = runtime::SessionOptions::FromConfig(*config);

  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(args->data)) {
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx") &&
        entry.path().filename().string().find(args->filter) != std::string::npos) {
      cases.push_back(entry.path());
    }
  }
  std::sort(cases.begin(), cases.end());
  int passed = 0;
  std::vector<std::string> regressions, now_passing;
  std::map<std::string, std::string> failures;
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    if (args->verbose) std::cerr << name << " ..." << std::flush;
    Status s = RunCase(dir, devices, session_options);
    const bool listed = expected->count(name) != 0;
    if (s.ok()) {
      ++passed;
      if (listed) now_passing.push_back(name);
    } else {
      failures[name] = Reason(s);
      if (!listed) regressions.push_back(StrCat(name, ": ", s.ToString()));
    }
    if (args->verbose) std::cerr << (s.ok() ? " ok" : " FAILED: " + s.ToString()) << "\n";
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!args->write_expected.empty()) {
    std::ofstream out(args->write_expected);
    out << "# ONNX backend node tests Weft fails, with the reason (tests/onnx/node_tests.cc; docs/onnx.md).\n"
           "# A case listed here that passes fails the test: take it off the list.\n";
    for (const auto& [name, reason] : failures) out << name << "  " << reason << "\n";
    if (!out) std::cerr << "onnx_node_tests: writing " << Quote(args->write_expected) << " failed\n";
  }
  for (const std::string& r : regressions) std::cout << "FAILED (not on the expected-failures list): " << r << "\n";
  for (const std::string& n : now_passing) {
    std::cout << "PASSES (take it off the expected-failures list): " << n << "\n";
  }
  const int total = static_cast<int>(cases.size());
  std::printf("ONNX node tests: %d of %d passed (%.1f%%), %zu failed as listed, %zu failed unlisted, in %.1f s\n",
              passed, total, total == 0 ? 0.0 : 100.0 * passed / total, failures.size() - regressions.size(),
              regressions.size(), seconds);
  if (total == 0) {
    std::cerr << "onnx_node_tests: no cases under " << Quote(args->data) << "\n";
    return 1;
  }
  return regressions.empty() && now_passing.empty() ? 0 : 1;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) { return weft::Main(argc, argv); }
