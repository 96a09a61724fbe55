#include "core/train/run.h"

namespace weft::train::internal {

std::vector<std::string> Run::Contract() const {
  // Each line "key = value"; a worker whose line differs from the chief's
  // is refused, naming both values.
  std::vector<std::string> lines = {
      StrCat("training.bucket_mb = ", config_.training.bucket_mb),
      StrCat("training.batch_size = ", config_.training.batch_size),
      StrCat("training.seed = ", config_.training.seed),
      StrCat("the steps to train (training.steps, epochs, --steps, the training data) = ", total_steps_),
      StrCat("training.clip_global_norm = ", config_.training.clip_global_norm),
      StrCat("optimizer = ", optimizer_->name()),
      StrCat("optimizer.learning_rate = ", optimizer_choice_.learning_rate),
      StrCat("schedule.kind = ", config_.schedule.kind),
      StrCat("cluster.collectives = ", config_.cluster ? config_.cluster->collectives : std::string("auto")),
  };
  // Every state variable (the broadcast's order and sizes come from them),
  // the trained ones with their optimizer slots among them.
  for (std::size_t i = 0; i < tg_.state.size(); ++i) {
    const Graph::Node* node = tg_.graph.Find(tg_.state[i]);
    const std::string what =
        node == nullptr ? std::string("?")
                        : Describe(node->def.attrs.at("dtype").get<DType>(), node->def.attrs.at("shape").get<Shape>());
    lines.push_back(StrCat("variable ", Quote(tg_.state[i]), " = ", what));
  }
  return lines;
}

Status Run::CheckContracts(runtime::KvStore& store, const std::string& prefix) {
  const int64_t timeout_ms = 1000 * (config_.cluster ? config_.cluster->init_timeout_s : 300);
  const std::vector<std::string> mine = Contract();
  // The chief compares every other worker with itself; the others compare
  // themselves with the chief. Both sides of a difference fail, naming it.
  const std::string me = dist::TaskPrefix("worker", worker_);
  auto compare = [&](const std::vector<std::string>& chief, const std::vector<std::string>& other,
                     const std::string& other_name) -> Status {
    auto key_of = [](const std::string& line) { return line.substr(0, line.find(" = ")); };
    std::map<std::string, std::string> theirs;
    for (const std::string& line : other) theirs[key_of(line)] = line;
    for (const std::string& line : chief) {
      auto it = theirs.find(key_of(line));
      const std::string value = line.substr(line.find(" = ") + 3);
      if (it == theirs.end()) {
        return FailedPreconditionError("the workers train different models: ", key_of(line), " (", value,
                                       ") of the chief's model is not in ", other_name, "'s");
      }
      const std::string other_value = it->second.substr(it->second.find(" = ") + 3);
      if (other_value != value) {
        return FailedPreconditionError("the workers disagree: ", key_of(line), " is ", value,
                                       " on the chief (/job:worker/task:0) but ", other_value, " on ", other_name,
                                       "; every worker must train the same model with the same settings");
      }
      theirs.erase(it);
    }
    if (!theirs.empty()) {
      const std::string& line = theirs.begin()->second;
      return FailedPreconditionError("the workers train different models: ", line.substr(0, line.find(" = ")), " (",
                                     line.substr(line.find(" = ") + 3), ") of ", other_name,
                                     "'s model is not in the chief's");
    }
    return Status();
  };
  if (chief()) {
    WEFT_RETURN_IF_ERROR(
        store.Set(StrCat(prefix, "/contract/0"), StrJoin(mine, "\n")).WithContext("publishing what the chief trains"));
    for (int64_t r = 1; r < num_workers_; ++r) {
      auto other = store.Get(StrCat(prefix, "/contract/", r), timeout_ms);
      if (!other.ok()) {
        return other.status().WithContext(StrCat("waiting for ", dist::TaskPrefix("worker", r), " to join"));
      }
      WEFT_RETURN_IF_ERROR(compare(mine, StrSplit(*other, '\n'), dist::TaskPrefix("worker", r)));
    }
    return Status();
  }
  // The chief's first, then this worker's: a chief that finds them
  // different stops, and its store with it (perhaps before it answers this
  // worker's set), so this worker compares on its own.
  auto theirs = store.Get(StrCat(prefix, "/contract/0"), timeout_ms);
  if (!theirs.ok()) return theirs.status().WithContext("waiting for the chief (/job:worker/task:0) to join");
  Status agreed = compare(StrSplit(*theirs, '\n'), mine, me);
  Status published = store.Set(StrCat(prefix, "/contract/", worker_), StrJoin(mine, "\n"))
                         .WithContext("publishing what this worker trains");
  if (!agreed.ok()) return agreed;
  return published;
}

std::string Run::DiagnosePeers() {
  std::vector<std::string> silent;
  for (int64_t r = 0; r < num_workers_; ++r) {
    if (r == worker_) continue;
    const std::string name = dist::TaskPrefix("worker", r);
    Status answered = service_->Ping(name, 1000);
    if (!answered.ok()) {
      const dist::JobSpec* workers = allreduce_cluster_->FindJob("worker");
      silent.push_back(StrCat(name, " (", workers->tasks[static_cast<std::size_t>(r)].address.ToString(),
                              ") does not answer (", answered.message(), ")"));
    }
  }
  return StrJoin(silent, "; ");
}

Status Run::StartAllReduce() {
  const dist::ClusterSpec& c = *allreduce_cluster_;
  const dist::JobSpec& workers = *c.FindJob("worker");
  const std::string me = dist::TaskPrefix("worker", worker_);
  // This worker's task: it answers the others' pings, and the chief's
  // serves the rendezvous store.
  WEFT_ASSIGN_OR_RETURN(dist::TaskService::Options service_options, dist::ServiceOptionsFor(c, *c.self, config_));
  board_->SetRole(StrCat("worker ", worker_, " of ", num_workers_, chief() ? ", the chief" : "", ", allreduce"));
  board_->SetState("starting");
  service_options.board = board_;
  auto service = dist::TaskService::Start(service_options, host_, devices_);
  if (!service.ok()) return service.status().WithContext(StrCat("starting ", me));
  service_ = std::move(*service);
  std::vector<dist::Peer> peers;
  for (const dist::TaskSpec& t : workers.tasks) peers.push_back({dist::TaskPrefix("worker", t.index), t.Url()});
  WEFT_RETURN_IF_ERROR(WaitForPeers(*service_, peers));
  WEFT_ASSIGN_OR_RETURN(store_, service_->KvStoreOf(dist::TaskPrefix("worker", 0)));
  std::ostringstream fingerprint;
  fingerprint << std::hex << dist::ClusterFingerprint(c);
  store_prefix_ = StrCat("weft/", fingerprint.str());
  WEFT_RETURN_IF_ERROR(CheckContracts(*store_, store_prefix_));

  runtime::CollectiveGroupOptions go;
  go.name = "train";
  go.rank = static_cast<int>(worker_);
  go.size = static_cast<int>(num_workers_);
  for (const dist::TaskSpec& t : workers.tasks) {
    go.rank_names.push_back(dist::TaskPrefix("worker", t.index));
    go.rank_hosts.push_back(t.address.host);
  }
  go.store = store_;
  go.key_prefix = StrCat(store_prefix_, "/train");
  go.backend = config_.cluster ? config_.cluster->collectives : "auto";
  go.timeout_ms = config_.cluster ? config_.cluster->collective_timeout_ms : 60000;
  go.diagnose = [this] { return DiagnosePeers(); };
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<runtime::CollectiveGroup> group, runtime::CollectiveGroup::Create(host_, go));
  WEFT_RETURN_IF_ERROR(runtime::RegisterCollectiveGroup(group));
  group_ = std::move(group);
  reporter_.Note(StrCat("worker ", worker_, " of ", num_workers_, (chief() ? " (the chief)" : ""),
                        ": gradients averaged by allreduce over ", group_->backend(), " in ", tg_.buckets.size(),
                        " bucket", tg_.buckets.size() == 1 ? "" : "s"));
  return Status();
}

