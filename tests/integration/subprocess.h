// Runs a program as a child process and collects what it printed: the
// real `weft` binary in CLI tests, real processes in cluster tests.
#ifndef WEFT_TESTS_INTEGRATION_SUBPROCESS_H_
#define WEFT_TESTS_INTEGRATION_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace weft::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs |argv| (argv[0] is the program path) with the current environment
// plus |env| (a value of "" unsets the variable), in |cwd| when not empty.
ProcessResult Run(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env = {}, const std::string& cwd = "");

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_SUBPROCESS_H_
