#include <unistd.h>

#include "core/train/recovery_machine.h"
#include "core/train/run.h"

namespace weft::train::internal {
namespace {

constexpr const char* kFormatKey = "weft.trainer";

// The examples of worker |index| of |count|: those whose index modulo
// |count| is |index| (docs/distributed.md, "Input").
Expected<std::shared_ptr<const data::Examples>> ShardExamples(const data::Examples& all, int64_t index, int64_t count) {
  auto shard_of = [&](const Tensor& t, const char* what) -> Expected<Tensor> {
    if (t.rank() < 1) return InvalidArgumentError("cannot shard the ", what, ": they have no example dimension");
    if (t.dtype() == DType::kString) {
      return UnimplementedError("cannot shard string ", what, " across workers; convert them to numbers");
    }
    const int64_t n = t.dim(0);
    const int64_t rows = n > index ? (n - index + count - 1) / count : 0;
    std::vector<int64_t> dims = t.shape().dims();
    dims[0] = rows;
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), Shape(dims)));
    const uint64_t row_bytes = n == 0 ? 0 : t.byte_size() / static_cast<uint64_t>(n);
    const char* from = static_cast<const char*>(t.raw_data());
    char* to = static_cast<char*>(out.raw_data());
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(to + static_cast<uint64_t>(r) * row_bytes,
                  from + static_cast<uint64_t>(index + r * count) * row_bytes, row_bytes);
    }
    return out;
  };
  auto shard = std::make_shared<data::Examples>();
  WEFT_ASSIGN_OR_RETURN(shard->features, shard_of(all.features, "features"));
  WEFT_ASSIGN_OR_RETURN(shard->labels, shard_of(all.labels, "labels"));
  return std::shared_ptr<const data::Examples>(std::move(shard));
}

}  // namespace

