#include "tests/support/weft_cli.h"

#include <gtest/gtest.h>

namespace weft::testing {

ProcessResult RunWeft(std::vector<std::string> args, std::map<std::string, std::string> env) {
  args.insert(args.begin(), WEFT_CLI);
  if (env.count("WEFT_PLUGIN_PATH") == 0) env["WEFT_PLUGIN_PATH"] = "";
  return Run(args, env);
}

std::unique_ptr<BackgroundProcess> StartListening(std::vector<std::string> args, const std::string& what) {
  args.insert(args.begin(), WEFT_CLI);
  auto process =
      std::make_unique<BackgroundProcess>(args, std::map<std::string, std::string>{{"WEFT_PLUGIN_PATH", ""}});
  if (!process->WaitForOutput("listening on", 60000)) {
    ADD_FAILURE() << what << " did not start:\n" << process->Output();
  }
  return process;
}

}  // namespace weft::testing
