#include "core/train/run.h"

namespace weft::train::internal {

Status Run::BuildGraph() {
  WEFT_ASSIGN_OR_RETURN(optimizer_choice_, ChooseOptimizer(config_, host_));
  WEFT_ASSIGN_OR_RETURN(optimizer_, Optimizer::Create(*optimizer_choice_.plugin, optimizer_choice_.hyperparameters));

  WEFT_ASSIGN_OR_RETURN(GraphDef def, options_.read_model ? options_.read_model(options_.model_path)
                                                          : ReadGraphFile(options_.model_path));
  auto model = Graph::FromGraphDef(std::move(def));
  if (!model.ok()) return model.status().WithContext(options_.model_path);
  config::ModelConfig m = config_.model;
  if (!m.output.empty()) {
    auto with_loss = AddBuiltInLoss(*model, m.output, m.loss, m.labels, m.accuracy);
    if (!with_loss.ok()) return with_loss.status().WithContext(options_.model_path);
    model = std::move(with_loss->graph);
    m.loss = with_loss->loss;
    m.accuracy = with_loss->accuracy;
  }
  for (const auto& [key, name] : {std::pair<const char*, const std::string*>{"images", &m.images},
                                  std::pair<const char*, const std::string*>{"labels", &m.labels}}) {
    const Graph::Node* node = model->Find(*name);
    if (node == nullptr || node->op_name() != "Placeholder") {
      return InvalidArgumentError(options_.model_path, ": the model has no Placeholder ", Quote(*name), " to feed the ",
                                  key, " into (set [model] ", key,
                                  " to the right node; `weft "
                                  "inspect ",
                                  options_.model_path, "` lists the inputs)");
    }
  }
  const Graph::Node* images = model->Find(m.images);
  const Shape images_shape = images->output_shapes[0];
  if (images_shape.unknown_rank() || images_shape.rank() < 1) {
    return InvalidArgumentError(options_.model_path, ": Placeholder ", Quote(m.images),
                                " needs a known rank with the batch first, e.g. f32[?,784]; it is ",
                                images_shape.ToString());
  }
  example_shape_ = Shape(std::vector<int64_t>(images_shape.dims().begin() + 1, images_shape.dims().end()));
  if (!example_shape_.IsFullyDefined()) {
    return InvalidArgumentError(options_.model_path, ": Placeholder ", Quote(m.images),
                                " must fix every dimension but the batch; it is ", images_shape.ToString());
  }
  images_ = m.images;
  labels_ = m.labels;
  if (!m.accuracy.empty()) {
    if (!model->ResolveTensor(m.accuracy).ok()) {
      return InvalidArgumentError(options_.model_path, ": the model has no tensor ", Quote(m.accuracy),
                                  " (set by [model] accuracy; set it to \"\" for none)");
    }
    accuracy_ = m.accuracy;
  }

  WEFT_ASSIGN_OR_RETURN(auto devices, runtime::DeviceSet::Open(host_));
  devices_ = std::move(devices);
  // A variable's update runs on the variable's device: place the model to
  // learn where each variable goes, so the optimizer emits the fused apply
  // op only where that device has it. On a cluster the variables go to the
  // ps tasks, whose CPU kernels are taken to be this process's.
  std::map<std::string, const runtime::KernelTable*> variable_kernels;
  if (!distributed()) {
    WEFT_ASSIGN_OR_RETURN(runtime::PlacedGraph model_placement,
                          runtime::PlaceAndPartition(*model, *devices_, runtime::PlacementOptionsFromConfig(config_)));
    for (const Graph::Node& node : model->nodes()) {
      if (node.op_name() != "VarHandle") continue;
      const int d = model_placement.placement.device[static_cast<std::size_t>(node.id)];
      variable_kernels[node.name()] = &model_placement.devices[static_cast<std::size_t>(d)]->kernels();
    }
  }
  const runtime::KernelTable* default_kernels = &devices_->default_device()->kernels();
  TrainingGraphOptions tgo;
  tgo.loss = m.loss;
  tgo.init = m.init;
  tgo.seed = config_.training.seed;
  tgo.clip_global_norm = config_.training.clip_global_norm;
  tgo.sparse_updates = config_.training.sparse_updates;
  if (sync()) {
    SyncReplicaOptions so;
    so.replica = worker_;
    so.replicas_to_aggregate = config_.training.replicas_to_aggregate > 0
                                   ? config_.training.replicas_to_aggregate
                                   : num_workers_ - config_.training.backup_workers;
    so.chief = chief();
    for (int64_t i = 0; i < num_workers_; ++i) so.replica_names.push_back(dist::TaskPrefix("worker", i));
    // A take or token wait fails, naming who is missing, before the RPC
    // that carries it would (cluster.rpc_timeout_ms).
    const int64_t rpc_ms = config_.cluster ? config_.cluster->rpc_timeout_ms : 60000;
    so.take_timeout_ms = std::max<int64_t>(1000, rpc_ms - 5000);
    so.token_timeout_ms = so.take_timeout_ms;
    // Test-only (docs/development.md): WEFT_TEST_SLOW_TASK=/job:worker/task:2
    // WEFT_TEST_SLOW_FACTOR=5 makes that worker a straggler.
    const char* slow_task = std::getenv("WEFT_TEST_SLOW_TASK");
    const char* slow_factor = std::getenv("WEFT_TEST_SLOW_FACTOR");
    if (slow_task != nullptr && slow_factor != nullptr && dist::TaskPrefix("worker", worker_) == slow_task) {
      so.test_delay_factor = std::strtod(slow_factor, nullptr);
      if (so.test_delay_factor > 1) {
        reporter_.Note(StrCat("note: WEFT_TEST_SLOW_FACTOR: this worker's steps take ", so.test_delay_factor,
                              " times as long (a straggler, for tests)"));
      }
    }
    tgo.sync = std::move(so);
  }
  if (allreduce()) {
    AllReduceGraphOptions ao;
    ao.bucket_bytes = std::max<int64_t>(1, static_cast<int64_t>(config_.training.bucket_mb * 1048576.0));
    tgo.allreduce = ao;
  }
  tgo.variable_has_kernel = [variable_kernels, default_kernels](
                                std::string_view variable, std::string_view op,
                                const std::vector<std::pair<std::string, DType>>& types) {
    auto it = variable_kernels.find(std::string(variable));
    const runtime::KernelTable* kernels = it != variable_kernels.end() ? it->second : default_kernels;
    for (const weft_kernel_def_t* kernel : kernels->ForOp(op)) {
      bool fits = true;
      for (std::size_t i = 0; i < kernel->num_constraints; ++i) {
        for (const auto& [attr, dtype] : types) {
          if (attr == kernel->constraint_attrs[i] && static_cast<weft_dtype_t>(dtype) != kernel->constraint_dtypes[i]) {
            fits = false;
          }
        }
      }
      if (fits) return true;
    }
    return false;
  };
  // On a cluster, variables above [cluster] partition_mb are split across
  // the ps tasks first, so each part gets its own slots and update.
  const Graph* to_train = &*model;
  dist::PartitionedModel partitioned;
  if (distributed()) {
    const int num_ps = static_cast<int>(cluster_->FindJob("ps")->tasks.size());
    const double mb = config_.cluster ? config_.cluster->partition_mb : 64.0;
    auto split = dist::PartitionVariables(*model, num_ps, static_cast<int64_t>(mb * 1048576.0),
                                          StrCat("/job:worker/task:", worker_));
    if (!split.ok()) return split.status().WithContext(options_.model_path);
    partitioned = std::move(*split);
    partitioned_ = partitioned.variables;
    to_train = &partitioned.graph;
  }
  auto tg = BuildTrainingGraph(*to_train, tgo, *optimizer_);
  if (!tg.ok()) return tg.status().WithContext(options_.model_path);
  tg_ = std::move(*tg);
  if (distributed()) {
    // How many workers other than the chief have finished: the chief waits
    // for them before it stops the ps tasks. Not training state: never
    // checkpointed; on ps task 0.
    GraphBuilder b;
    WEFT_RETURN_IF_ERROR(b.Import(tg_.graph));
    {
      auto scope = b.NameScope("cluster");
      Output counter =
          b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kI64)}, {"shape", AttrValue(Shape{})}}, "workers_done");
      b.Op("Assign", {counter, b.Scalar<int64_t>(0)}, {}, "workers_done/init");
      b.Op("AssignAdd", {counter, b.Scalar<int64_t>(1)}, {}, "worker_done");
      b.Op("ReadVariable", {counter}, {{"dtype", AttrValue(DType::kI64)}}, "workers_done/read");
    }
    WEFT_ASSIGN_OR_RETURN(tg_.graph, b.Build());
    // A model variable with its optimizer slots; every other state variable
    // (the global step, statistics) on its own.
    std::vector<dist::VariableGroup> groups;
    std::set<std::string> grouped;
    const int num_ps = static_cast<int>(cluster_->FindJob("ps")->tasks.size());
    // A part of a split variable goes to ps task (part mod tasks).
    auto fix = [&](dist::VariableGroup& g) {
      const dist::PartName pn = dist::ParsePartName(g.variable);
      for (const dist::PartitionedVariable& pv : partitioned_) {
        if (pn.part < 0 || pv.name != pn.whole || pn.part >= static_cast<int>(pv.parts.size())) continue;
        const dist::VariablePart& part = pv.parts[static_cast<std::size_t>(pn.part)];
        g.fixed_task = pn.part % num_ps;
        g.fixed_reason = StrCat("cluster.partition_mb = ", config_.cluster ? config_.cluster->partition_mb : 64.0, ": ",
                                Quote(pv.name), " ", pv.shape.ToString(), " is split in ", pv.parts.size(),
                                " along dimension 0; part ", part.index, " (rows ", part.offset, " to ",
                                part.offset + part.rows - 1, ") to ps task ", g.fixed_task, " of ", num_ps);
      }
    };
    for (const TrainedVariable& v : tg_.variables) {
      dist::VariableGroup g{v.name, {v.name}};
      for (const std::string& slot : v.slots) g.members.push_back(slot);
      grouped.insert(g.members.begin(), g.members.end());
      fix(g);
      groups.push_back(std::move(g));
    }
    for (const std::string& name : tg_.state) {
      if (grouped.count(name) != 0) continue;
      dist::VariableGroup g{name, {name}};
      fix(g);
      groups.push_back(std::move(g));
    }
    const std::string strategy = config_.cluster ? config_.cluster->variable_placement : "greedy_bytes";
    WEFT_ASSIGN_OR_RETURN(variable_placement_, dist::AssignVariables(tg_.graph, groups, num_ps, strategy));
    WEFT_RETURN_IF_ERROR(AddShardedSave());
  }
  return Status();
}