Status Run::Prepare() {
  const config::DataConfig& data = config_.data;
  // CSV rows and text lines hold their labels themselves.
  const bool labels_inline = data.format == "csv" || data.format == "text";
  WEFT_RETURN_IF_ERROR(CheckDataFile(config_, "train_images", data.train_images, true));
  if (!labels_inline) WEFT_RETURN_IF_ERROR(CheckDataFile(config_, "train_labels", data.train_labels, true));
  if (!data.test_images.empty()) {
    WEFT_RETURN_IF_ERROR(CheckDataFile(config_, "test_images", data.test_images, true));
    if (!labels_inline) WEFT_RETURN_IF_ERROR(CheckDataFile(config_, "test_labels", data.test_labels, true));
  }
  if (options_.resume && config_.checkpoint.dir.empty()) {
    return InvalidArgumentError("--resume needs a checkpoint directory: set [checkpoint] dir in ", config_.source);
  }
  WEFT_RETURN_IF_ERROR(reporter_.status(config_.training.metrics));
  WEFT_RETURN_IF_ERROR(CheckClusterRole());
  if ((recovery_auto() || allreduce()) && config_.cluster.has_value() && config_.cluster->recovery == "auto") {
    const std::string where =
        config_.cluster->recovery_pos.line > 0 ? StrCat(config_.cluster->recovery_pos.ToString(), ": ") : "";
    if (config_.checkpoint.dir.empty()) {
      return InvalidArgumentError(where, "cluster.recovery = \"auto\" restores lost ps tasks from the newest ",
                                  "checkpoint: set [checkpoint] dir (and every_steps or every_seconds)");
    }
    if (allreduce()) {
      return InvalidArgumentError(where, "cluster.recovery = \"auto\" is built for training on parameter servers ",
                                  "(training.mode = \"async\" or \"sync\"), not \"allreduce\": a collective group ",
                                  "does not take a restarted member back; restart every worker with --resume, or set "
                                  "recovery = \"off\"");
    }
  }
  if (!config_.checkpoint.dir.empty() && chief()) {
    // One run per directory: a second cluster (or process) given the same
    // [checkpoint] dir is refused, naming this one.
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::time_t now = std::time(nullptr);
    char since[32] = {};
    std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const std::string owner = StrCat(
        "pid ", ::getpid(), " on ", host, ": weft train ", options_.model_path,
        distributed() ? StrCat(" as the chief of the cluster of ", config_.source) : std::string(" in one process"),
        ", since ", since);
    auto lock = checkpoint::DirectoryLock::Acquire(config_.checkpoint.dir, owner);
    if (!lock.ok())
      return Status(lock.status().code(), StrCat(Where(config_, "checkpoint", "dir"), lock.status().message()));
    dir_lock_ = std::move(*lock);
  }

  WEFT_RETURN_IF_ERROR(BuildGraph());
  if (distributed()) {
    WEFT_RETURN_IF_ERROR(StartCluster());
  } else {
    WEFT_ASSIGN_OR_RETURN(auto session,
                          runtime::Session::Create(tg_.graph, devices_, runtime::SessionOptions::FromConfig(config_)));
    session_ = std::make_unique<LocalRunner>(std::move(session));
  }

  // Data.
  auto load = [&](const std::string& images_path, const std::string& labels_path,
                  const char* what) -> Expected<std::shared_ptr<const data::Examples>> {
    auto examples = data.format == "text"
                        ? data::LoadText(images_path, example_shape_.num_elements())
                        : data::LoadExamples(data.format, images_path, labels_path, data.csv_label_column);
    if (!examples.ok()) return examples.status().WithContext(StrCat("loading the ", what, " data"));
    const int64_t per_example =
        examples->features.shape().rank() == 0
            ? 1
            : examples->features.num_elements() / std::max<int64_t>(1, examples->features.shape().dim(0));
    if (per_example != example_shape_.num_elements()) {
      return InvalidArgumentError("the ", what, " examples of ", images_path, " have ", per_example,
                                  " values each, but the model's ", Quote(images_), " takes ",
                                  example_shape_.ToString(), " (", example_shape_.num_elements(), " values)");
    }
    return std::shared_ptr<const data::Examples>(std::make_shared<data::Examples>(std::move(*examples)));
  };
  WEFT_ASSIGN_OR_RETURN(train_, load(data.train_images, data.train_labels, "training"));
  if (num_workers_ > 1 && !sharded()) {
    auto shard = ShardExamples(*train_, worker_, num_workers_);
    if (!shard.ok()) return shard.status().WithContext(StrCat("worker ", worker_, "'s share of the training data"));
    train_ = std::move(*shard);
  }
  // On a cluster the chief evaluates; the other workers only train.
  if (!data.test_images.empty() && chief()) {
    WEFT_ASSIGN_OR_RETURN(test_, load(data.test_images, data.test_labels, "test"));
  }
  const int64_t n = train_->labels.num_elements();
  // In sync mode a step reads a global batch: one batch per worker, each
  // worker its own slice of it (every worker holds all the examples).
  const int64_t global_batch = config_.training.batch_size * (sharded() ? num_workers_ : 1);
  steps_per_epoch_ = n / global_batch;
  if (steps_per_epoch_ == 0) {
    return InvalidArgumentError(
        Where(config_, "training", "batch_size"), "the batch (", config_.training.batch_size,
        sharded() ? StrCat(" per worker, ", global_batch, " for the ", num_workers_, " workers") : std::string(),
        ") is larger than the training data (", n, " examples)");
  }
  total_steps_ = options_.steps > 0           ? options_.steps
                 : config_.training.steps > 0 ? config_.training.steps
                                              : config_.training.epochs * steps_per_epoch_;
  if (total_steps_ <= 0) {
    return InvalidArgumentError(config_.source, ": nothing to train: [training] epochs and steps are both 0");
  }
  // On a cluster the chief writes the checkpoints.
  if (!config_.checkpoint.dir.empty() && chief()) {
    checkpoints_ = std::make_unique<checkpoint::CheckpointManager>(config_.checkpoint.dir,
                                                                   static_cast<int>(config_.checkpoint.keep));
  }
  // Last: the contract check compares the steps too.
  if (allreduce()) WEFT_RETURN_IF_ERROR(StartAllReduce());
  return Status();
}

data::PipelineOptions Run::TrainingInput() const {
  data::PipelineOptions po;
  po.batch_size = config_.training.batch_size;
  po.shuffle = config_.data.shuffle;
  po.seed = static_cast<uint64_t>(config_.training.seed);
  po.scale = config_.data.scale;
  po.shift = config_.data.shift;
  po.example_shape = example_shape_;
  po.prefetch = config_.data.prefetch;
  if (sharded()) {
    po.num_shards = num_workers_;
    po.shard_index = worker_;
  }
  return po;
}

