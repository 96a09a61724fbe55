// Two tasks of a cluster, /job:ps/task:0 and /job:worker/task:0, serving in
// the test's own process on loopback ports chosen at run time, and the
// options of a client session over them (unpinned nodes go to the worker).
#ifndef WEFT_TESTS_SUPPORT_TWO_TASKS_H_
#define WEFT_TESTS_SUPPORT_TWO_TASKS_H_

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/distributed/dist_session.h"
#include "core/distributed/task_service.h"
#include "core/plugin/plugin_host.h"

namespace weft::testing {

inline constexpr char kPsTask[] = "/job:ps/task:0";
inline constexpr char kWorkerTask[] = "/job:worker/task:0";

// The plugins of the build tree, loaded once per test process.
plugin::PluginHost& BuiltPlugins();

class TwoTasksTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kFingerprint = 1234;
  // Skips the test when the tcp transport is not built.
  void SetUp() override;
  dist::DistSessionOptions Options() const;
  // Starts task |name| of peers_ on its address (again, after a test
  // stopped it: a new incarnation).
  std::unique_ptr<dist::TaskService> StartTask(const std::string& name) const;

  std::map<std::string, std::string> peers_;
  std::vector<std::unique_ptr<dist::TaskService>> services_;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_TWO_TASKS_H_
