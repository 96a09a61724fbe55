// The fixture of the tests of the `weft` binary end to end (cli_test.cc:
// plugins, devices, placement and configs; cli_graph_test.cc: graph files,
// the commands' help and errors, conformance, optimize, bench): a scratch
// directory, and the CLI run without the caller's WEFT_PLUGIN_PATH.
#ifndef WEFT_TESTS_INTEGRATION_CLI_FIXTURE_H_
#define WEFT_TESTS_INTEGRATION_CLI_FIXTURE_H_

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/test_dir.h"
#include "tests/support/weft_cli.h"

namespace weft::testing {

// Both files' tests are TEST_Fs of this fixture: it lives outside an
// anonymous namespace so that GoogleTest sees one fixture class.
class Cli : public ::testing::Test {
 protected:
  // The deliberately broken plugins of tests/plugins/, as built.
  static inline const std::string kRoot = WEFT_TEST_PLUGIN_ROOT;

  // Runs weft with an environment that does not leak the caller's
  // WEFT_PLUGIN_PATH.
  ProcessResult Weft(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    ProcessResult r = RunWeft(std::move(args), std::move(env));
    r.err = WithoutUnavailableNotes(r.err);
    return r;
  }

  // Drops the host's INFO notes about plugins built here that cannot serve
  // on this machine (a GPU plugin without its GPU): which ones appear
  // depends on the machine, not on the command under test.
  static std::string WithoutUnavailableNotes(const std::string& err) {
    std::istringstream lines(err);
    std::string kept;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("[I ") && line.find(") is unavailable: ") != std::string::npos) continue;
      kept += line + "\n";
    }
    if (!err.empty() && err.back() != '\n' && !kept.empty()) kept.pop_back();
    return kept;
  }

  // Drops the warnings that a built-in transport's plugin is not loaded:
  // whether tcp, zmq and rdma are built depends on the machine.
  static std::string WithoutTransportWarnings(const std::string& out) {
    std::istringstream lines(out);
    std::string kept;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("warning: ") &&
          line.find(" transport plugin is not loaded on this machine") != std::string::npos) {
        continue;
      }
      kept += line + "\n";
    }
    return kept;
  }

  // What `weft |args|` said on stderr; it must fail as a user error (exit
  // code 1).
  std::string UserError(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    ProcessResult r = Weft(std::move(args), std::move(env));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    return r.err;
  }

  std::string Write(const std::string& name, const std::string& text) { return dir_.Write(name, text); }

  TestDir dir_{"weft_cli_test"};
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_CLI_FIXTURE_H_