Status Run::FinishAllReduce() {
  WEFT_RETURN_IF_ERROR(
      store_->Set(StrCat(store_prefix_, "/done/", worker_), "1").WithContext("telling the chief this worker finished"));
  if (!chief()) return Status();
  std::vector<std::string> keys;
  for (int64_t r = 1; r < num_workers_; ++r) keys.push_back(StrCat(store_prefix_, "/done/", r));
  if (keys.empty()) return Status();
  const int64_t timeout_s = config_.cluster ? config_.cluster->init_timeout_s : 300;
  Status all = store_->Wait(keys, timeout_s * 1000);
  if (!all.ok()) {
    reporter_.Note(StrCat("note: not every worker said it finished within ", timeout_s,
                          " s (cluster.init_timeout_s): ", all.message()));
  }
  return Status();
}

Status Run::JoinAllReduce() {
  // Every worker takes the chief's state (initialised or restored), and
  // reads its slice of the chief's step's global batch.
  WEFT_RETURN_IF_ERROR(session_->Run({}, {}, {tg_.broadcast}, nullptr)
                           .WithContext("taking the chief's variables (the broadcast after initialising)"));
  const auto gs = std::find(tg_.state.begin(), tg_.state.end(), tg_.global_step);
  std::vector<Tensor> out;
  WEFT_RETURN_IF_ERROR(
      session_->Run({}, {tg_.state_reads[static_cast<std::size_t>(gs - tg_.state.begin())]}, {}, &out));
  step_ = out[0].scalar<int64_t>();
  WEFT_RETURN_IF_ERROR(pipeline_->Seek(pipeline_->PositionOfStep(step_)));
  allreduce_start_ = group_->stats();
  if (!chief() && step_ > 0) reporter_.Note(StrCat("the chief resumed at step ", step_, "; so does this worker"));
  return Status();
}

Status Run::EndAllReduce(int64_t trained) {
  const runtime::CollectiveGroup::Stats stats = group_->stats();
  if (trained > 0) {
    const double ms = stats.busy_ms - allreduce_start_.busy_ms;
    const int64_t bytes = stats.bytes - allreduce_start_.bytes;
    reporter_.Note(StrCat("allreduce: ", Fixed(ms / static_cast<double>(trained), 2), " ms per step in ",
                          tg_.buckets.size(), " bucket", tg_.buckets.size() == 1 ? "" : "s", ", ",
                          HumanBytes(static_cast<uint64_t>(bytes / trained)), " per step, over ", group_->backend(),
                          " among ", num_workers_, " workers"));
  }
  WEFT_RETURN_IF_ERROR(FinishAllReduce());
  finished_ = true;
  return Status();
}

}  // namespace weft::train::internal
