#include "core/train/training_graph.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/base/strings.h"
#include "core/grad/gradients.h"
#include "core/train/schedule.h"

namespace weft::train {
namespace {

bool IsRandomOp(const std::string& op) {
  return op == "RandomUniform" || op == "RandomNormal" || op == "TruncatedNormal" || op == "RandomShuffle";
}

bool IsFloat(DType t) { return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 || t == DType::kBF16; }

// The VarHandle nodes |loss| depends on through data edges, sorted by name,
// with the ReadVariable nodes that read each (the update must wait for
// them, or a forward read could see the updated value).
struct Reached {
  std::map<std::string, int> variables;
  std::map<int, std::vector<Output>> reads;
  // Per variable, the ResourceGather nodes reading it, and whether another
  // op (not ReadVariable) uses its handle.
  std::map<int, std::vector<int>> gathers;
  std::set<int> other_uses;
};

Reached ReachedVariables(const GraphBuilder& b, const Output& loss) {
  Reached r;
  std::vector<int> stack = {loss.node()};
  std::set<int> seen = {loss.node()};
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    const NodeDef& def = b.node_def(id);
    if (def.op == "VarHandle") r.variables.emplace(def.name, id);
    for (const Output& in : b.Inputs(id)) {
      if (b.node_def(in.node()).op == "VarHandle") {
        if (def.op == "ReadVariable") {
          r.reads[in.node()].push_back(Output(&b, id, -1));
        } else if (def.op == "ResourceGather" && in.index() == 0 && b.Inputs(id)[0].node() == in.node()) {
          r.gathers[in.node()].push_back(id);
        } else {
          r.other_uses.insert(in.node());
        }
      }
      if (seen.insert(in.node()).second) stack.push_back(in.node());
    }
  }
  return r;
}

// Builds one training graph; the members are what the phases share, set in
// the order Make runs the phases.
class TrainingGraphMaker {
 public:
  TrainingGraphMaker(const TrainingGraphOptions& options, const Optimizer& optimizer)
      : options_(options), optimizer_(optimizer) {}
  TrainingGraphMaker(const TrainingGraphMaker&) = delete;
  TrainingGraphMaker& operator=(const TrainingGraphMaker&) = delete;

  Expected<TrainingGraph> Make(const Graph& model);

 private:
  Status ImportModel(const Graph& model);
  Status FindTrainedVariables();
  void ChooseGradientInputs();
  Status AddGradients();
  Output SumGatheredRows(std::size_t i, const std::vector<Output>& x_grads);
  Status AddSyncReplicas();
  std::vector<Output> OfferGradients(const Output& local_step);
  void AddStepTokens(const Output& local_step, const std::vector<Output>& offers, SyncNodes* sn);
  void TakeMeans(SyncNodes* sn);
  Expected<std::vector<std::vector<std::size_t>>> AllReduceBuckets() const;
  void AddAllReduce(const std::vector<std::vector<std::size_t>>& buckets);
  void AddGlobalStep();
  Status AddUpdates();
  Expected<Output> AddUpdate(std::size_t i);
  void AddSyncControl();
  void CollectState();
  void AddBroadcast();
  void AddCheckpointOps();

