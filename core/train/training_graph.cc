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

}  // namespace

Expected<TrainingGraph> BuildTrainingGraph(const Graph& model, const TrainingGraphOptions& options,
                                           const Optimizer& optimizer) {
  GraphDef def = model.ToGraphDef();
  if (options.seed > 0) {
    for (NodeDef& node : def.nodes) {
      auto seed = node.attrs.find("seed");
      if (IsRandomOp(node.op) && seed != node.attrs.end() && seed->second.get<int64_t>() == 0) {
        seed->second = AttrValue(options.seed);
      }
    }
  }
  WEFT_ASSIGN_OR_RETURN(Graph seeded, Graph::FromGraphDef(std::move(def)));

  GraphBuilder b;
  WEFT_RETURN_IF_ERROR(b.Import(seeded));
  auto loss = b.Resolve(options.loss);
  if (!loss.ok()) {
    return loss.status().WithContext(StrCat("the loss (set by [model] loss = ", Quote(options.loss), ")"));
  }
  if (!IsFloat(loss->dtype()) || !(!loss->shape().unknown_rank() && loss->shape().rank() == 0)) {
    return InvalidArgumentError("the loss ", Quote(options.loss), " must be a float scalar, but it is ",
                                DTypeName(loss->dtype()), loss->shape().ToString(),
                                "; reduce it (e.g. with Mean) in the model");
  }
  Output model_init;
  if (!options.init.empty()) {
    const Output init = b.Find(options.init);
    if (!init.valid()) {
      auto resolved = b.Resolve(options.init);  // for its "did you mean"
      return (resolved.ok() ? NotFoundError("no node ", Quote(options.init)) : resolved.status())
          .WithContext(StrCat("the initialiser (set by [model] init = ", Quote(options.init), "; \"\" for none)"));
    }
    model_init = Output(&b, init.node(), -1);
  }

  const Reached reached = ReachedVariables(b, *loss);
  TrainingGraph tg;
  std::vector<Output> handles;
  for (const auto& [name, id] : reached.variables) {
    const NodeDef& node = b.node_def(id);
    const DType dtype = node.attrs.at("dtype").get<DType>();
    if (!IsFloat(dtype)) continue;  // integer state (counters) is not trained
    handles.push_back(Output(&b, id, 0));
    tg.variables.push_back({name, dtype, node.attrs.at("shape").get<Shape>(), {}});
  }
  if (handles.empty()) {
    return InvalidArgumentError("the loss ", Quote(options.loss),
                                " depends on no float variable, so there is nothing to train (the "
                                "model's "
                                "weights must be VarHandle variables, not constants)");
  }

  // A variable read only through gathers gets the gradients of the gathered
  // rows (xs are the gathers' outputs), not one of its whole shape.
  std::vector<Output> xs;
  std::vector<std::pair<std::size_t, std::size_t>> x_range;  // per variable: [first, end) in xs
  for (std::size_t i = 0; i < handles.size(); ++i) {
    const int id = handles[i].node();
    const auto gathers = reached.gathers.find(id);
    const bool sparse = options.sparse_updates && gathers != reached.gathers.end() && reached.reads.count(id) == 0 &&
                        reached.other_uses.count(id) == 0 && !tg.variables[i].shape.unknown_rank() &&
                        tg.variables[i].shape.rank() >= 1;
    tg.variables[i].sparse = sparse;
    const std::size_t first = xs.size();
    if (sparse) {
      for (int g : gathers->second) xs.push_back(Output(&b, g, 0));
    } else {
      xs.push_back(handles[i]);
    }
    x_range.emplace_back(first, xs.size());
  }
  std::vector<Output> grads;  // per variable: dense, or the rows of |row_ids|
  std::vector<Output> row_ids(handles.size());
  {
    grad::GradientOptions gopts;
    gopts.scope = "gradients";
    WEFT_ASSIGN_OR_RETURN(std::vector<Output> x_grads, grad::AddGradients(b, {*loss}, xs, {}, gopts));
    for (std::size_t i = 0; i < handles.size(); ++i) {
      const auto [first, end] = x_range[i];
      if (!tg.variables[i].sparse) {
        grads.push_back(x_grads[first]);
        continue;
      }
      // The rows' gradients of every gather, flattened to [n] + row shape,
      // then summed per distinct row: what the variable's device receives.
      auto scope = b.NameScope(StrCat("gradients/", tg.variables[i].name, "/rows"));
      std::vector<int64_t> row_shape = tg.variables[i].shape.dims();
      row_shape[0] = -1;
      std::vector<Output> ids, rows;
      for (std::size_t k = first; k < end; ++k) {
        Output gathered_ids = b.Inputs(xs[k].node())[1];
        Output flat = b.Op("Reshape", {gathered_ids, b.Const(Tensor::FromVector<int64_t>({-1}))});
        if (flat.dtype() != DType::kI64) flat = b.Op("Cast", {flat}, {{"DstT", AttrValue(DType::kI64)}});
        ids.push_back(flat);
        rows.push_back(b.Op("Reshape", {x_grads[k], b.Const(Tensor::FromVector<int64_t>(row_shape))}));
      }
      Output all_ids = ids.size() == 1 ? ids[0] : b.Op("Concat", ids, {{"axis", AttrValue(int64_t{0})}}, "ids");
      Output all_rows = rows.size() == 1 ? rows[0] : b.Op("Concat", rows, {{"axis", AttrValue(int64_t{0})}}, "values");
      std::vector<Output> unique = b.AddNode("Unique", {all_ids}, {{"out_idx", AttrValue(DType::kI32)}}, "unique");
      Output count = b.Op("Size", {unique[0]}, {{"out_type", AttrValue(DType::kI32)}}, "count");
      grads.push_back(b.Op("UnsortedSegmentSum", {all_rows, unique[1], count}, {}, "sum"));
      row_ids[i] = unique[0];
    }
  }
  // Synchronous replicas: this worker offers its gradients to the
  // accumulators (on the variables' ps tasks) and waits for the next step;
  // the chief's update is built from the means it takes from them.
  Output sync_token_queue;
  std::vector<Output> sync_accumulators;
  if (options.sync) {
    const SyncReplicaOptions& so = *options.sync;
    for (const TrainedVariable& v : tg.variables) {
      if (v.sparse) {
        return UnimplementedError(
            "training.mode = \"sync\" does not aggregate sparse gradients yet: ", Quote(v.name), " (",
            DTypeName(v.dtype), v.shape.ToString(),
            ") is read only through gathers; set training.sparse_updates = false (a dense gradient of its whole "
            "shape per worker per step) or use mode = \"async\"");
      }
    }
    SyncNodes sn;
    std::vector<Output> offers;
    if (so.test_delay_factor > 1) {
      std::vector<DType> types;
      for (const Output& g : grads) types.push_back(g.dtype());
      grads = b.AddNode("_TestDelay", grads, {{"T", AttrValue(types)}, {"factor", AttrValue(so.test_delay_factor)}},
                        "sync/test_delay");
    }
    Output local_step = b.Placeholder(DType::kI64, Shape{}, "sync/local_step");
    sn.local_step = local_step.name();
    for (std::size_t i = 0; i < handles.size(); ++i) {
      const TrainedVariable& v = tg.variables[i];
      Output acc = b.Op("GradientAccumulator", {},
                        {{"dtype", AttrValue(v.dtype)},
                         {"shape", AttrValue(v.shape)},
                         {"replicas_to_aggregate", AttrValue(so.replicas_to_aggregate)},
                         {"variable", AttrValue(v.name)},
                         {"create", AttrValue(so.chief)},
                         {"shared_name", AttrValue(StrCat(v.name, "/sync/accumulator"))}},
                        StrCat(v.name, "/sync/accumulator"));
      sync_accumulators.push_back(acc);
      const std::string replica_name = so.replica < static_cast<int64_t>(so.replica_names.size())
                                           ? so.replica_names[static_cast<std::size_t>(so.replica)]
                                           : StrCat("replica ", so.replica);
      offers.push_back(b.Op("AccumulatorApplyGradient", {acc, local_step, grads[i]},
                            {{"replica", AttrValue(so.replica)}, {"replica_name", AttrValue(replica_name)}},
                            StrCat(v.name, "/sync/apply")));
    }
    sn.accepted = offers[0].name();
    {
      sync_token_queue =
          b.Op("StepTokenQueue", {}, {{"shared_name", AttrValue("sync/token_queue")}}, "sync/token_queue");
      const AttrMap timeout = {{"timeout_ms", AttrValue(so.token_timeout_ms)}};
      // A queue an earlier run closed (on a ps task that kept serving) is
      // waited on until this run's chief opens it again.
      AttrMap first = timeout;
      first["wait_open"] = AttrValue(true);
      sn.first_token = b.Op("StepTokenTake", {sync_token_queue, local_step}, first, "sync/first_token").name();
      // recovery = "auto": a worker whose gradients for its step are kept
      // already (from before it was restarted) waits for the next step.
      sn.next_token = b.Op("StepTokenTake", {sync_token_queue, local_step}, timeout, "sync/next_token").name();
      auto wait = b.ControlDependencies(offers);
      sn.token = b.Op("StepTokenTake", {sync_token_queue, local_step}, timeout, "sync/token").name();
    }
    // The chief's part: the mean of each variable's first N gradients.
    for (std::size_t i = 0; i < handles.size(); ++i) {
      const TrainedVariable& v = tg.variables[i];
      std::vector<Output> take = b.AddNode("AccumulatorTakeGradient", {sync_accumulators[i]},
                                           {{"dtype", AttrValue(v.dtype)},
                                            {"timeout_ms", AttrValue(so.take_timeout_ms)},
                                            {"replica_names", AttrValue(so.replica_names)}},
                                           StrCat(v.name, "/sync/take"));
      grads[i] = take[0];
      if (i == 0) {
        sn.aggregated = take[1].name();
        sn.stale = take[2].name();
        sn.late = take[3].name();
      }
    }
    tg.sync = std::move(sn);
  }
  if (options.allreduce) {
    // Buckets of gradients, the last layer's first (the order backward
    // makes them), each averaged over the workers by one fused allreduce
    // while backward goes on with the earlier layers.
    const AllReduceGraphOptions& ao = *options.allreduce;
    std::vector<std::pair<int, std::size_t>> order;  // (first use, variable), latest use first
    for (std::size_t i = 0; i < handles.size(); ++i) {
      if (tg.variables[i].sparse) {
        return InvalidArgumentError("training.mode = \"allreduce\" reduces dense gradients, and variable ",
                                    Quote(tg.variables[i].name),
                                    " is read only through gathers (a sparse gradient); set [training] "
                                    "sparse_updates = false to reduce it densely");
      }
      int first = b.num_nodes();
      if (auto r = reached.reads.find(handles[i].node()); r != reached.reads.end()) {
        for (const Output& read : r->second) first = std::min(first, read.node());
      }
      if (auto g = reached.gathers.find(handles[i].node()); g != reached.gathers.end()) {
        for (int id : g->second) first = std::min(first, id);
      }
      order.emplace_back(first, i);
    }
    std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::vector<std::vector<std::size_t>> buckets;
    int64_t bytes = 0;
    for (const auto& [first, i] : order) {
      const TrainedVariable& v = tg.variables[i];
      const int64_t size = v.shape.IsFullyDefined() ? v.shape.num_elements() * static_cast<int64_t>(DTypeSize(v.dtype))
                                                    : std::numeric_limits<int64_t>::max() / 4;
      // The open bucket's cap: the first one's is at most 1 MiB.
      const int64_t cap = buckets.size() == 1 ? std::min<int64_t>(ao.bucket_bytes, int64_t{1} << 20) : ao.bucket_bytes;
      const bool fits =
          !buckets.empty() && tg.variables[buckets.back().front()].dtype == v.dtype && bytes + size <= cap;
      if (!fits) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(i);
      bytes += size;
    }
    auto scope = b.NameScope("allreduce");
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      std::vector<Output> inputs;
      std::vector<std::string> names;
      for (std::size_t i : buckets[k]) {
        inputs.push_back(grads[i]);
        names.push_back(tg.variables[i].name);
      }
      std::vector<Output> reduced = b.AddNode("CollectiveAllReduce", inputs,
                                              {{"N", AttrValue(static_cast<int64_t>(inputs.size()))},
                                               {"T", AttrValue(tg.variables[buckets[k].front()].dtype)},
                                               {"group", AttrValue(ao.group)},
                                               {"round", AttrValue("train")},
                                               {"order", AttrValue(static_cast<int64_t>(k))},
                                               {"round_size", AttrValue(static_cast<int64_t>(buckets.size()))},
                                               {"reduction", AttrValue("mean")}},
                                              StrCat("bucket_", k));
      for (std::size_t j = 0; j < buckets[k].size(); ++j) grads[buckets[k][j]] = reduced[j];
      tg.buckets.push_back(std::move(names));
    }
  }
  if (options.clip_global_norm > 0) {
    auto scope = b.NameScope("clip");
    Output norm;
    WEFT_ASSIGN_OR_RETURN(grads, ClipByGlobalNorm(b, grads, options.clip_global_norm, &norm));
    tg.global_norm = norm.name();
  }

  std::vector<Output> inits;
  if (model_init.valid()) inits.push_back(model_init);
  Output step_var, learning_rate, step;
  {
    auto scope = b.NameScope("train");
    learning_rate = b.Placeholder(DType::kF32, Shape{}, "learning_rate");
    step_var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kI64)}, {"shape", AttrValue(Shape{})}}, "global_step");
    inits.push_back(b.Op("Assign", {step_var, b.Scalar<int64_t>(0, "zero")}, {}, "global_step/init"));
    Output completed = b.Op("ReadVariable", {step_var}, {{"dtype", AttrValue(DType::kI64)}}, "global_step/read");
    // The update being built is step completed + 1 (1-based, as Adam's
    // bias correction counts).
    step = b.Op("Add", {completed, b.Scalar<int64_t>(1, "one")}, {}, "step");
  }
  tg.global_step = step_var.node_name();
  tg.learning_rate = learning_rate.name();

  std::vector<Output> updates;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    TrainedVariable& v = tg.variables[i];
    UpdateArgs args;
    args.variable_name = v.name;
    args.dtype = v.dtype;
    args.variable = handles[i];
    args.gradient = grads[i];
    args.indices = row_ids[i];
    args.step = step;
    {
      auto scope = b.NameScope(StrCat(v.name, "/", optimizer.name()));
      args.learning_rate = v.dtype == DType::kF32
                               ? learning_rate
                               : b.Op("Cast", {learning_rate}, {{"DstT", AttrValue(v.dtype)}}, "learning_rate");
      WEFT_ASSIGN_OR_RETURN(std::vector<SlotDef> slots, optimizer.Slots(v.dtype, v.shape));
      for (const SlotDef& slot : slots) {
        Output handle =
            b.Op("VarHandle", {}, {{"dtype", AttrValue(v.dtype)}, {"shape", AttrValue(v.shape)}}, slot.name);
        Output value = b.Op("Fill", {b.Const(Tensor::FromVector<int64_t>(v.shape.dims()), StrCat(slot.name, "/shape")),
                                     b.Op("Cast", {b.Scalar<double>(slot.initial_value, StrCat(slot.name, "/value"))},
                                          {{"DstT", AttrValue(v.dtype)}})});
        inits.push_back(b.Op("Assign", {handle, value}, {}, StrCat(slot.name, "/init")));
        args.slots.push_back(handle);
        v.slots.push_back(handle.node_name());
      }
    }
    // The update waits for this step's forward reads of the variable. In
    // sync mode those are in the workers' steps, not in the chief's apply.
    const auto reads = reached.reads.find(handles[i].node());
    std::vector<Output> after = reads == reached.reads.end() || options.sync ? std::vector<Output>{} : reads->second;
    auto wait = b.ControlDependencies(after);
    HasKernelFn has_kernel = options.has_kernel;
    if (options.variable_has_kernel) {
      has_kernel = [&options, &v](std::string_view op, const std::vector<std::pair<std::string, DType>>& types) {
        return options.variable_has_kernel(v.name, op, types);
      };
    }
    WEFT_ASSIGN_OR_RETURN(Output done, optimizer.BuildUpdate(b, args, has_kernel));
    updates.push_back(done);
  }
  {
    auto scope = b.NameScope("train");
    Output increment;
    {
      auto wait = b.ControlDependencies(updates);
      increment = b.Op("Assign", {step_var, step}, {}, "global_step/increment");
    }
    auto wait = b.ControlDependencies({increment});
    tg.train = b.Op("NoOp", {}, {}, "step").node_name();
  }
  if (tg.sync) {
    SyncNodes& sn = *tg.sync;
    sn.apply = tg.train;
    // release runs on its own after apply (the chief saves or evaluates in
    // between); apply_and_release after the update in one step.
    Output completed = b.Op("ReadVariable", {step_var}, {{"dtype", AttrValue(DType::kI64)}}, "sync/global_step_read");
    sn.release = b.Op("StepTokenPut", {sync_token_queue, completed}, {}, "sync/release").node_name();
    {
      auto wait = b.ControlDependencies({Output(&b, b.Find(tg.train).node(), -1)});
      sn.apply_and_release = b.Op("StepTokenPut", {sync_token_queue, step}, {}, "sync/apply_and_release").node_name();
    }
    Output reset_step = b.Placeholder(DType::kI64, Shape{}, "sync/reset_step");
    sn.reset_step = reset_step.name();
    std::vector<Output> resets;
    for (std::size_t i = 0; i < sync_accumulators.size(); ++i) {
      resets.push_back(b.Op("AccumulatorSetGlobalStep", {sync_accumulators[i], reset_step}, {},
                            StrCat(tg.variables[i].name, "/sync/set_step")));
    }
    {
      // The first step is released only once every accumulator is at it:
      // a worker's first gradient must not meet one not reset yet.
      auto wait = b.ControlDependencies(resets);
      Output tokens =
          b.Op("StepTokenPut", {sync_token_queue, reset_step}, {{"reset", AttrValue(true)}}, "sync/reset_tokens");
      auto after = b.ControlDependencies({tokens});
      sn.reset = b.Op("NoOp", {}, {}, "sync/reset").node_name();
    }
    sn.close = b.Op("StepTokenClose", {sync_token_queue}, {}, "sync/close").node_name();
    sn.abort = b.Op("StepTokenClose", {sync_token_queue}, {{"aborted", AttrValue(true)}}, "sync/abort").node_name();
    sn.with_global_step = {
        "sync/token_queue", "sync/first_token",       "sync/next_token",   "sync/token", "sync/global_step_read",
        "sync/release",     "sync/apply_and_release", "sync/reset_tokens", "sync/reset", "sync/close",
        "sync/abort"};
  }
  {
    auto wait = b.ControlDependencies(inits);
    tg.init = b.Op("NoOp", {}, {}, "train/init").node_name();
  }
  tg.loss = loss->name();
  for (const TrainedVariable& v : tg.variables) {
    tg.state.push_back(v.name);
    for (const std::string& s : v.slots) tg.state.push_back(s);
  }
  tg.state.push_back(tg.global_step);
  // Variables of the model the loss does not reach (batch-norm moving
  // statistics, counters) are state too.
  for (int id = 0; id < b.num_nodes(); ++id) {
    if (b.node_def(id).op == "VarHandle") tg.state.push_back(b.node_def(id).name);
  }
  std::sort(tg.state.begin(), tg.state.end());
  tg.state.erase(std::unique(tg.state.begin(), tg.state.end()), tg.state.end());
  if (options.allreduce) {
    // Every worker's state becomes the chief's (after init or a restore),
    // whatever its own init gave: the replicas start bit-identical.
    auto scope = b.NameScope("allreduce");
    std::vector<std::pair<std::string, DType>> shared;
    for (const std::string& name : tg.state) {
      const DType dtype = b.node_def(b.Find(name).node()).attrs.at("dtype").get<DType>();
      if (dtype != DType::kBool && dtype != DType::kString && dtype != DType::kI16) shared.emplace_back(name, dtype);
    }
    std::vector<Output> assigns;
    for (std::size_t k = 0; k < shared.size(); ++k) {
      const auto& [name, dtype] = shared[k];
      const Output handle = b.Find(name);
      Output read = b.Op("ReadVariable", {handle}, {{"dtype", AttrValue(dtype)}}, StrCat(name, "/read"));
      Output chief = b.Op("CollectiveBroadcast", {read},
                          {{"T", AttrValue(dtype)},
                           {"group", AttrValue(options.allreduce->group)},
                           {"round", AttrValue("init")},
                           {"order", AttrValue(static_cast<int64_t>(k))},
                           {"round_size", AttrValue(static_cast<int64_t>(shared.size()))}},
                          StrCat(name, "/broadcast"));
      assigns.push_back(b.Op("Assign", {handle, chief}, {}, StrCat(name, "/assign")));
    }
    auto wait = b.ControlDependencies(assigns);
    tg.broadcast = b.Op("NoOp", {}, {}, "broadcast").node_name();
  }
  {
    auto scope = b.NameScope("checkpoint");
    std::vector<Output> assigns;
    for (const std::string& name : tg.state) {
      const Output handle = b.Find(name);
      // Copies: b.Op may grow the node list and move the NodeDef.
      const DType dtype = b.node_def(handle.node()).attrs.at("dtype").get<DType>();
      const Shape shape = b.node_def(handle.node()).attrs.at("shape").get<Shape>();
      Output read = b.Op("ReadVariable", {handle}, {{"dtype", AttrValue(dtype)}}, StrCat(name, "/read"));
      Output feed = b.Placeholder(dtype, shape, StrCat(name, "/value"));
      assigns.push_back(b.Op("Assign", {handle, feed}, {}, StrCat(name, "/assign")));
      tg.state_ready.push_back(b.Op("VarIsInitialized", {handle}, {}, StrCat(name, "/ready")).name());
      tg.state_reads.push_back(read.name());
      tg.state_feeds.push_back(feed.name());
    }
    auto wait = b.ControlDependencies(assigns);
    tg.restore = b.Op("NoOp", {}, {}, "restore").node_name();
  }
  WEFT_ASSIGN_OR_RETURN(tg.graph, b.Build());
  return tg;
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