Status Run::AddShardedSave() {
  // Each ps task saves the variables it holds, as one data shard of the
  // checkpoint, in one step with the others; the chief commits the index.
  const int num_ps = static_cast<int>(cluster_->FindJob("ps")->tasks.size());
  std::map<std::string, int> task_of;
  for (const dist::VariableAssignment& a : variable_placement_) {
    for (const std::string& m : a.group.members) task_of[m] = a.task;
  }
  GraphBuilder b;
  WEFT_RETURN_IF_ERROR(b.Import(tg_.graph));
  auto scope = b.NameScope("cluster/save");
  Output prefix = b.Placeholder(DType::kString, Shape{}, "prefix");
  save_prefix_ = prefix.name();
  save_parts_.clear();
  for (int k = 0; k < num_ps; ++k) {
    std::vector<Output> inputs = {prefix};
    std::vector<std::string> names;
    std::vector<DType> types;
    for (std::size_t i = 0; i < tg_.state.size(); ++i) {
      if (task_of[tg_.state[i]] != k) continue;
      Output read = b.Find(tg_.state_reads[i].substr(0, tg_.state_reads[i].find(':')));
      inputs.push_back(read);
      names.push_back(tg_.state[i]);
      types.push_back(read.dtype());
    }
    Output part = b.Op("SaveShard", inputs,
                       {{"tensor_names", AttrValue(names)},
                        {"T", AttrValue(types)},
                        {"shard", AttrValue(int64_t{k})},
                        {"num_shards", AttrValue(int64_t{num_ps})}},
                       StrCat("ps", k));
    save_parts_.push_back(part.name());
    save_pins_.push_back({part.node_name(), StrCat("/job:ps/task:", k), "weft train",
                          StrCat("saves the variables of ps task ", k, " as shard ", k, " of the checkpoint")});
  }
  WEFT_ASSIGN_OR_RETURN(tg_.graph, b.Build());
  return Status();
}