  const TrainingGraphOptions& options_;
  const Optimizer& optimizer_;
  GraphBuilder b_;
  Output loss_;
  Output model_init_;
  Reached reached_;
  TrainingGraph tg_;
  std::vector<Output> handles_;
  std::vector<Output> xs_;
  std::vector<std::pair<std::size_t, std::size_t>> x_range_;  // per variable: [first, end) in xs_
  std::vector<Output> grads_;                                 // per variable: dense, or the rows of |row_ids_|
  std::vector<Output> row_ids_;
  Output sync_token_queue_;
  std::vector<Output> sync_accumulators_;
  std::vector<Output> inits_;
  Output step_var_, learning_rate_, step_;
};

Expected<TrainingGraph> TrainingGraphMaker::Make(const Graph& model) {
  WEFT_RETURN_IF_ERROR(ImportModel(model));
  reached_ = ReachedVariables(b_, loss_);
  WEFT_RETURN_IF_ERROR(FindTrainedVariables());
  ChooseGradientInputs();
  WEFT_RETURN_IF_ERROR(AddGradients());
  if (options_.sync) {
    WEFT_RETURN_IF_ERROR(AddSyncReplicas());
  }
  if (options_.allreduce) {
    WEFT_ASSIGN_OR_RETURN(auto buckets, AllReduceBuckets());
    AddAllReduce(buckets);
  }
  if (options_.clip_global_norm > 0) {
    auto scope = b_.NameScope("clip");
    Output norm;
    WEFT_ASSIGN_OR_RETURN(grads_, ClipByGlobalNorm(b_, grads_, options_.clip_global_norm, &norm));
    tg_.global_norm = norm.name();
  }
  AddGlobalStep();
  WEFT_RETURN_IF_ERROR(AddUpdates());
  if (tg_.sync) AddSyncControl();
  {
    auto wait = b_.ControlDependencies(inits_);
    tg_.init = b_.Op("NoOp", {}, {}, "train/init").node_name();
  }
  tg_.loss = loss_.name();
  CollectState();
  if (options_.allreduce) AddBroadcast();
  AddCheckpointOps();
  WEFT_ASSIGN_OR_RETURN(tg_.graph, b_.Build());
  return std::move(tg_);
}

// Imports |model| (its random ops seeded first when options_.seed is set)
// and finds the loss and the model's initialiser.
Status TrainingGraphMaker::ImportModel(const Graph& model) {
  GraphDef def = model.ToGraphDef();
  if (options_.seed > 0) {
    for (NodeDef& node : def.nodes) {
      auto seed = node.attrs.find("seed");
      if (IsRandomOp(node.op) && seed != node.attrs.end() && seed->second.get<int64_t>() == 0) {
        seed->second = AttrValue(options_.seed);
      }
    }
  }
  WEFT_ASSIGN_OR_RETURN(Graph seeded, Graph::FromGraphDef(std::move(def)));

  WEFT_RETURN_IF_ERROR(b_.Import(seeded));
  auto loss = b_.Resolve(options_.loss);
  if (!loss.ok()) {
    return loss.status().WithContext(StrCat("the loss (set by [model] loss = ", Quote(options_.loss), ")"));
  }
  loss_ = *loss;
  if (!IsFloat(loss_.dtype()) || !(!loss_.shape().unknown_rank() && loss_.shape().rank() == 0)) {
    return InvalidArgumentError("the loss ", Quote(options_.loss), " must be a float scalar, but it is ",
                                DTypeName(loss_.dtype()), loss_.shape().ToString(),
                                "; reduce it (e.g. with Mean) in the model");
  }
  if (!options_.init.empty()) {
    const Output init = b_.Find(options_.init);
    if (!init.valid()) {
      auto resolved = b_.Resolve(options_.init);  // for its "did you mean"
      return (resolved.ok() ? NotFoundError("no node ", Quote(options_.init)) : resolved.status())
          .WithContext(StrCat("the initialiser (set by [model] init = ", Quote(options_.init), "; \"\" for none)"));
    }
    model_init_ = Output(&b_, init.node(), -1);
  }
  return Status();
}

// The float variables the loss reaches are the ones trained.
Status TrainingGraphMaker::FindTrainedVariables() {
  for (const auto& [name, id] : reached_.variables) {
    const NodeDef& node = b_.node_def(id);
    const DType dtype = node.attrs.at("dtype").get<DType>();
    if (!IsFloat(dtype)) continue;  // integer state (counters) is not trained
    handles_.push_back(Output(&b_, id, 0));
    tg_.variables.push_back({name, dtype, node.attrs.at("shape").get<Shape>(), {}});
  }
  if (handles_.empty()) {
    return InvalidArgumentError("the loss ", Quote(options_.loss),
                                " depends on no float variable, so there is nothing to train (the "
                                "model's "
                                "weights must be VarHandle variables, not constants)");
  }
  return Status();
}

// A variable read only through gathers gets the gradients of the gathered
// rows (xs are the gathers' outputs), not one of its whole shape.
void TrainingGraphMaker::ChooseGradientInputs() {
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    const int id = handles_[i].node();
    const auto gathers = reached_.gathers.find(id);
    const bool sparse = options_.sparse_updates && gathers != reached_.gathers.end() && reached_.reads.count(id) == 0 &&
                        reached_.other_uses.count(id) == 0 && !tg_.variables[i].shape.unknown_rank() &&
                        tg_.variables[i].shape.rank() >= 1;
    tg_.variables[i].sparse = sparse;
    const std::size_t first = xs_.size();
    if (sparse) {
      for (int g : gathers->second) xs_.push_back(Output(&b_, g, 0));
    } else {
      xs_.push_back(handles_[i]);
    }
    x_range_.emplace_back(first, xs_.size());
  }
}

