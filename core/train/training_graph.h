// Turns a model graph (variables, a scalar loss, an initialiser) into a
// training graph: the model, the gradients of the loss with respect to
// every variable it depends on, optional clipping by global norm, one
// optimizer update per variable next to it, and a global step.
//
//   WEFT_ASSIGN_OR_RETURN(TrainingGraph tg, BuildTrainingGraph(model, options,
//   optimizer)); session->Run({}, {}, {tg.init}, nullptr); // once
//   session->Run({{tg.learning_rate, lr}, {"images", x}, {"labels", y}},
//                {tg.loss}, {tg.train}, &out);                        // each
//                step
#ifndef WEFT_CORE_TRAIN_TRAINING_GRAPH_H_
#define WEFT_CORE_TRAIN_TRAINING_GRAPH_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/graph/graph.h"
#include "core/train/optimizer.h"

namespace weft::train {

// training.mode = "sync" on a cluster (docs/distributed-internals.md,
// "Synchronous training"): each worker offers its gradients to per-variable
// accumulators on the ps tasks instead of applying them, and the chief
// applies the mean of the first N of each step.
struct SyncReplicaOptions {
  int64_t replica = 0;                // this worker's index
  int64_t replicas_to_aggregate = 1;  // N
  // The chief's accumulators are created by its graph; another worker's
  // only look them up, so one whose model has a variable the chief's lacks
  // is told so.
  bool chief = false;
  std::vector<std::string> replica_names;  // "/job:worker/task:i", for messages
  // The chief's takes and the workers' token waits fail after these (0: no
  // limit), naming who is missing, before an RPC deadline would.
  int64_t take_timeout_ms = 0;
  int64_t token_timeout_ms = 0;
  // For tests and benchmarks (a straggler): > 1 makes this worker's steps
  // take this many times as long before it offers its gradients.
  double test_delay_factor = 0;
};

// training.mode = "allreduce" (docs/distributed-internals.md, "Allreduce"): every
// worker holds the whole model; its gradients are averaged over the
// workers by CollectiveAllReduce ops, one per bucket, before clipping and
// the update, and |broadcast| makes every worker's state the chief's.
struct AllReduceGraphOptions {
  std::string group = "train";  // the collective group the ops name
  // A bucket closes before it would exceed this many bytes; the first is
  // capped at min(1 MiB, bucket_bytes) so that it leaves early, as DDP's.
  int64_t bucket_bytes = int64_t{25} << 20;
};

struct TrainingGraphOptions {
  std::string loss = "loss";  // a scalar float tensor of the model
  std::string init;           // the model's initialiser node; empty: none
  // Clip the gradients to this global norm first (torch's
  // clip_grad_norm_); 0: no clipping.
  double clip_global_norm = 0;
  // Whether a variable the loss reads only through ResourceGather (an
  // embedding) gets a sparse gradient: the rows read, summed per row, sent
  // to the variable's device and applied by the optimizer's sparse rule.
  // Off: a dense gradient of the variable's shape, as for any variable.
  bool sparse_updates = true;
  // When > 0, random ops of the model with seed 0 get this seed, so one
  // number makes a run reproducible.
  int64_t seed = 0;
  // Whether the device that will run a variable's update has a kernel for
  // an op (the optimizer then emits its fused apply op).
  HasKernelFn has_kernel;
  // The same question for the variable named by the first argument (its
  // update runs where the variable lives); when set, used instead of
  // has_kernel.
  std::function<bool(std::string_view variable, std::string_view op, const std::vector<std::pair<std::string, DType>>&)>
      variable_has_kernel;
  // Set: synchronous replicas (SyncReplicaOptions); |train| is then the
  // chief's apply step.
  std::optional<SyncReplicaOptions> sync;
  // Set: allreduce data parallelism (AllReduceGraphOptions).
  std::optional<AllReduceGraphOptions> allreduce;
};

struct TrainedVariable {
  std::string name;  // the VarHandle node
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::string> slots;  // the slot variables' VarHandle nodes
  bool sparse = false;             // updated from a sparse gradient (rows)
};

// The nodes of synchronous training (TrainingGraphOptions::sync). A worker
// feeds |local_step| (the step whose parameters it reads) and fetches
// |token| (after offering every gradient: the next step to compute) and
// |accepted|; it starts by fetching |first_token| fed local_step = -1,
// which waits until the chief released a step. The chief runs |reset|
// (fed |reset_step|) after initialising or restoring, then each step
// |apply_and_release|, or |apply| and later |release| when it saves or
// evaluates in between, and |close| at the end.
struct SyncNodes {
  std::string local_step;  // i64 Placeholder
  std::string first_token;
  // Waits for a step after local_step without offering gradients (a
  // restarted worker whose gradients for its step were kept before).
  std::string next_token;
  std::string token;
  std::string accepted;  // bool: whether the first variable's gradient was kept
  // The first variable's take: gradients averaged, and dropped since the
  // previous take as stale (older step) and late (after N arrived).
  std::string aggregated, stale, late;
  std::string apply, release, apply_and_release;
  std::string reset_step;  // i64 Placeholder
  std::string reset, close;
  // Closes the token queue after an error: waiting workers fail with
  // ABORTED instead of ending cleanly.
  std::string abort;
  // Nodes to pin next to each trained variable (its accumulator, apply,
  // take, step reset): "<variable>/sync"; and the nodes that go with the
  // global step (the token queue and its ops).
  std::vector<std::string> with_global_step;
};

struct TrainingGraph {
  Graph graph;
  std::string loss;           // tensor name
  std::string train;          // node: one step (gradients, updates, global step + 1)
  std::string init;           // node: initialises the model, the slots and the global step
  std::string learning_rate;  // f32 scalar Placeholder, fed every step
  std::string global_step;    // i64 scalar variable: steps completed
  std::string global_norm;    // tensor: the gradients' global norm before clipping
  std::vector<TrainedVariable> variables;
  // Every variable the training graph holds (model variables, slots, the
  // global step), sorted: what a checkpoint must save. Fetching
  // state_reads[i] gives state[i]'s value; feeding state_feeds[i] for
  // every i and running |restore| assigns them all.
  std::vector<std::string> state;
  std::vector<std::string> state_reads;
  std::vector<std::string> state_feeds;
  // Fetching state_ready[i] says whether state[i] has a value (bool): how a
  // worker of a cluster knows the chief has initialised the variables.
  std::vector<std::string> state_ready;
  std::string restore;
  std::optional<SyncNodes> sync;
  // Allreduce mode: the variables of each gradient bucket, in the order
  // the workers reduce them (the last layer's first), and the node that
  // sets every state variable to the chief's value.
  std::vector<std::vector<std::string>> buckets;
  std::string broadcast;
};

// Errors name the model's tensors: a loss that does not exist (with a "did
// you mean"), is not a float scalar, or depends on no variable.
Expected<TrainingGraph> BuildTrainingGraph(const Graph& model, const TrainingGraphOptions& options,
                                           const Optimizer& optimizer);

// [model] output: a model without its own loss (an imported ONNX model)
// gets one over its output tensor |output|, named "loss": "softmax_cross_entropy"
// (the mean over the batch of the cross entropy of softmax(output), [batch,
// classes], against i64 class indices) or "mse" (the mean of the squared
// differences between output and labels of its shape). The Placeholder
// |labels| is added when the model has none, and, for
// softmax_cross_entropy, the scalar |accuracy| (the fraction of rows whose
// argmax is the label) when it is not empty and not in the model.
struct BuiltInLoss {
  Graph graph;
  std::string loss;      // the loss tensor's name
  std::string accuracy;  // the accuracy tensor's name, or ""
};
Expected<BuiltInLoss> AddBuiltInLoss(const Graph& model, const std::string& output, const std::string& loss,
                                     const std::string& labels, const std::string& accuracy);

}  // namespace weft::train

#endif  // WEFT_CORE_TRAIN_TRAINING_GRAPH_H_
