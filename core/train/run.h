// One training run (weft train): the shared skeleton of every mode, its
// state, and the members each mode's file defines (docs/training.md,
// docs/distributed-internals.md):
//   run.cc            preparing the data, evaluating, saving, restoring;
//   run_graph.cc      the training graph and, on a cluster, where its
//                     variables go;
//   trainer.cc        Go: prepare, start, hand over to the mode's strategy
//                     (strategy.h);
//   step_loop.cc      the step loop of one process, of asynchronous
//                     workers on parameter servers and of allreduce;
//   async_mode.cc     what asynchronous training adds to the loop;
//   sync_mode.cc      synchronous replicas (training.mode = "sync");
//   allreduce_mode.cc allreduce's start-up, contract and finish;
//   cluster_worker.cc a worker's start-up and finish on a cluster;
//   recovery.cc       recovery = "auto": what the chief and the others do
//                     when a task was lost, driving the state machines of
//                     recovery_machine.h.
// Internal to core/train.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/base/json.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/checkpoint/bundle.h"
#include "core/checkpoint/manager.h"
#include "core/config/value.h"
#include "core/data/pipeline.h"
#include "core/data/readers.h"
#include "core/distributed/cluster_runtime.h"
#include "core/distributed/dist_session.h"
#include "core/distributed/heartbeat.h"
#include "core/distributed/lost_task.h"
#include "core/distributed/status_board.h"
#include "core/distributed/task_service.h"
#include "core/graph/builder.h"
#include "core/graph/serialize.h"
#include "core/placement/variable_partition.h"
#include "core/placement/variable_placement.h"
#include "core/runtime/collectives.h"
#include "core/runtime/device_set.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/session.h"
#include "core/train/checkpoint_view.h"
#include "core/train/optimizer.h"
#include "core/train/reporter.h"
#include "core/train/run_support.h"
#include "core/train/schedule.h"
#include "core/train/train_config.h"
#include "core/train/trainer.h"
#include "core/train/training_graph.h"

namespace weft::train::internal {

struct Evaluation {
  double loss = kNaN, accuracy = kNaN;
  int64_t examples = 0;
};

class Run {
 public:
  Run(const config::Config& config, const plugin::PluginHost& host, const TrainerOptions& options)
      : config_(config),
        host_(host),
        options_(options),
        reporter_(options.out, options.interactive, config.training.metrics, options.on_record) {}

  // Allreduce mode: a worker that stops on an error closes its links, so
  // that the others fail at once rather than at their collective timeout.
  ~Run() {
    if (group_ == nullptr) return;
    if (!finished_) group_->Abort(AbortedError(dist::TaskPrefix("worker", worker_), " stopped on an error"));
    runtime::UnregisterCollectiveGroup(group_->options().name);
  }
  Expected<TrainResult> Go();
  Expected<TrainingPlacementPlan> Plan();

  // How the steps are taken and finished, one per mode (strategy.h). Nested,
  // so that each reads the run's state.
  class Strategy;
  class StepLoop;
  class LocalStrategy;
  class AsyncStrategy;
  class SyncStrategy;
  class AllReduceStrategy;