Expected<Evaluation> Run::Evaluate() {
  Evaluation e;
  if (test_ == nullptr) return e;
  data::PipelineOptions po;
  po.batch_size = config_.data.test_batch_size;
  po.shuffle = false;
  po.scale = config_.data.scale;
  po.shift = config_.data.shift;
  po.example_shape = example_shape_;
  po.prefetch = config_.data.prefetch;
  po.drop_remainder = false;
  po.epochs = 1;
  WEFT_ASSIGN_OR_RETURN(auto pipeline, data::Pipeline::Create(test_, po));
  std::vector<std::string> fetches = {tg_.loss};
  if (!accuracy_.empty()) fetches.push_back(accuracy_);
  double loss_sum = 0, accuracy_sum = 0;
  while (true) {
    auto batch = pipeline->Next();
    if (!batch.ok()) {
      if (batch.status().code() == Code::kOutOfRange) break;
      return batch.status();
    }
    const int64_t count = batch->labels.num_elements();
    std::vector<Tensor> out;
    WEFT_RETURN_IF_ERROR(session_->Run({{images_, batch->features}, {labels_, batch->labels}}, fetches, {}, &out));
    loss_sum += ScalarValue(out[0]) * static_cast<double>(count);
    if (!accuracy_.empty()) accuracy_sum += ScalarValue(out[1]) * static_cast<double>(count);
    e.examples += count;
  }
  if (e.examples > 0) {
    e.loss = loss_sum / static_cast<double>(e.examples);
    if (!accuracy_.empty()) e.accuracy = accuracy_sum / static_cast<double>(e.examples);
  }
  return e;
}

Status Run::Restore(const std::string& prefix) {
  WEFT_ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(prefix));
  WEFT_RETURN_IF_ERROR(CheckCompatible(prefix, *reader, tg_));
  const CheckpointView view(*reader, tg_);
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (std::size_t i = 0; i < tg_.state.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(Tensor value, view.Read(tg_.state[i]));
    feeds.emplace_back(tg_.state_feeds[i], std::move(value));
  }
  WEFT_RETURN_IF_ERROR(session_->Run(feeds, {}, {tg_.restore}, nullptr).WithContext(StrCat("restoring ", prefix)));
  const auto& meta = reader->metadata();
  step_ = MetaInt(meta, "step", -1);
  data::Position position;
  position.epoch = MetaInt(meta, "data_epoch", 0);
  position.index = MetaInt(meta, "data_index", 0);
  if (step_ < 0) return DataLossError("checkpoint ", prefix, " has no step in its metadata");
  if (MetaInt(meta, "seed", config_.training.seed) != config_.training.seed) {
    reporter_.Note(StrCat("note: checkpoint ", prefix, " was written with seed ", meta.at("seed"),
                          "; continuing with seed ", config_.training.seed, " changes the data order"));
  }
  WEFT_ASSIGN_OR_RETURN(pipeline_, data::Pipeline::Create(train_, TrainingInput(), position));
  return Status();
}

Expected<std::string> Run::Save(int64_t step) {
  // In sync mode the chief's worker thread moves its pipeline meanwhile;
  // the data position of a global step is a function of the step.
  const data::Position position = sharded() ? pipeline_->PositionOfStep(step) : pipeline_->position();
  std::map<std::string, std::string> meta = {
      {kFormatKey, "1"},
      {"step", std::to_string(step)},
      {"seed", std::to_string(config_.training.seed)},
      {"data_epoch", std::to_string(position.epoch)},
      {"data_index", std::to_string(position.index)},
      {"model", options_.model_path},
      {"optimizer", optimizer_->name()},
  };
  if (distributed()) {
    // Every ps task writes its own shard in the same step, which also
    // reads the global step they all belong to; then the index is
    // committed here, and only then the manifest names the checkpoint.
    WEFT_ASSIGN_OR_RETURN(const std::string prefix, checkpoints_->BeginSave(step));
    std::vector<std::string> fetches = save_parts_;
    const auto gs = std::find(tg_.state.begin(), tg_.state.end(), tg_.global_step);
    fetches.push_back(tg_.state_reads[static_cast<std::size_t>(gs - tg_.state.begin())]);
    std::vector<Tensor> out;
    WEFT_RETURN_IF_ERROR(session_->Run({{save_prefix_, Tensor::Strings({prefix}, Shape{})}}, fetches, {}, &out)
                             .WithContext(StrCat("saving checkpoint ", prefix, " on the ps tasks")));
    std::vector<checkpoint::BundleIndex> parts;
    for (std::size_t k = 0; k < save_parts_.size(); ++k) {
      WEFT_ASSIGN_OR_RETURN(checkpoint::BundleIndex part,
                            checkpoint::DecodeIndexPart(out[k].string_at(0), StrCat("ps task ", k)));
      parts.push_back(std::move(part));
    }
    meta["global_step"] = std::to_string(out.back().scalar<int64_t>());
    meta["ps_tasks"] = std::to_string(save_parts_.size());
    WEFT_RETURN_IF_ERROR(checkpoint::CommitShardedBundle(prefix, parts, meta));
    return checkpoints_->FinishSave(step);
  }
  std::vector<Tensor> values;
  WEFT_RETURN_IF_ERROR(session_->Run({}, tg_.state_reads, {}, &values));
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (std::size_t i = 0; i < tg_.state.size(); ++i) tensors.emplace_back(tg_.state[i], std::move(values[i]));
  return checkpoints_->Save(step, tensors, meta);
}