Status TrainingGraphMaker::AddGradients() {
  row_ids_.resize(handles_.size());
  grad::GradientOptions gopts;
  gopts.scope = "gradients";
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> x_grads, grad::AddGradients(b_, {loss_}, xs_, {}, gopts));
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    if (!tg_.variables[i].sparse) {
      grads_.push_back(x_grads[x_range_[i].first]);
      continue;
    }
    grads_.push_back(SumGatheredRows(i, x_grads));
  }
  return Status();
}

// The rows' gradients of every gather of variable |i|, flattened to [n] +
// row shape, then summed per distinct row: what the variable's device
// receives. Sets row_ids_[i] to the distinct rows.
Output TrainingGraphMaker::SumGatheredRows(std::size_t i, const std::vector<Output>& x_grads) {
  const auto [first, end] = x_range_[i];
  auto scope = b_.NameScope(StrCat("gradients/", tg_.variables[i].name, "/rows"));
  std::vector<int64_t> row_shape = tg_.variables[i].shape.dims();
  row_shape[0] = -1;
  std::vector<Output> ids, rows;
  for (std::size_t k = first; k < end; ++k) {
    Output gathered_ids = b_.Inputs(xs_[k].node())[1];
    Output flat = b_.Op("Reshape", {gathered_ids, b_.Const(Tensor::FromVector<int64_t>({-1}))});
    if (flat.dtype() != DType::kI64) flat = b_.Op("Cast", {flat}, {{"DstT", AttrValue(DType::kI64)}});
    ids.push_back(flat);
    rows.push_back(b_.Op("Reshape", {x_grads[k], b_.Const(Tensor::FromVector<int64_t>(row_shape))}));
  }
  Output all_ids = ids.size() == 1 ? ids[0] : b_.Op("Concat", ids, {{"axis", AttrValue(int64_t{0})}}, "ids");
  Output all_rows = rows.size() == 1 ? rows[0] : b_.Op("Concat", rows, {{"axis", AttrValue(int64_t{0})}}, "values");
  std::vector<Output> unique = b_.AddNode("Unique", {all_ids}, {{"out_idx", AttrValue(DType::kI32)}}, "unique");
  Output count = b_.Op("Size", {unique[0]}, {{"out_type", AttrValue(DType::kI32)}}, "count");
  Output sum = b_.Op("UnsortedSegmentSum", {all_rows, unique[1], count}, {}, "sum");
  row_ids_[i] = unique[0];
  return sum;
}

// Synchronous replicas: this worker offers its gradients to the
// accumulators (on the variables' ps tasks) and waits for the next step;
// the chief's update is built from the means it takes from them.
Status TrainingGraphMaker::AddSyncReplicas() {
  const SyncReplicaOptions& so = *options_.sync;
  for (const TrainedVariable& v : tg_.variables) {
    if (v.sparse) {
      return UnimplementedError(
          "training.mode = \"sync\" does not aggregate sparse gradients yet: ", Quote(v.name), " (", DTypeName(v.dtype),
          v.shape.ToString(),
          ") is read only through gathers; set training.sparse_updates = false (a dense gradient of its whole "
          "shape per worker per step) or use mode = \"async\"");
    }
  }
  SyncNodes sn;
  if (so.test_delay_factor > 1) {
    std::vector<DType> types;
    for (const Output& g : grads_) types.push_back(g.dtype());
    grads_ = b_.AddNode("_TestDelay", grads_, {{"T", AttrValue(types)}, {"factor", AttrValue(so.test_delay_factor)}},
                        "sync/test_delay");
  }
  Output local_step = b_.Placeholder(DType::kI64, Shape{}, "sync/local_step");
  sn.local_step = local_step.name();
  const std::vector<Output> offers = OfferGradients(local_step);
  sn.accepted = offers[0].name();
  AddStepTokens(local_step, offers, &sn);
  TakeMeans(&sn);
  tg_.sync = std::move(sn);
  return Status();
}