 private:
  // The strategy of this run's mode (trainer.cc).
  std::unique_ptr<Strategy> MakeStrategy();
  Status Prepare();
  Expected<Evaluation> Evaluate();
  Status Restore(const std::string& prefix);
  Expected<std::string> Save(int64_t step);
  // How the training examples are batched (from [data] and [training]).
  data::PipelineOptions TrainingInput() const;
  // The optimizer, the model and the training graph; on a cluster, where
  // each variable goes.
  Status BuildGraph();
  // Cluster mode: the SaveShard node of each ps task (BuildGraph).
  Status AddShardedSave();
  // Cluster mode: where the variables, the finished-workers counter and
  // the SaveShard nodes go (after the config's own pins).
  std::vector<placement::Pin> ClusterPins() const;
  // Cluster mode: which worker this is, checked against the cluster.
  Status CheckClusterRole();
  // Cluster mode: places the variables on the ps tasks, starts this
  // worker's own task and the distributed session.
  Status StartCluster();
  // Cluster and allreduce modes: waits until each of |peers| but this
  // task answers a ping (cluster.connect_timeout_ms in all), saying what it
  // waits for.
  Status WaitForPeers(dist::TaskService& service, const std::vector<dist::Peer>& peers);
  // Cluster mode, workers but the chief: waits until every variable has a
  // value (the chief initialises or restores them), saying so.
  Status WaitForChief();
  // Cluster mode, at the end: a worker says it finished; the chief waits
  // for the others (up to cluster.init_timeout_s) and stops the tasks of
  // the other jobs that serve this run.
  Status FinishCluster();
  bool distributed() const { return cluster_ != nullptr; }
  // [cluster] recovery = "auto" (docs/distributed.md, "Recovery").
  bool recovery_auto() const {
    return distributed() && config_.cluster.has_value() && config_.cluster->recovery == "auto";
  }
  int64_t recovery_timeout_s() const { return config_.cluster ? config_.cluster->recovery_timeout_s : 300; }
  ClusterRunner& runner() { return *static_cast<ClusterRunner*>(session_.get()); }
  // The incarnation of every ps task now, waiting up to |deadline| for all
  // to answer; UNAVAILABLE naming those that do not.
  Expected<std::map<std::string, uint64_t>> PsIncarnations(Clock::time_point deadline);
  // The chief, recovery = "auto": a step, save or evaluation failed with
  // |why|, recoverable. Waits for every ps task; when one came back
  // restarted (or |always|: sync mode), restores every ps task from the
  // newest checkpoint (step_ and the data position go back with it).
  Status Recover(const Status& why, bool always = false);
  // Another worker, recovery = "auto": waits until every variable has a
  // value again (the chief restores them).
  Status WaitForRecovery(const Status& why);
  // Another worker, recovery = "auto": where it got to before it was
  // restarted, from the other tasks' stores; 0 when unknown.
  int64_t RemoteProgress();
  // Records that this worker reached |step| with the other tasks:
  // recovery = "auto", every step with every task (a restarted worker
  // rejoins there); otherwise with the chief, at most once a second (it
  // names the step a lost worker reached).
  void RecordProgress(int64_t step);
  // The step worker |w| last recorded with this task (the chief); -1 when
  // none.
  int64_t RecordedStep(int64_t w);
  // The chief, at the end: worker |w|, which did not say it finished, if
  // the heartbeats declared it lost: "worker /job:worker/task:1
  // (tcp://...) was lost at step 131 (...)"; empty while it is alive.
  std::string LostWorker(int64_t w);
  // "worker /job:worker/task:1 (at step 120)", or "workers ..."
  // for several: who the chief waits for, for its lines.
  std::string AwaitedWorkers(const std::vector<int64_t>& workers);
  // A worker other than the chief, recovery off: the chief did not answer
  // a ping (|why|) at |step|; what this worker stops with.
  Status ChiefLost(int64_t step, const Status& why) const;
  // A signal asked the run to stop (TrainerOptions::stop_signal).
  bool StopRequested() const { return options_.stop_signal != nullptr && options_.stop_signal->load() != 0; }
  // What the run stops with then, at step_: the chief saves it first
  // (unless |saved_step| is step_ already).
  Status StopHere(int64_t saved_step);
  // Every task of the cluster but this one.
  std::vector<std::string> OtherTasks() const;
  bool chief() const { return worker_ == 0; }
  // training.mode = "sync" on a cluster (one process trains alike in every
  // mode).
  bool sync() const { return distributed() && config_.training.mode == "sync"; }
  // training.mode = "allreduce" on a cluster: a local session per worker,
  // the gradients averaged by collectives.
  bool allreduce() const { return allreduce_cluster_ != nullptr; }
  // Whether a step reads a global batch, each worker its slice.
  bool sharded() const { return sync() || allreduce(); }
  // Allreduce mode: starts this worker's task (the chief's serves the
  // rendezvous store), waits for the other workers, checks that they train
  // the same model alike, and joins the collective group.
  Status StartAllReduce();
  // Allreduce mode: what every worker must agree on, one line each.
  std::vector<std::string> Contract() const;
  Status CheckContracts(runtime::KvStore& store, const std::string& prefix);
  // Allreduce mode, at the end: each worker says it finished; the chief
  // keeps the store up until all did.
  Status FinishAllReduce();
  // Allreduce mode: which other workers do not answer, for messages.
  std::string DiagnosePeers();
  // The end of a run on the chief or in one process: the last checkpoint
  // (unless |saved_step| is the current one), the final evaluation, and
  // the result's step and test figures.
  Status EndOfTraining(int64_t saved_step, TrainResult* result);
  // Where the run starts: initialises, restores or waits for the
  // variables and sets step_ and the input position (*|restored|: from a
  // checkpoint). A result when this worker has nothing left to do.
  Expected<std::optional<TrainResult>> Start(bool* restored);
  // Allreduce mode, after Start: every worker takes the chief's variables
  // and its step.
  Status JoinAllReduce();
  // Allreduce mode, at the end: the collectives' figures for the |trained|
  // steps, then FinishAllReduce.
  Status EndAllReduce(int64_t trained);
  // Cluster mode: what this worker sent and received per step over the
  // |trained| steps since |wire_before|, as a note and in |result|.
  void ReportWire(const dist::WireCounters& wire_before, int64_t trained, TrainResult* result);
  // Sync mode, every worker (the chief's on a thread of its own): offers
  // the gradients of the step it holds, then waits for the next, until the
  // last step is released. Counts go to |stats|; |report|: progress lines.
  struct SyncWorkerStats;
  Status SyncWorkerLoop(SyncWorkerStats* stats, bool report);
  // Sync mode, a worker but the chief, recovery = "auto": its step failed
  // with |why| while the chief recovers; takes the first step the chief
  // releases again. nullopt: the run ended meanwhile.
  Expected<std::optional<int64_t>> RejoinSync(const Status& why);
  // Sync mode, recovery = "auto": whether the chief ended the run (or
  // asked this worker to stop).
  bool SyncRunEnded();

