#include <iostream>
#include <memory>

#include "core/base/version.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"
#include "weft/weft_abi.h"

namespace weft::cli {

void AddVersionCommand(CLI::App& app, Runner& run) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("version", "Print the version, build and plugin ABI");
  cmd->add_flag("--json", *json, "Print as JSON");
  cmd->callback([&run, json] {
    run = [json](Context&) {
      if (*json) {
        JsonWriter j(std::cout);
        j.BeginObject();
        j.String("version", kVersion);
        j.String("commit", kGitCommit);
        j.String("build_type", kBuildType);
        j.String("compiler", kCompiler);
        j.String("abi", StrCat(WEFT_ABI_VERSION_MAJOR, ".", WEFT_ABI_VERSION_MINOR));
        j.EndObject();
      } else {
        std::cout << "weft " << kVersion << " (commit " << kGitCommit << ", " << kBuildType << ", " << kCompiler
                  << ")\n"
                  << "plugin ABI " << WEFT_ABI_VERSION_MAJOR << "." << WEFT_ABI_VERSION_MINOR << '\n';
      }
      return kExitOk;
    };
  });
}

}  // namespace weft::cli