// One accumulator per variable (sync_accumulators_) and this worker's
// offer of its gradient to it.
std::vector<Output> TrainingGraphMaker::OfferGradients(const Output& local_step) {
  const SyncReplicaOptions& so = *options_.sync;
  std::vector<Output> offers;
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    const TrainedVariable& v = tg_.variables[i];
    Output acc = b_.Op("GradientAccumulator", {},
                       {{"dtype", AttrValue(v.dtype)},
                        {"shape", AttrValue(v.shape)},
                        {"replicas_to_aggregate", AttrValue(so.replicas_to_aggregate)},
                        {"variable", AttrValue(v.name)},
                        {"create", AttrValue(so.chief)},
                        {"shared_name", AttrValue(StrCat(v.name, "/sync/accumulator"))}},
                       StrCat(v.name, "/sync/accumulator"));
    sync_accumulators_.push_back(acc);
    const std::string replica_name = so.replica < static_cast<int64_t>(so.replica_names.size())
                                         ? so.replica_names[static_cast<std::size_t>(so.replica)]
                                         : StrCat("replica ", so.replica);
    offers.push_back(b_.Op("AccumulatorApplyGradient", {acc, local_step, grads_[i]},
                           {{"replica", AttrValue(so.replica)}, {"replica_name", AttrValue(replica_name)}},
                           StrCat(v.name, "/sync/apply")));
  }
  return offers;
}

// The step token queue and the worker's three ways of taking a step from it.
void TrainingGraphMaker::AddStepTokens(const Output& local_step, const std::vector<Output>& offers, SyncNodes* sn) {
  const SyncReplicaOptions& so = *options_.sync;
  sync_token_queue_ = b_.Op("StepTokenQueue", {}, {{"shared_name", AttrValue("sync/token_queue")}}, "sync/token_queue");
  const AttrMap timeout = {{"timeout_ms", AttrValue(so.token_timeout_ms)}};
  // A queue an earlier run closed (on a ps task that kept serving) is
  // waited on until this run's chief opens it again.
  AttrMap first = timeout;
  first["wait_open"] = AttrValue(true);
  sn->first_token = b_.Op("StepTokenTake", {sync_token_queue_, local_step}, first, "sync/first_token").name();
  // recovery = "auto": a worker whose gradients for its step are kept
  // already (from before it was restarted) waits for the next step.
  sn->next_token = b_.Op("StepTokenTake", {sync_token_queue_, local_step}, timeout, "sync/next_token").name();
  auto wait = b_.ControlDependencies(offers);
  sn->token = b_.Op("StepTokenTake", {sync_token_queue_, local_step}, timeout, "sync/token").name();
}

// The chief's part: the mean of each variable's first N gradients.
void TrainingGraphMaker::TakeMeans(SyncNodes* sn) {
  const SyncReplicaOptions& so = *options_.sync;
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    const TrainedVariable& v = tg_.variables[i];
    std::vector<Output> take = b_.AddNode("AccumulatorTakeGradient", {sync_accumulators_[i]},
                                          {{"dtype", AttrValue(v.dtype)},
                                           {"timeout_ms", AttrValue(so.take_timeout_ms)},
                                           {"replica_names", AttrValue(so.replica_names)}},
                                          StrCat(v.name, "/sync/take"));
    grads_[i] = take[0];
    if (i == 0) {
      sn->aggregated = take[1].name();
      sn->stale = take[2].name();
      sn->late = take[3].name();
    }
  }
}

