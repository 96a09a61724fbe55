// The training loop of `weft train`: a model graph file plus the training
// sections of a config ([model], [data], [training], [optimizer],
// [schedule], [checkpoint]) give a run that reports its progress, evaluates
// on test data, saves checkpoints and resumes from them exactly.
//
//   TrainerOptions options;
//   options.model_path = "configs/models/fashion_cnn.wgt";
//   WEFT_ASSIGN_OR_RETURN(TrainResult r, Train(config, host, options));
#ifndef WEFT_CORE_TRAIN_TRAINER_H_
#define WEFT_CORE_TRAIN_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "core/base/json.h"
#include "core/config/config.h"
#include "core/graph/graph.h"
#include "core/placement/placer.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/step_profile.h"
#include "core/runtime/trace.h"

namespace weft::dist {
struct ClusterSpec;
}  // namespace weft::dist

namespace weft::train {

struct TrainerOptions {
  std::string model_path;
  // Reads model_path into a graph; null: core/graph/serialize.h's
  // ReadGraphFile (.wg, .wgt). The CLI passes one that imports .onnx too
  // (core/onnx/onnx.h), which libweft does not link.
  std::function<Expected<GraphDef>(const std::string&)> read_model;
  // Continue from the newest checkpoint of [checkpoint] dir (from step 0
  // when there is none yet).
  bool resume = false;
  // When > 0, the run ends after this many steps in all (overrides
  // [training] steps and epochs).
  int64_t steps = 0;
  // Progress, evaluations and the final line go here.
  std::ostream* out = nullptr;
  // Redraw one progress line in place (a terminal) instead of printing a
  // line per report.
  bool interactive = false;
  // Train as one worker of this cluster (`weft train --config C --job
  // worker --task i`): the variables live on its ps tasks, this worker
  // reads its share of the data, and worker 0, the chief, initialises,
  // evaluates and checkpoints. Null or not distributed: one process.
  const dist::ClusterSpec* cluster = nullptr;
  // Record a trace of steps trace_first..trace_last (from 1, both
  // included) here: the training steps, and on a cluster every task's part
  // of them (`weft train --trace`). Null: no trace.
  runtime::TraceRecorder* trace = nullptr;
  int64_t trace_first = 10;
  int64_t trace_last = 10;
  // Add where the time of steps profile_first..profile_last went, per
  // task, here (`weft train --profile-steps`; runtime/step_profile.h).
  // Null: no profile.
  runtime::StepProfile* profile = nullptr;
  int64_t profile_first = 0;
  int64_t profile_last = 0;
  // When it holds a signal number (SIGTERM, SIGINT), the run stops before
  // its next step: the chief saves a checkpoint there first (when
  // [checkpoint] dir is set), and Train returns CANCELLED saying at which
  // step and what --resume continues from. Null: only the end stops it.
  const std::atomic<int>* stop_signal = nullptr;
  // Called with each record of training.metrics as it is made (progress,
  // evaluation, the final summary; docs/training.md) and with each note
  // the run prints ({"note": text}), on the training thread, whether or
  // not training.metrics is set: how weft.train streams its progress
  // (docs/python.md). Empty: none.
  std::function<void(const Json&)> on_record;
};

struct TrainResult {
  int64_t step = 0;                // steps completed
  double loss = 0;                 // mean training loss over the last report interval
  double test_loss = 0;            // NaN without test data
  double test_accuracy = 0;        // NaN without test data or an accuracy tensor
  double examples_per_sec = 0;     // training examples per second of training
  double input_wait_fraction = 0;  // of training time spent waiting for input
  std::string checkpoint;          // the last checkpoint written, if any
  // On a cluster: bytes this worker sent and received per training step.
  double wire_bytes_per_step = 0;
  // training.mode = "sync", on the chief: gradients averaged, and dropped
  // as stale or late, over the run (-1 otherwise).
  int64_t aggregated = -1;
  int64_t stale_dropped = 0;
  // training.mode = "sync", on each worker: how many of its own gradients
  // were dropped (-1 otherwise).
  int64_t late_gradients = -1;
};

// Checks [optimizer] of |config| against the optimizer plugins |host|
// loaded (OK when the config has no [optimizer]): `weft config check` uses
// it, so a misspelt optimizer or hyper-parameter shows up before training.
Status CheckOptimizerSection(const config::Config& config, const plugin::PluginHost& host);

// Checks the files of [data] that |config| sets: each must name a file that
// exists (an empty string or a directory is an error), with the key's
// file:line:col; every problem is listed, one per line. OK without [data].
// `weft config check` uses it; `weft train` checks the same before reading.
Status CheckDataSection(const config::Config& config);

// Checks [training] mode against the cluster it trains on: |workers| worker
// tasks (0: one process, where every mode trains alike) and whether there
// is a ps job. sync needs a ps job and replicas_to_aggregate (N) +
// backup_workers (b) = the workers, N >= 1; each error names the keys with
// their file:line:col. `weft config check` and `weft train` use it.
Status CheckTrainingMode(const config::Config& config, int64_t workers, bool has_ps);

Expected<TrainResult> Train(const config::Config& config, const plugin::PluginHost& host,
                            const TrainerOptions& options);

// What `weft place --train` shows: the training graph `weft train` builds
// for options.model_path under |config| and, with options.cluster, the pins
// that put its variables on the ps tasks (each with its reason).
struct TrainingPlacementPlan {
  Graph graph;
  std::vector<placement::Pin> pins;
};
Expected<TrainingPlacementPlan> PlanTrainingPlacement(const config::Config& config, const plugin::PluginHost& host,
                                                      const TrainerOptions& options);

}  // namespace weft::train

#endif  // WEFT_CORE_TRAIN_TRAINER_H_