Expected<TrainingPlacementPlan> Run::Plan() {
  const dist::ClusterSpec* c = options_.cluster;
  if (c != nullptr && c->distributed()) {
    const dist::JobSpec* ps = c->FindJob("ps");
    if (ps == nullptr || ps->tasks.empty()) {
      return InvalidArgumentError(config_.source,
                                  ": weft train on a cluster keeps the variables on the tasks of a "
                                  "job named \"ps\", and [cluster] has none");
    }
    cluster_ = c;
    if (const dist::JobSpec* workers = c->FindJob("worker")) {
      num_workers_ = std::max<int64_t>(1, static_cast<int64_t>(workers->tasks.size()));
    }
  }
  WEFT_RETURN_IF_ERROR(BuildGraph());
  TrainingPlacementPlan plan;
  plan.graph = tg_.graph;
  if (distributed()) {
    plan.pins = ClusterPins();
  }
  return plan;
}

std::vector<placement::Pin> Run::ClusterPins() const {
  std::vector<placement::Pin> pins = dist::VariablePins(variable_placement_, "ps");
  // A variable's update (the optimizer's ops, and a sparse gradient made
  // dense) runs where the variable lives, so only its gradient travels.
  std::set<std::string> trained;
  for (const TrainedVariable& v : tg_.variables) trained.insert(v.name);
  for (const dist::VariableAssignment& a : variable_placement_) {
    if (trained.count(a.group.variable) == 0) continue;
    // The update's name scope is "<variable>/<optimizer>", made unique
    // ("adam_1") when the slots took it first.
    for (const char* suffix : {"/*", "_*/*"}) {
      pins.push_back({StrCat(a.group.variable, "/", optimizer_->name(), suffix), StrCat("/job:ps/task:", a.task),
                      "weft train", StrCat("the update of ", Quote(a.group.variable), ", next to it")});
    }
  }
  if (tg_.sync) {
    int gs_task = 0;
    for (const dist::VariableAssignment& a : variable_placement_) {
      if (trained.count(a.group.variable) != 0) {
        pins.push_back({StrCat(a.group.variable, "/sync/*"), StrCat("/job:ps/task:", a.task), "weft train",
                        StrCat("the gradient accumulator of ", Quote(a.group.variable), ", next to it")});
      }
      for (const std::string& m : a.group.members) {
        if (m == tg_.global_step) gs_task = a.task;
      }
    }
    for (const std::string& name : tg_.sync->with_global_step) {
      pins.push_back({name, StrCat("/job:ps/task:", gs_task), "weft train",
                      "the step tokens of synchronous training, next to the global step"});
    }
    // The clipping of the means runs where they are, not on the chief.
    pins.push_back({"clip/*", StrCat("/job:ps/task:", gs_task), "weft train",
                    "the clipping of the averaged gradients, on a ps task"});
  }
  pins.push_back(
      {"cluster/workers_done", "/job:ps/task:0", "weft train", "the count of workers that finished, on ps task 0"});
  pins.insert(pins.end(), save_pins_.begin(), save_pins_.end());
  return pins;
}

}  // namespace weft::train::internal