// Buckets of gradients, the last layer's first (the order backward makes
// them), each averaged over the workers by one fused allreduce while
// backward goes on with the earlier layers. Returns the variables of each
// bucket.
Expected<std::vector<std::vector<std::size_t>>> TrainingGraphMaker::AllReduceBuckets() const {
  const AllReduceGraphOptions& ao = *options_.allreduce;
  std::vector<std::pair<int, std::size_t>> order;  // (first use, variable), latest use first
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    if (tg_.variables[i].sparse) {
      return InvalidArgumentError("training.mode = \"allreduce\" reduces dense gradients, and variable ",
                                  Quote(tg_.variables[i].name),
                                  " is read only through gathers (a sparse gradient); set [training] "
                                  "sparse_updates = false to reduce it densely");
    }
    int first = b_.num_nodes();
    if (auto r = reached_.reads.find(handles_[i].node()); r != reached_.reads.end()) {
      for (const Output& read : r->second) first = std::min(first, read.node());
    }
    if (auto g = reached_.gathers.find(handles_[i].node()); g != reached_.gathers.end()) {
      for (int id : g->second) first = std::min(first, id);
    }
    order.emplace_back(first, i);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::vector<std::size_t>> buckets;
  int64_t bytes = 0;
  for (const auto& [first, i] : order) {
    const TrainedVariable& v = tg_.variables[i];
    const int64_t size = v.shape.IsFullyDefined() ? v.shape.num_elements() * static_cast<int64_t>(DTypeSize(v.dtype))
                                                  : std::numeric_limits<int64_t>::max() / 4;
    // The open bucket's cap: the first one's is at most 1 MiB.
    const int64_t cap = buckets.size() == 1 ? std::min<int64_t>(ao.bucket_bytes, int64_t{1} << 20) : ao.bucket_bytes;
    const bool fits = !buckets.empty() && tg_.variables[buckets.back().front()].dtype == v.dtype && bytes + size <= cap;
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += size;
  }
  return buckets;
}

// One CollectiveAllReduce per bucket, whose means replace the gradients.
void TrainingGraphMaker::AddAllReduce(const std::vector<std::vector<std::size_t>>& buckets) {
  const AllReduceGraphOptions& ao = *options_.allreduce;
  auto scope = b_.NameScope("allreduce");
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    std::vector<Output> inputs;
    std::vector<std::string> names;
    for (std::size_t i : buckets[k]) {
      inputs.push_back(grads_[i]);
      names.push_back(tg_.variables[i].name);
    }
    std::vector<Output> reduced = b_.AddNode("CollectiveAllReduce", inputs,
                                             {{"N", AttrValue(static_cast<int64_t>(inputs.size()))},
                                              {"T", AttrValue(tg_.variables[buckets[k].front()].dtype)},
                                              {"group", AttrValue(ao.group)},
                                              {"round", AttrValue("train")},
                                              {"order", AttrValue(static_cast<int64_t>(k))},
                                              {"round_size", AttrValue(static_cast<int64_t>(buckets.size()))},
                                              {"reduction", AttrValue("mean")}},
                                             StrCat("bucket_", k));
    for (std::size_t j = 0; j < buckets[k].size(); ++j) grads_[buckets[k][j]] = reduced[j];
    tg_.buckets.push_back(std::move(names));
  }
}

// The learning rate, the global step and this update's step number.
void TrainingGraphMaker::AddGlobalStep() {
  if (model_init_.valid()) inits_.push_back(model_init_);
  {
    auto scope = b_.NameScope("train");
    learning_rate_ = b_.Placeholder(DType::kF32, Shape{}, "learning_rate");
    step_var_ =
        b_.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kI64)}, {"shape", AttrValue(Shape{})}}, "global_step");
    inits_.push_back(b_.Op("Assign", {step_var_, b_.Scalar<int64_t>(0, "zero")}, {}, "global_step/init"));
    Output completed = b_.Op("ReadVariable", {step_var_}, {{"dtype", AttrValue(DType::kI64)}}, "global_step/read");
    // The update being built is step completed + 1 (1-based, as Adam's
    // bias correction counts).
    step_ = b_.Op("Add", {completed, b_.Scalar<int64_t>(1, "one")}, {}, "step");
  }
  tg_.global_step = step_var_.node_name();
  tg_.learning_rate = learning_rate_.name();
}