Status Run::EndOfTraining(int64_t saved_step, TrainResult* result) {
  if (checkpoints_ != nullptr && config_.checkpoint.at_end && saved_step != step_) {
    WEFT_ASSIGN_OR_RETURN(result->checkpoint, Save(step_));
    reporter_.Note(StrCat("saved ", result->checkpoint));
  }
  WEFT_ASSIGN_OR_RETURN(Evaluation e, Evaluate());
  if (e.examples > 0) reporter_.Evaluation(step_, e.loss, e.accuracy, e.examples);
  result->step = step_;
  result->test_loss = e.loss;
  result->test_accuracy = e.accuracy;
  return Status();
}

// Where the run starts (Go): the chief or one process initialises or
// restores the variables, the other workers wait for them; step_ and the
// input position follow. With recovery = "auto", a chief started again
// resumes or keeps what the ps tasks hold, and a worker started again
// rejoins at its progress.
Expected<std::optional<TrainResult>> Run::Start(bool* restored) {
  *restored = false;
  // recovery = "auto": a chief started again by its launcher, with the
  // same command, resumes (as Kubernetes and Slurm --requeue restart).
  bool resume = options_.resume;
  // Asynchronous: when every variable still has a value (the ps tasks kept
  // running while this process was down), the other workers trained them
  // on meanwhile, and a restore would throw that away; the chief keeps
  // them and carries on at its own progress instead.
  std::optional<std::string> kept_from;
  int64_t kept_step = -1;  // the step of |kept_from|
  bool resumed_by_recovery = false;
  if (recovery_auto() && chief() && !resume) {
    auto latest = checkpoints_->Latest();
    const bool has_checkpoint = latest.ok() && latest->has_value();
    bool all_set = false;
    if (has_checkpoint && !sync()) {
      std::vector<Tensor> ready;
      all_set = session_->Run({}, tg_.state_ready, {}, &ready).ok();
      for (const Tensor& t : ready) all_set = all_set && *static_cast<const uint8_t*>(t.raw_data()) != 0;
    }
    const ChiefStart from = DecideChiefStart(/*resume=*/false, has_checkpoint, all_set);
    WEFT_LOG(DEBUG) << "recovery: the chief starts: " << ChiefStartName(from);
    if (from == ChiefStart::kKeep) kept_from = **latest;
    if (from == ChiefStart::kResumeByRecovery) {
      resume = true;
      resumed_by_recovery = true;
    }
  }
  if (!chief() && !allreduce()) {
    if (options_.resume)
      reporter_.Note(
          "note: --resume is the chief's (worker 0) to act on; this "
          "worker waits for it");
    // recovery = "auto": a worker started again after it finished (its
    // progress, kept by the other tasks, is the last step), or after the
    // chief ended a synchronous run, has nothing to wait for; nor has one
    // the chief asks to stop while it waits.
    const bool finished_before = recovery_auto() && (sync() ? SyncRunEnded() : RemoteProgress() >= total_steps_);
    if (!finished_before) WEFT_RETURN_IF_ERROR(WaitForChief());
    if (finished_before || told_to_stop_->load()) {
      reporter_.Note(finished_before ? "this worker had finished before it was started again"
                                     : "the chief ended the run before this worker trained");
      TrainResult ended;
      ended.step = total_steps_;
      ended.loss = ended.test_loss = ended.test_accuracy = kNaN;
      step_ = total_steps_;
      WEFT_RETURN_IF_ERROR(FinishCluster());
      reporter_.Final(ended);
      return std::optional<TrainResult>(ended);
    }
  } else {
    // The counter first: a worker starts once every variable of tg_.init
    // has a value, and must find the counter set by then.
    if (distributed()) {
      WEFT_RETURN_IF_ERROR(
          session_->Run({}, {}, {"cluster/workers_done/init"}, nullptr).WithContext("initialising the variables"));
    }
    // A chief that restores sets every variable from the checkpoint; with
    // recovery it must not first set them to new random values, which the
    // other workers would train on meanwhile.
    if (!(resume && recovery_auto()) && !kept_from.has_value()) {
      WEFT_RETURN_IF_ERROR(session_->Run({}, {}, {tg_.init}, nullptr).WithContext("initialising the variables"));
    }
  }
  if (resume && chief()) {
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string> latest, checkpoints_->Latest());
    if (latest.has_value()) {
      WEFT_RETURN_IF_ERROR(Restore(*latest));
      *restored = true;
      reporter_.Note(StrCat("resumed from ", *latest, " at step ", step_,
                            resumed_by_recovery
                                ? StrCat(" (recovery = \"auto\" restores the newest checkpoint when the "
                                         "chief starts again; move ",
                                         config_.checkpoint.dir, " away to start over)")
                                : std::string()));
    } else {
      // Checkpoints that exist but none of which opens (a shard missing or
      // of another step): starting over would overwrite them. Stop instead,
      // naming what is wrong with the newest.
      auto listed = checkpoints_->List();
      if (listed.ok() && !listed->empty()) {
        std::string why;
        for (auto it = listed->rbegin(); it != listed->rend(); ++it) {  // newest first
          auto reader = checkpoint::BundleReader::Open(*it);
          why += StrCat("\n  ", *it, ": ",
                        reader.ok() ? std::string("opens now") : std::string(reader.status().message()));
        }
        return FailedPreconditionError(
            "--resume: no checkpoint in ", config_.checkpoint.dir, " opens, so nothing was loaded and nothing was ",
            "changed; restore the missing or damaged files, or move the directory away to start over:", why);
      }
      reporter_.Note(StrCat("no checkpoint in ", config_.checkpoint.dir, " yet; starting at step 0"));
    }
  }
  // One line says where the run starts: restored (above), kept (below),
  // or from step 0, with what --resume would do instead.
  if (!resume && !kept_from.has_value() && chief() && checkpoints_ != nullptr) {
    auto latest = checkpoints_->Latest();
    if (latest.ok() && latest->has_value()) {
      reporter_.Note(StrCat("note: ", config_.checkpoint.dir, " already holds ", **latest,
                            "; this run starts from step 0 (--resume continues from it)"));
    }
  }
  if (!*restored) {
    WEFT_ASSIGN_OR_RETURN(pipeline_, data::Pipeline::Create(train_, TrainingInput()));
  }
  if (kept_from.has_value()) {
    auto reader = checkpoint::BundleReader::Open(*kept_from);
    kept_step = reader.ok() ? MetaInt((*reader)->metadata(), "step", 0) : 0;
    step_ = std::min(std::max(kept_step, RemoteProgress()), total_steps_);
    if (step_ < total_steps_) WEFT_RETURN_IF_ERROR(pipeline_->Seek(pipeline_->PositionOfStep(step_)));
    reporter_.Note(StrCat("resumed at step ", step_, " (its progress, kept by the other tasks): the ps tasks kept ",
                          "every variable, which the other workers trained meanwhile, so nothing was restored ",
                          "(the newest checkpoint is ", *kept_from, ")"));
  }
  if (recovery_auto() && chief()) {
    // Something to restore a lost ps task from, whenever it is lost (not
    // over a checkpoint of the same step, which is that already).
    if (!*restored && step_ != kept_step) {
      WEFT_ASSIGN_OR_RETURN(std::string first, Save(step_));
      reporter_.Note(StrCat("recovery = \"auto\": saved ", first, " to restore lost ps tasks from until the next"));
    }
    WEFT_ASSIGN_OR_RETURN(state_incarnations_,
                          PsIncarnations(Clock::now() + std::chrono::seconds(recovery_timeout_s())));
  }
  if (recovery_auto() && !chief()) {
    // A worker started again carries on where it was (its progress, kept
    // in the other tasks' stores), not from the start of its share.
    const int64_t progress = std::min(RemoteProgress(), total_steps_);
    if (progress > 0) {
      step_ = progress;
      if (step_ < total_steps_) WEFT_RETURN_IF_ERROR(pipeline_->Seek(pipeline_->PositionOfStep(step_)));
      reporter_.Note(StrCat("rejoined at step ", step_, " (its progress, kept by the other tasks)"));
    }
  }
  return std::optional<TrainResult>();
}

}  // namespace weft::train::internal
