// The device conformance kit: what `weft conformance --plugin PATH` runs
// against a device plugin, and what the in-tree conformance suite runs
// against the built ones (docs/plugins.md, "Before you ship").
//
//  - The device ABI checks (abi_checks.h): properties, allocation, copies
//    both ways, streams and events, error paths, a stream destroyed with
//    work in flight.
//  - Every op conformance case (NumPy's inputs and expected outputs, from
//    tests/conformance/gen_cases.py, installed with Weft) for which the
//    device has a kernel of the case's dtypes, run as a one-op graph on the
//    device and compared with dtype-aware tolerances.
//
//   WEFT_ASSIGN_OR_RETURN(CaseSet set, LoadCases(DefaultCasesDir()));
//   Report report = Run(devices, set, options);
//   PrintReport(std::cout, report);
#ifndef WEFT_TOOLS_CONFORMANCE_KIT_H_
#define WEFT_TOOLS_CONFORMANCE_KIT_H_

#include <toml++/toml.h>

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"
#include "core/runtime/device_set.h"
#include "core/tensor/tensor.h"
#include "tools/conformance/abi_checks.h"
#include "tools/conformance/case_io.h"

namespace weft::conformance {

// The cases of a cases directory (cases.toml and its .npy files).
struct CaseSet {
  std::string dir;
  std::unique_ptr<toml::table> document;  // the cases point into it
  std::map<std::string, std::vector<cases::Case>> by_op;
};

// Where the reference values are: $WEFT_CONFORMANCE_CASES, else
// share/weft/conformance next to the running executable's bin/ (the
// installed prefix, or the build tree).
std::string DefaultCasesDir();

// Reads |dir|/cases.toml. NOT_FOUND naming the directory when there is
// none; INVALID_ARGUMENT naming the file and the case when one is bad.
Expected<CaseSet> LoadCases(const std::string& dir);

// Whether |name| matches |pattern|: '*' any run of characters, '?' one;
// several patterns separated by commas match when any does.
bool MatchesPattern(const std::string& pattern, const std::string& name);

// The one-op graph of |c|: its inputs as Const nodes "in0", "in1", ...,
// the op as node "op", every node on |device|.
Expected<Graph> CaseGraph(const cases::Case& c, const std::string& dir, const std::string& device);

// One case on one device.
struct CaseOutcome {
  std::string device;
  bool supported = false;  // false: the device has no kernel for its dtypes
  std::string failure;     // empty: passed
  double worst_error = 0;  // the largest |got - want| over finite elements
  std::vector<Tensor> outputs;
};

// Runs |c| on |device| (every node of its one-op graph placed there) and
// checks the result against the case's reference. |supported| is false,
// and nothing runs, when the device has no kernel for the case's op and
// binding of type attrs or its kernel's query refuses the node (a runtime
// op runs everywhere; a case whose graph does not build counts as
// supported, so its error is checked).
CaseOutcome RunCase(const cases::Case& c, const std::string& dir, const std::shared_ptr<runtime::DeviceSet>& devices,
                    const std::string& device);

struct Options {
  // The devices to test, by name ("/device:EXAMPLE:0").
  std::vector<std::string> devices;
  // Ops to run (MatchesPattern); empty: every op with cases.
  std::string ops;
  bool abi_checks = true;
  // Called before each op with "op on device", for progress.
  std::function<void(const std::string&)> progress;
};

// One row of the report: an op on a device.
struct OpRow {
  std::string device;
  std::string op;
  int passed = 0;
  int failed = 0;
  double worst_error = 0;
  std::vector<std::string> failures;  // "case: what differs", the first few
};

struct Report {
  std::vector<AbiResult> abi;
  std::vector<OpRow> ops;
  int cases_run = 0;
  int failures() const;
  bool ok() const { return failures() == 0; }
};

Report Run(const std::shared_ptr<runtime::DeviceSet>& devices, const CaseSet& cases, const Options& options);

// The report as tables: the ABI checks, then one line per op with its
// passes, failures and worst error, then each failure, then a summary.
void PrintReport(std::ostream& out, const Report& report);

}  // namespace weft::conformance

#endif  // WEFT_TOOLS_CONFORMANCE_KIT_H_