// One optimizer update per variable, then the step that runs them all and
// increments the global step.
Status TrainingGraphMaker::AddUpdates() {
  std::vector<Output> updates;
  for (std::size_t i = 0; i < handles_.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Output done, AddUpdate(i));
    updates.push_back(done);
  }
  auto scope = b_.NameScope("train");
  Output increment;
  {
    auto wait = b_.ControlDependencies(updates);
    increment = b_.Op("Assign", {step_var_, step_}, {}, "global_step/increment");
  }
  auto wait = b_.ControlDependencies({increment});
  tg_.train = b_.Op("NoOp", {}, {}, "step").node_name();
  return Status();
}

// Variable |i|'s optimizer slots (initialised by inits_) and its update.
Expected<Output> TrainingGraphMaker::AddUpdate(std::size_t i) {
  TrainedVariable& v = tg_.variables[i];
  UpdateArgs args;
  args.variable_name = v.name;
  args.dtype = v.dtype;
  args.variable = handles_[i];
  args.gradient = grads_[i];
  args.indices = row_ids_[i];
  args.step = step_;
  {
    auto scope = b_.NameScope(StrCat(v.name, "/", optimizer_.name()));
    args.learning_rate = v.dtype == DType::kF32
                             ? learning_rate_
                             : b_.Op("Cast", {learning_rate_}, {{"DstT", AttrValue(v.dtype)}}, "learning_rate");
    WEFT_ASSIGN_OR_RETURN(std::vector<SlotDef> slots, optimizer_.Slots(v.dtype, v.shape));
    for (const SlotDef& slot : slots) {
      Output handle = b_.Op("VarHandle", {}, {{"dtype", AttrValue(v.dtype)}, {"shape", AttrValue(v.shape)}}, slot.name);
      Output value = b_.Op("Fill", {b_.Const(Tensor::FromVector<int64_t>(v.shape.dims()), StrCat(slot.name, "/shape")),
                                    b_.Op("Cast", {b_.Scalar<double>(slot.initial_value, StrCat(slot.name, "/value"))},
                                          {{"DstT", AttrValue(v.dtype)}})});
      inits_.push_back(b_.Op("Assign", {handle, value}, {}, StrCat(slot.name, "/init")));
      args.slots.push_back(handle);
      v.slots.push_back(handle.node_name());
    }
  }
  // The update waits for this step's forward reads of the variable. In
  // sync mode those are in the workers' steps, not in the chief's apply.
  const auto reads = reached_.reads.find(handles_[i].node());
  std::vector<Output> after = reads == reached_.reads.end() || options_.sync ? std::vector<Output>{} : reads->second;
  auto wait = b_.ControlDependencies(after);
  HasKernelFn has_kernel = options_.has_kernel;
  if (options_.variable_has_kernel) {
    // Called only during BuildUpdate below, while |v| and the options live.
    has_kernel = [&options = options_, &v](std::string_view op,
                                           const std::vector<std::pair<std::string, DType>>& types) {
      return options.variable_has_kernel(v.name, op, types);
    };
  }
  return optimizer_.BuildUpdate(b_, args, has_kernel);
}

// The chief's side of the step tokens: release, reset, close and abort.
void TrainingGraphMaker::AddSyncControl() {
  SyncNodes& sn = *tg_.sync;
  sn.apply = tg_.train;
  // release runs on its own after apply (the chief saves or evaluates in
  // between); apply_and_release after the update in one step.
  Output completed = b_.Op("ReadVariable", {step_var_}, {{"dtype", AttrValue(DType::kI64)}}, "sync/global_step_read");
  sn.release = b_.Op("StepTokenPut", {sync_token_queue_, completed}, {}, "sync/release").node_name();
  {
    auto wait = b_.ControlDependencies({Output(&b_, b_.Find(tg_.train).node(), -1)});
    sn.apply_and_release = b_.Op("StepTokenPut", {sync_token_queue_, step_}, {}, "sync/apply_and_release").node_name();
  }
  Output reset_step = b_.Placeholder(DType::kI64, Shape{}, "sync/reset_step");
  sn.reset_step = reset_step.name();
  std::vector<Output> resets;
  for (std::size_t i = 0; i < sync_accumulators_.size(); ++i) {
    resets.push_back(b_.Op("AccumulatorSetGlobalStep", {sync_accumulators_[i], reset_step}, {},
                           StrCat(tg_.variables[i].name, "/sync/set_step")));
  }
  {
    // The first step is released only once every accumulator is at it:
    // a worker's first gradient must not meet one not reset yet.
    auto wait = b_.ControlDependencies(resets);
    Output tokens =
        b_.Op("StepTokenPut", {sync_token_queue_, reset_step}, {{"reset", AttrValue(true)}}, "sync/reset_tokens");
    auto after = b_.ControlDependencies({tokens});
    sn.reset = b_.Op("NoOp", {}, {}, "sync/reset").node_name();
  }
  sn.close = b_.Op("StepTokenClose", {sync_token_queue_}, {}, "sync/close").node_name();
  sn.abort = b_.Op("StepTokenClose", {sync_token_queue_}, {{"aborted", AttrValue(true)}}, "sync/abort").node_name();
  sn.with_global_step = {
      "sync/token_queue", "sync/first_token",       "sync/next_token",   "sync/token", "sync/global_step_read",
      "sync/release",     "sync/apply_and_release", "sync/reset_tokens", "sync/reset", "sync/close",
      "sync/abort"};
}