  const config::Config& config_;
  const plugin::PluginHost& host_;
  const TrainerOptions& options_;
  Reporter reporter_;

  OptimizerChoice optimizer_choice_;
  std::unique_ptr<Optimizer> optimizer_;
  std::shared_ptr<runtime::DeviceSet> devices_;
  TrainingGraph tg_;
  std::unique_ptr<StepRunner> session_;
  // Cluster mode (weft train --job worker --task i); null in one process.
  const dist::ClusterSpec* cluster_ = nullptr;
  int64_t worker_ = 0;
  int64_t num_workers_ = 1;
  std::vector<dist::VariableAssignment> variable_placement_;
  // Cluster mode: the variables split across the ps tasks.
  std::vector<dist::PartitionedVariable> partitioned_;
  // Cluster mode: the sharded save (AddShardedSave).
  std::string save_prefix_;
  std::vector<std::string> save_parts_;
  std::vector<placement::Pin> save_pins_;
  Shape example_shape_;
  std::string images_, labels_, accuracy_;
  std::shared_ptr<const data::Examples> train_, test_;
  std::unique_ptr<data::Pipeline> pipeline_;
  std::unique_ptr<checkpoint::CheckpointManager> checkpoints_;
  std::unique_ptr<checkpoint::DirectoryLock> dir_lock_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;
  // Allreduce mode. The group goes before the service that serves its
  // store.
  const dist::ClusterSpec* allreduce_cluster_ = nullptr;
  std::unique_ptr<dist::TaskService> service_;
  std::shared_ptr<runtime::KvStore> store_;
  std::string store_prefix_;
  std::shared_ptr<runtime::CollectiveGroup> group_;
  runtime::CollectiveGroup::Stats allreduce_start_;
  bool finished_ = false;
  // What this worker's task answers to `weft cluster status`.
  std::shared_ptr<dist::StatusBoard> board_ = std::make_shared<dist::StatusBoard>();
  // recovery = "auto": the incarnation of each ps task whose state the
  // chief initialised or restored; the chief asked this worker to stop.
  std::map<std::string, uint64_t> state_incarnations_;
  std::shared_ptr<std::atomic<bool>> told_to_stop_ = std::make_shared<std::atomic<bool>>(false);
  // The chief, recovery = "auto": the end of training (last checkpoint,
  // evaluation) already ran inside the step loop.
  bool ended_ = false;
  Clock::time_point progress_recorded_at_{};
  // The chief, recovery = "auto": the evaluation once every worker finished
  // (a worker slowed by restarts still trains after the chief's last step).
  std::optional<Evaluation> final_evaluation_;

  // The options of training step |step| (from 1): traced when it is one of
  // --trace-steps, profiled when one of --profile-steps.
  runtime::RunOptions TraceStep(int64_t step) const {
    runtime::RunOptions o;
    if (options_.trace != nullptr && step >= options_.trace_first && step <= options_.trace_last) {
      o.trace = options_.trace;
    }
    if (options_.profile != nullptr && step >= options_.profile_first && step <= options_.profile_last) {
      o.profile = options_.profile;
    }
    return o;
  }
};

// What a sync worker's loop counts (read by the chief's apply loop while
// its own worker thread runs).
struct Run::SyncWorkerStats {
  std::mutex mutex;
  double loss_sum = 0, accuracy_sum = 0;
  int64_t steps = 0;     // steps computed since the chief last read them
  int64_t accepted = 0;  // of this worker's gradients (the first variable's), in all
  int64_t late = 0;      // dropped as stale or late, in all
  int64_t computed = 0;  // steps computed in all
  double last_loss = kNaN;
  double seconds = 0;   // spent in steps, in all
  int64_t reached = 0;  // the last step released to this worker
};

}  // namespace weft::train::internal
