// The weft CLI built in this tree (WEFT_CLI), run as the tests' child
// process: a command whose output is collected, or a task serving in the
// background.
#ifndef WEFT_TESTS_SUPPORT_WEFT_CLI_H_
#define WEFT_TESTS_SUPPORT_WEFT_CLI_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace weft::testing {

// Runs `weft <args>` with the caller's environment plus |env|.
// WEFT_PLUGIN_PATH is cleared unless |env| sets it, so that the CLI loads
// the plugins of the build tree and nothing of the caller's.
ProcessResult RunWeft(std::vector<std::string> args, std::map<std::string, std::string> env = {});

// Starts `weft <args>` in the background (WEFT_PLUGIN_PATH cleared) and
// waits up to 60 s for it to print "listening on". When it does not, the
// test fails naming |what| with what the process printed; the process is
// returned either way.
std::unique_ptr<BackgroundProcess> StartListening(std::vector<std::string> args, const std::string& what);

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_WEFT_CLI_H_