// tg_.state: every variable, slot and the global step, sorted.
void TrainingGraphMaker::CollectState() {
  for (const TrainedVariable& v : tg_.variables) {
    tg_.state.push_back(v.name);
    for (const std::string& s : v.slots) tg_.state.push_back(s);
  }
  tg_.state.push_back(tg_.global_step);
  // Variables of the model the loss does not reach (batch-norm moving
  // statistics, counters) are state too.
  for (int id = 0; id < b_.num_nodes(); ++id) {
    if (b_.node_def(id).op == "VarHandle") tg_.state.push_back(b_.node_def(id).name);
  }
  std::sort(tg_.state.begin(), tg_.state.end());
  tg_.state.erase(std::unique(tg_.state.begin(), tg_.state.end()), tg_.state.end());
}

// Every worker's state becomes the chief's (after init or a restore),
// whatever its own init gave: the replicas start bit-identical.
void TrainingGraphMaker::AddBroadcast() {
  auto scope = b_.NameScope("allreduce");
  std::vector<std::pair<std::string, DType>> shared;
  for (const std::string& name : tg_.state) {
    const DType dtype = b_.node_def(b_.Find(name).node()).attrs.at("dtype").get<DType>();
    if (dtype != DType::kBool && dtype != DType::kString && dtype != DType::kI16) shared.emplace_back(name, dtype);
  }
  std::vector<Output> assigns;
  for (std::size_t k = 0; k < shared.size(); ++k) {
    const auto& [name, dtype] = shared[k];
    const Output handle = b_.Find(name);
    Output read = b_.Op("ReadVariable", {handle}, {{"dtype", AttrValue(dtype)}}, StrCat(name, "/read"));
    Output chief = b_.Op("CollectiveBroadcast", {read},
                         {{"T", AttrValue(dtype)},
                          {"group", AttrValue(options_.allreduce->group)},
                          {"round", AttrValue("init")},
                          {"order", AttrValue(static_cast<int64_t>(k))},
                          {"round_size", AttrValue(static_cast<int64_t>(shared.size()))}},
                         StrCat(name, "/broadcast"));
    assigns.push_back(b_.Op("Assign", {handle, chief}, {}, StrCat(name, "/assign")));
  }
  auto wait = b_.ControlDependencies(assigns);
  tg_.broadcast = b_.Op("NoOp", {}, {}, "broadcast").node_name();
}

