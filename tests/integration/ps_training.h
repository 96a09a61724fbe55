// The fixture of the tests that train on a cluster of real processes
// (ps_train_test.cc: asynchronous training and its faults;
// ps_train_sync_test.cc: synchronous and allreduce training;
// ps_train_recovery_test.cc: recovery = "auto" under `weft cluster launch`):
// parameter servers started with `weft serve` or `weft train --job ps`,
// workers with `weft train --job worker --task i`, on loopback ports chosen
// at run time, with their files in a folder of the test's own.
#ifndef WEFT_TESTS_INTEGRATION_PS_TRAINING_H_
#define WEFT_TESTS_INTEGRATION_PS_TRAINING_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"
#include "tests/support/test_dir.h"

namespace weft::testing {

// The sample models (fashion_mlp.wgt, fashion_cnn.wgt, debian_bow.wgt).
inline const std::string kModels = WEFT_SOURCE_DIR "/configs/models/";

// Whether Fashion-MNIST, which the tests train on, is installed.
bool DataPresent();

// The value of "name=<number>" in the `final:` line of |out|, or NaN.
double FinalValue(const std::string& out, const std::string& name);

// The per-step records ({"step", "aggregated", ...} without "loss") of a
// training.metrics file.
std::vector<nlohmann::json> SyncStepRecords(const std::string& path);

// Every test of the suite is a TEST_F of this fixture, whichever file it
// is in: it lives outside an anonymous namespace so that GoogleTest sees
// one fixture class.
class PsTraining : public ::testing::Test {
 protected:
  // Kills what still runs.
  void TearDown() override;

  struct Layout {
    int ps = 1;
    int workers = 2;
    bool ps_job = true;
    std::string cluster_extra;  // more [cluster] keys
    std::string more;           // more sections, at the end
    std::string ps_host = "127.0.0.1";
    std::string worker_host = "127.0.0.1";
  };
  // Workers only (as allreduce trains): no job "ps".
  static Layout WorkersOnly() {
    Layout layout;
    layout.ps_job = false;
    return layout;
  }

  // A training config for fashion_mlp on Fashion-MNIST with a [cluster] of
  // |layout| on free loopback ports; |training| is the [training] section.
  std::string WriteConfig(const std::string& name, const Layout& layout, const std::string& training,
                          int64_t connect_ms = 30000);

  // The environment of every process: only the plugins of the build tree.
  static std::map<std::string, std::string> Env() { return {{"WEFT_PLUGIN_PATH", ""}}; }

  ProcessResult Weft(std::vector<std::string> args);
  // `weft train` of fashion_mlp as worker |task| of |config|, to its end.
  ProcessResult TrainWorker(const std::string& config, int task = 0);
  // TrainWorker of a config the worker must refuse before it trains (exit
  // code 1); returns what it printed on stderr.
  std::string RefusalOfWorker(const std::string& config, int task = 0);

  // Starts ps task |task| with `weft serve` (or, with |train|, `weft
  // train`, which serves until the chief ends the run) and waits until it
  // listens.
  BackgroundProcess* ServePs(const std::string& config, int task, bool train = false);

  // Starts `weft train` as worker |task| in the background.
  BackgroundProcess* StartWorker(const std::string& config, int task, const std::string& model = "fashion_mlp.wgt",
                                 const std::vector<std::string>& extra = {});

  // Runs a cluster of |num_ps| ps tasks (`weft train`) and one worker to
  // its end; returns the worker's output.
  std::string TrainOnCluster(const std::string& config, int num_ps, const std::vector<std::string>& extra = {});

  // Issue 18's equivalence, in training.mode |mode| ("sync" or
  // "allreduce"): two workers of batch 64 give, step by step, the
  // parameters (and Adam's slots) of one process of batch 128 (12 steps,
  // each checkpointed), and a second run with the same seed the same bits.
  // The clusters are "<mode>_a" and "<mode>_b" (configs, checkpoints and
  // files of that name); |more_training| gives more [training] keys for
  // one, and |check| checks the chief's output once both workers ended
  // well.
  void ExpectTwoReplicasMatchOneProcess(
      const std::string& mode, const std::function<std::string(const std::string& name)>& more_training,
      const std::function<void(const std::string& name, const std::string& chief)>& check);

  // Once |watched| logged "step 20/", SIGKILLs |victim|; |watched| must end
  // (within two minutes) with exit code 3. Returns what it printed ("" when
  // it did not get that far).
  std::string OutputAfterKilling(BackgroundProcess* victim, BackgroundProcess* watched);

  // Starts the chief of |config| (its ps task must be up) and, once it
  // printed one of |progress| (it trains: the variables exist), a second
  // worker on fashion_cnn.wgt: that worker must be refused, naming the
  // first variable whose shape differs, and the chief must train on.
  void ExpectAWorkerWithAnotherModelRefused(const std::string& config, const std::vector<std::string>& progress);

  // Kept when the test failed, with the configs and logs of its processes.
  TestDir dir_{"weft_ps_train_test", true, TestDir::Keep::kOnFailure};
  std::vector<std::unique_ptr<BackgroundProcess>> tasks_;
  std::vector<std::unique_ptr<BackgroundProcess>> workers_;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_PS_TRAINING_H_
