// Runs a program as a child process and collects what it printed: the
// real `weft` binary in CLI tests, real processes in cluster tests.
#ifndef WEFT_TESTS_SUPPORT_SUBPROCESS_H_
#define WEFT_TESTS_SUPPORT_SUBPROCESS_H_

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
ProcessResult Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
                  const std::string& cwd = "");

// A child process running in the background (a `weft serve` task, a
// transport peer). Its stdout and stderr go to one temporary file. The
// destructor kills it (SIGKILL) if it still runs and reaps it, so a failing
// test leaves no process behind.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {});
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  int pid() const { return pid_; }
  // Sends |signal|; no effect once it was reaped.
  void Kill(int signal);
  // Waits at most |timeout_ms| for it to exit; returns whether it did.
  // exit_code() and term_signal() are then known.
  bool Wait(int timeout_ms);
  bool running() const { return !reaped_; }
  int exit_code() const { return exit_code_; }
  int term_signal() const { return signal_; }
  // Everything it printed so far.
  std::string Output() const;
  // Waits at most |timeout_ms| for |text| to appear in Output(); false when
  // the process ends or the time passes first.
  bool WaitForOutput(const std::string& text, int timeout_ms);

 private:
  int pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  int signal_ = 0;
  std::string log_path_;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_SUBPROCESS_H_