// Per state variable: a read, a fed value and its assignment (restore),
// and whether it is initialised.
void TrainingGraphMaker::AddCheckpointOps() {
  auto scope = b_.NameScope("checkpoint");
  std::vector<Output> assigns;
  for (const std::string& name : tg_.state) {
    const Output handle = b_.Find(name);
    // Copies: b_.Op may grow the node list and move the NodeDef.
    const DType dtype = b_.node_def(handle.node()).attrs.at("dtype").get<DType>();
    const Shape shape = b_.node_def(handle.node()).attrs.at("shape").get<Shape>();
    Output read = b_.Op("ReadVariable", {handle}, {{"dtype", AttrValue(dtype)}}, StrCat(name, "/read"));
    Output feed = b_.Placeholder(dtype, shape, StrCat(name, "/value"));
    assigns.push_back(b_.Op("Assign", {handle, feed}, {}, StrCat(name, "/assign")));
    tg_.state_ready.push_back(b_.Op("VarIsInitialized", {handle}, {}, StrCat(name, "/ready")).name());
    tg_.state_reads.push_back(read.name());
    tg_.state_feeds.push_back(feed.name());
  }
  auto wait = b_.ControlDependencies(assigns);
  tg_.restore = b_.Op("NoOp", {}, {}, "restore").node_name();
}

}  // namespace

Expected<TrainingGraph> BuildTrainingGraph(const Graph& model, const TrainingGraphOptions& options,
                                           const Optimizer& optimizer) {
  TrainingGraphMaker maker(options, optimizer);
  return maker.Make(model);
}

Expected<BuiltInLoss> AddBuiltInLoss(const Graph& model, const std::string& output, const std::string& loss,
                                     const std::string& labels, const std::string& accuracy) {
  const std::string where = StrCat("[model] output = ", Quote(output));
  if (loss != "softmax_cross_entropy" && loss != "mse") {
    return InvalidArgumentError(where, ": [model] loss = ", Quote(loss),
                                " must name a built-in loss: \"softmax_cross_entropy\" (class indices as labels) or "
                                "\"mse\" (targets of the output's shape)");
  }
  GraphBuilder b;
  WEFT_RETURN_IF_ERROR(b.Import(model));
  auto out = b.Resolve(output);
  if (!out.ok()) return out.status().WithContext(where);
  const DType dtype = out->dtype();
  const Shape shape = out->shape();
  if (dtype != DType::kF32 && dtype != DType::kF64) {
    return InvalidArgumentError(where, ": the output is ", DTypeName(dtype), "; a loss needs f32 or f64");
  }
  const bool xent = loss == "softmax_cross_entropy";
  if (xent && shape.rank() != 2) {
    return InvalidArgumentError(where, ": softmax_cross_entropy needs logits of shape [batch, classes]; the output is ",
                                shape.ToString());
  }
  Output label = b.Find(labels);
  if (label.valid()) {
    if (b.node_def(label.node()).op != "Placeholder") {
      return InvalidArgumentError("[model] labels = ", Quote(labels), " is a ", b.node_def(label.node()).op,
                                  " node of the model, not a Placeholder");
    }
  } else {
    Shape label_shape = xent ? Shape{Shape::kUnknownDim} : shape;
    if (!label_shape.unknown_rank() && label_shape.rank() > 0) label_shape.set_dim(0, Shape::kUnknownDim);
    label = b.Placeholder(xent ? DType::kI64 : dtype, label_shape, labels);
  }
  BuiltInLoss result;
  {
    auto scope = b.NameScope("loss_fn");
    Output per_example;
    if (xent) {
      per_example = b.AddNode("SparseSoftmaxCrossEntropyWithLogits", {*out, label}, {}, "xent")[0];
    } else {
      per_example = b.Op("SquaredDifference", {*out, label}, {}, "squared_error");
    }
    result.loss = b.Op("Mean", {per_example}, {}, "loss").name();
  }
  if (xent && !accuracy.empty() && !b.Find(accuracy).valid()) {
    auto scope = b.NameScope("accuracy_fn");
    Output predicted =
        b.Op("ArgMax", {*out}, {{"axis", AttrValue(int64_t{1})}, {"output_type", AttrValue(DType::kI64)}}, "predicted");
    Output hit = b.Op("Cast", {b.Op("Equal", {predicted, label}, {}, "hit")}, {{"DstT", AttrValue(dtype)}}, "hit_f");
    result.accuracy = b.Op("Mean", {hit}, {}, "accuracy").name();
  } else if (!accuracy.empty() && b.Find(accuracy).valid()) {
    result.accuracy = accuracy;
  }
  WEFT_RETURN_IF_ERROR(b.status().WithContext(where));
  WEFT_ASSIGN_OR_RETURN(result.graph, b.Build());
  return result;
}

}  // namespace weft::train
