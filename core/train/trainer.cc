#include "core/train/trainer.h"

#include <unistd.h>

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
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/base/json.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/checkpoint/bundle.h"
#include "core/checkpoint/manager.h"
#include "core/config/value.h"
#include "core/data/pipeline.h"
#include "core/data/readers.h"
#include "core/dist/cluster_runtime.h"
#include "core/dist/dist_session.h"
#include "core/dist/heartbeat.h"
#include "core/dist/lost_task.h"
#include "core/dist/task_service.h"
#include "core/dist/variable_partition.h"
#include "core/dist/variable_placement.h"
#include "core/graph/builder.h"
#include "core/graph/serialize.h"
#include "core/runtime/collectives.h"
#include "core/runtime/device_set.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/session.h"
#include "core/train/optimizer.h"
#include "core/train/schedule.h"
#include "core/train/training_graph.h"

namespace weft::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A fetched float scalar (the loss, a metric).
double ScalarValue(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kF32: return t.scalar<float>();
    case DType::kF64: return t.scalar<double>();
    default: return kNaN;
  }
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What recovery = "auto" waits out: a task that was lost, is restarting or
// lost its variables; never bad input, a bug or a diverging loss.
bool IsRecoverable(const Status& s) {
  switch (s.code()) {
    case Code::kUnavailable:
    case Code::kDeadlineExceeded:
    case Code::kAborted:
    case Code::kCancelled: return true;
    case Code::kFailedPrecondition:
      return s.message().find("is read before it was assigned a value") != std::string::npos;
    case Code::kNotFound: return s.message().find(" has no graph registered as ") != std::string::npos;
    default: return false;
  }
}

// Sync mode, recovery = "auto": what a worker's step also meets while the
// chief recovers: accumulators not yet back at the chief's step, or not
// yet made again on a restarted ps task.
bool IsSyncRecoverable(const Status& s) {
  if (IsRecoverable(s)) return true;
  const std::string_view m = s.message();
  return (s.code() == Code::kFailedPrecondition && m.find(" but the accumulator of ") != std::string_view::npos) ||
         (s.code() == Code::kNotFound &&
          m.find("there is no gradient accumulator for variable") != std::string_view::npos);
}

// Sync mode, recovery = "auto": a restarted worker's gradients for its
// step were kept before it was lost.
bool IsKeptAlready(const Status& s) {
  return s.code() == Code::kInvalidArgument &&
         s.message().find(" sent a second gradient for step ") != std::string::npos;
}

// The chief's key, in its own store, once a synchronous run with
// recovery = "auto" ended: a worker started again after that finishes.
constexpr char kSyncEndedKey[] = "recovery/sync_ended";

// "file:line:col: data.train_images: " for a key the user set, or
// "data.train_images: " for a default.
std::string Where(const config::Config& config, const std::string& section, const std::string& key) {
  const auto values = config.values.find(section);
  if (values != config.values.end()) {
    if (const config::SourcePos* pos = values->second.PositionOf(key)) {
      return StrCat(pos->ToString(), ": ", section, ".", key, ": ");
    }
  }
  return StrCat(section, ".", key, ": ");
}

// --- What runs the steps
// ----------------------------------------------------------

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A session in this process, or a distributed session over a cluster.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  Status Run(const Feeds& feeds, const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
             std::vector<Tensor>* outputs, const runtime::RunOptions& options = {}) {
    return RunWith(feeds, fetches, targets, outputs, options);
  }
  virtual Status RunWith(const Feeds& feeds, const std::vector<std::string>& fetches,
                         const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                         const runtime::RunOptions& options) = 0;
  // For the first progress line: "2 threads".
  virtual std::string Describe() const = 0;
};

class LocalRunner : public StepRunner {
 public:
  explicit LocalRunner(std::unique_ptr<runtime::Session> session) : session_(std::move(session)) {}
  Status RunWith(const Feeds& feeds, const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                 std::vector<Tensor>* outputs, const runtime::RunOptions& options) override {
    return session_->Run(feeds, fetches, targets, outputs, options);
  }
  std::string Describe() const override { return StrCat(session_->intra_op_threads(), " threads"); }

 private:
  std::unique_ptr<runtime::Session> session_;
};

// A worker of a cluster: it serves its own task (the parameter servers
// pull gradients from it) and runs its steps through a distributed session
// whose variables live on the ps tasks.
class ClusterRunner : public StepRunner {
 public:
  ClusterRunner(std::unique_ptr<dist::TaskService> service, std::unique_ptr<dist::DistSession> session,
                std::string description)
      : service_(std::move(service)), session_(std::move(session)), description_(std::move(description)) {}
  ~ClusterRunner() override {
    session_.reset();  // deregisters its graphs while this task still serves
    service_.reset();
  }
  Status RunWith(const Feeds& feeds, const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                 std::vector<Tensor>* outputs, const runtime::RunOptions& options) override {
    return session_->Run(feeds, fetches, targets, outputs, options);
  }
  std::string Describe() const override { return description_; }
  Status StopTasks(const std::vector<std::string>& names, const std::string& reason) {
    return session_->StopTasks(names, reason);
  }
  Status Ping(const std::string& name, int64_t timeout_ms) { return service_->Ping(name, timeout_ms); }
  dist::TaskService& service() { return *service_; }

 private:
  std::unique_ptr<dist::TaskService> service_;
  std::unique_ptr<dist::DistSession> session_;
  std::string description_;
};

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

// --- Configuration checks
// -------------------------------------------------------

Status CheckDataFile(const config::Config& config, const std::string& key, const std::string& path, bool required) {
  if (path.empty()) {
    if (!required) return Status();
    return InvalidArgumentError(Where(config, "data", key), "not set; name the file in [data] of ", config.source);
  }
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return NotFoundError(Where(config, "data", key), "no such file: ", path);
  }
  if (fs::is_directory(path, ec)) return InvalidArgumentError(Where(config, "data", key), path, " is a directory");
  return Status();
}

}  // namespace

Status CheckTrainingMode(const config::Config& config, int64_t workers, bool has_ps) {
  const config::TrainingConfig& t = config.training;
  if (t.mode != "sync" || workers == 0) return Status();
  if (!has_ps) {
    return InvalidArgumentError(Where(config, "training", "mode"),
                                "\"sync\" averages the workers' gradients on the parameter servers, and [cluster] "
                                "has no job named \"ps\"; add one, or use mode = \"allreduce\"");
  }
  const int64_t n = t.replicas_to_aggregate > 0 ? t.replicas_to_aggregate : workers - t.backup_workers;
  if (n < 1) {
    return InvalidArgumentError(Where(config, "training", "backup_workers"), t.backup_workers,
                                " backup workers leave none of the ", workers,
                                " workers to aggregate; replicas_to_aggregate + backup_workers must equal the workers");
  }
  if (n + t.backup_workers != workers) {
    // "training.backup_workers (train.toml:13:1) 1"
    std::string b = "training.backup_workers";
    if (auto v = config.values.find("training"); v != config.values.end()) {
      if (const config::SourcePos* pos = v->second.PositionOf("backup_workers"))
        b += StrCat(" (", pos->ToString(), ")");
    }
    return InvalidArgumentError(Where(config, "training", "replicas_to_aggregate"), n, " + ", b, " ", t.backup_workers,
                                " = ", n + t.backup_workers, " workers, but the cluster has ", workers,
                                "; they must be equal (replicas_to_aggregate = 0 means all the workers "
                                "but the backup ones)");
  }
  return Status();
}

Status CheckDataSection(const config::Config& config) {
  const auto values = config.values.find("data");
  if (values == config.values.end()) return Status();
  const config::DataConfig& data = config.data;
  std::vector<std::string> problems;
  for (const auto& [key, path] : {std::pair<std::string, const std::string*>{"train_images", &data.train_images},
                                  {"train_labels", &data.train_labels},
                                  {"test_images", &data.test_images},
                                  {"test_labels", &data.test_labels}}) {
    if (values->second.PositionOf(key) == nullptr) continue;  // not set here
    Status s = path->empty() ? InvalidArgumentError(Where(config, "data", key), "is empty; name a file")
                             : CheckDataFile(config, key, *path, true);
    if (!s.ok()) problems.emplace_back(s.message());
  }
  if (problems.empty()) return Status();
  return InvalidArgumentError(StrJoin(problems, "\n"));
}

namespace {

struct OptimizerChoice {
  const plugin::OptimizerPlugin* plugin = nullptr;
  double learning_rate = 0;
  config::OptionValues hyperparameters;
};

// [optimizer]: `name` picks a loaded optimizer plugin, `learning_rate` is
// the core's, and every other key is one of the plugin's hyper-parameters.
Expected<OptimizerChoice> ChooseOptimizer(const config::Config& config, const plugin::PluginHost& host) {
  std::vector<std::string> loaded;
  for (const plugin::OptimizerPlugin* p : host.optimizers().All()) loaded.push_back(p->table->name);
  const std::string loaded_list = loaded.empty() ? "none" : StrJoin(loaded, ", ");
  if (!config.optimizer.has_value()) {
    return InvalidArgumentError(config.source,
                                ": no [optimizer] section; add one, e.g. [optimizer] name = \"sgd\" "
                                "learning_rate = 0.01 (loaded optimizers: ",
                                loaded_list, ")");
  }
  const config::Section& section = *config.optimizer;
  auto name_value = section.values.find("name");
  if (name_value == section.values.end() || name_value->second.kind != config::Value::Kind::kString) {
    return InvalidArgumentError(section.pos.ToString(),
                                ": optimizer.name: expected the name of an optimizer "
                                "plugin (loaded: ",
                                loaded_list, ")");
  }
  const std::string name = name_value->second.s;
  OptimizerChoice choice;
  for (const plugin::OptimizerPlugin* p : host.optimizers().All()) {
    if (name == p->table->name) choice.plugin = p;
  }
  if (choice.plugin == nullptr) {
    const std::string hint = ClosestMatch(name, loaded);
    return NotFoundError(name_value->second.pos.ToString(), ": optimizer.name: no optimizer plugin ", Quote(name),
                         " is loaded", hint.empty() ? "" : StrCat("; did you mean ", Quote(hint), "?"),
                         " (loaded: ", loaded_list, "; `weft plugins` shows what was found and why)");
  }
  std::vector<config::OptionSpec> specs = choice.plugin->hyperparameters;
  config::OptionSpec name_spec;
  name_spec.key = "name";
  name_spec.type = config::OptionType::kString;
  name_spec.doc = "The optimizer plugin.";
  specs.push_back(name_spec);
  config::OptionSpec lr;
  lr.key = "learning_rate";
  lr.type = config::OptionType::kFloat;
  lr.min = 0;
  lr.doc = "The base learning rate, shaped over the steps by [schedule].";
  specs.push_back(lr);
  WEFT_ASSIGN_OR_RETURN(config::OptionValues all, config::ValidateOptions(&section, "optimizer", specs));
  if (!all.Has("learning_rate")) {
    return InvalidArgumentError(section.pos.ToString(),
                                ": optimizer.learning_rate: not set; every optimizer needs "
                                "a base learning rate");
  }
  WEFT_ASSIGN_OR_RETURN(choice.learning_rate, all.GetFloat("learning_rate"));
  std::map<std::string, config::Value> hyper = all.values();
  hyper.erase("name");
  hyper.erase("learning_rate");
  choice.hyperparameters = config::OptionValues("optimizer", std::move(hyper));
  return choice;
}

// --- Reporting
// ------------------------------------------------------------------

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream out;
  if (s >= 3600)
    out << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60;
  else
    out << s / 60;
  out << ":" << std::setw(2) << std::setfill('0') << s % 60;
  return out.str();
}

std::string Fixed(double v, int digits) {
  if (std::isnan(v)) return "nan";
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

// A step a worker recorded in a task's store (RecordProgress); -1 when
// the value is not a number.
int64_t RecordedStepValue(const std::string& value) {
  char* end = nullptr;
  const long long step = std::strtoll(value.c_str(), &end, 10);
  return end != value.c_str() && *end == '\0' ? step : -1;
}

// Whole seconds left of |timeout_s| from |start| at |now|, at least 0.
int64_t SecondsLeft(Clock::time_point start, int64_t timeout_s, Clock::time_point now) {
  const int64_t spent = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
  return std::max<int64_t>(0, timeout_s - spent);
}

class Reporter {
 public:
  Reporter(std::ostream* out, bool interactive, const std::string& metrics_path)
      : out_(out), interactive_(interactive) {
    if (!metrics_path.empty()) {
      std::error_code ec;
      fs::create_directories(fs::path(metrics_path).parent_path(), ec);
      metrics_.open(metrics_path, std::ios::app);
      metrics_ok_ = metrics_.good();
    }
  }
  Status status(const std::string& metrics_path) const {
    if (!metrics_path.empty() && !metrics_ok_) {
      return UnavailableError("training.metrics: cannot open ", metrics_path, " for appending");
    }
    return Status();
  }

  // |extra| (text before the ETA, and fields of the JSON record) adds
  // what a mode reports besides: synchronous training's gradient counts.
  void Progress(int64_t step, int64_t total, double loss, double accuracy, double lr, double examples_per_sec,
                double eta_seconds, const std::string& extra = "", const Json& extra_json = Json::object()) {
    std::ostringstream line;
    line << "step " << step << "/" << total << "  loss " << Fixed(loss, 4);
    if (!std::isnan(accuracy)) line << "  accuracy " << Fixed(accuracy, 4);
    line << "  lr " << std::setprecision(3) << lr << "  " << static_cast<int64_t>(examples_per_sec + 0.5)
         << " examples/s";
    if (!extra.empty()) line << "  " << extra;
    line << "  ETA " << FormatEta(eta_seconds);
    Line(line.str(), /*transient=*/true);
    // The wall clock (seconds since the Unix epoch), so that a reader can
    // check the rate against it, and plot against time.
    const double wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    Json record = {{"step", step},
                   {"loss", loss},
                   {"accuracy", accuracy},
                   {"learning_rate", lr},
                   {"examples_per_sec", examples_per_sec},
                   {"wall_time", wall_time}};
    for (auto it = extra_json.begin(); it != extra_json.end(); ++it) record[it.key()] = it.value();
    Metric(record);
  }

  // Synchronous training, on the chief: one record per global step.
  void SyncStep(int64_t step, int64_t aggregated, int64_t stale, int64_t late) {
    Metric({{"step", step},
            {"aggregated", aggregated},
            {"stale_dropped", stale + late},
            {"late", late},
            {"stale", stale}});
  }

  void Evaluation(int64_t step, double loss, double accuracy, int64_t examples) {
    std::ostringstream line;
    line << "eval at step " << step << ": test_loss " << Fixed(loss, 4);
    if (!std::isnan(accuracy)) line << "  test_accuracy " << Fixed(accuracy, 4);
    line << "  (" << examples << " examples)";
    Line(line.str(), false);
    Metric({{"step", step}, {"test_loss", loss}, {"test_accuracy", accuracy}});
  }

  void Note(const std::string& text) { Line(text, false); }

  void Final(const TrainResult& r) {
    std::string sync;
    if (r.aggregated >= 0) sync += StrCat(" aggregated=", r.aggregated, " stale_dropped=", r.stale_dropped);
    if (r.late_gradients >= 0) sync += StrCat(" late_gradients=", r.late_gradients);
    // A worker other than the chief does not evaluate: no test figures.
    Line(
        StrCat("final: step=", r.step, " loss=", Fixed(r.loss, 4),
               std::isnan(r.test_accuracy) ? std::string() : StrCat(" test_accuracy=", Fixed(r.test_accuracy, 4)),
               " examples_per_sec=", Fixed(r.examples_per_sec, 1),
               r.wire_bytes_per_step > 0 ? StrCat(" wire_bytes_per_step=", Fixed(r.wire_bytes_per_step, 0)) : "", sync),
        false);
    Json final = {{"final", true},
                  {"step", r.step},
                  {"loss", r.loss},
                  {"test_loss", r.test_loss},
                  {"test_accuracy", r.test_accuracy},
                  {"examples_per_sec", r.examples_per_sec},
                  {"input_wait_fraction", r.input_wait_fraction}};
    if (r.wire_bytes_per_step > 0) final["wire_bytes_per_step"] = r.wire_bytes_per_step;
    if (r.aggregated >= 0) {
      final["aggregated"] = r.aggregated;
      final["stale_dropped"] = r.stale_dropped;
    }
    if (r.late_gradients >= 0) final["late_gradients"] = r.late_gradients;
    Metric(final);
  }

 private:
  // A transient line is redrawn in place on a terminal; anything else
  // first finishes the transient one.
  void Line(const std::string& text, bool transient) {
    if (out_ == nullptr) return;
    if (interactive_) {
      *out_ << "\r\033[K" << text;
      if (!transient) *out_ << "\n";
      pending_ = transient;
    } else {
      *out_ << text << "\n";
    }
    out_->flush();
  }
  // One JSON object per line (NaN and infinities as null).
  void Metric(const Json& json) {
    if (!metrics_ok_) return;
    metrics_ << DumpJson(json) << "\n";
    metrics_.flush();
  }

 public:
  ~Reporter() {
    if (interactive_ && pending_ && out_ != nullptr) *out_ << "\n";
  }

 private:
  std::ostream* out_;
  bool interactive_;
  bool pending_ = false;
  std::ofstream metrics_;
  bool metrics_ok_ = false;
};

// --- Checkpoints
// ----------------------------------------------------------------

constexpr const char* kFormatKey = "weft.trainer";

std::string Describe(DType dtype, const Shape& shape) { return StrCat(DTypeName(dtype), shape.ToString()); }

// What differs between a checkpoint and the training graph's state, or OK.
// A checkpoint as the graph's state reads it. A variable split across ps
// tasks is saved as its parts ("emb/part_0", "emb/part_1/adam/m"); the
// graph may want it whole (one process), split the same way, or split in
// another number of parts: the parts are joined along dimension 0 and cut
// again as SplitRows cuts them (core/dist/variable_partition.h).
class CheckpointView {
 public:
  CheckpointView(const checkpoint::BundleReader& reader, const TrainingGraph& tg) : reader_(reader) {
    for (const checkpoint::TensorEntry& e : reader.entries()) {
      const dist::PartName pn = dist::ParsePartName(e.name);
      if (pn.part >= 0) saved_parts_[pn.whole][pn.part] = &e;
    }
    for (const std::string& name : tg.state) {
      const dist::PartName pn = dist::ParsePartName(name);
      if (pn.part >= 0) ++wanted_parts_[pn.whole];
    }
  }

  // The dtype and shape |name| would read as; false when the checkpoint
  // has nothing for it.
  bool Describe(const std::string& name, DType* dtype, Shape* shape) const {
    if (const checkpoint::TensorEntry* e = reader_.Find(name)) {
      *dtype = e->dtype;
      *shape = e->shape;
      return true;
    }
    const dist::PartName pn = dist::ParsePartName(name);
    if (!WholeShape(pn.whole, dtype, shape)) return false;
    if (pn.part < 0) return true;
    if (shape->rank() < 1) return false;
    const auto parts = dist::SplitRows(pn.whole, shape->dim(0), wanted_parts_.at(pn.whole));
    if (pn.part >= static_cast<int>(parts.size())) return false;
    std::vector<int64_t> dims = shape->dims();
    dims[0] = parts[static_cast<std::size_t>(pn.part)].rows;
    *shape = Shape(dims);
    return true;
  }

  // Whether the checkpoint's tensor |name| has a variable of the graph to
  // go to (itself, or the whole or parts of its variable).
  bool Used(const std::string& name, const std::set<std::string>& state) const {
    if (state.count(name) != 0) return true;
    const dist::PartName pn = dist::ParsePartName(name);
    return pn.part >= 0 && (state.count(pn.whole) != 0 || wanted_parts_.count(pn.whole) != 0);
  }

  Expected<Tensor> Read(const std::string& name) const {
    if (reader_.Find(name) != nullptr) return reader_.Read(name);
    const dist::PartName pn = dist::ParsePartName(name);
    WEFT_ASSIGN_OR_RETURN(Tensor whole, ReadWhole(pn.whole));
    if (pn.part < 0) return whole;
    const auto parts = dist::SplitRows(pn.whole, whole.dim(0), wanted_parts_.at(pn.whole));
    const dist::VariablePart& part = parts[static_cast<std::size_t>(pn.part)];
    std::vector<int64_t> dims = whole.shape().dims();
    dims[0] = part.rows;
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(whole.dtype(), Shape(dims)));
    const uint64_t row = whole.dim(0) == 0 ? 0 : whole.byte_size() / static_cast<uint64_t>(whole.dim(0));
    std::memcpy(out.raw_data(), static_cast<const char*>(whole.raw_data()) + row * static_cast<uint64_t>(part.offset),
                row * static_cast<uint64_t>(part.rows));
    return out;
  }

 private:
  bool WholeShape(const std::string& whole, DType* dtype, Shape* shape) const {
    if (const checkpoint::TensorEntry* e = reader_.Find(whole)) {
      *dtype = e->dtype;
      *shape = e->shape;
      return true;
    }
    auto it = saved_parts_.find(whole);
    if (it == saved_parts_.end() || it->second.empty()) return false;
    int64_t rows = 0;
    int expect = 0;
    const checkpoint::TensorEntry* first = it->second.begin()->second;
    for (const auto& [k, e] : it->second) {
      if (k != expect++ || e->shape.rank() < 1 || !e->shape.IsFullyDefined()) return false;  // a part missing
      // Parts of one variable: one dtype, rows of one shape.
      if (e->dtype != first->dtype || e->shape.rank() != first->shape.rank()) return false;
      for (int d = 1; d < e->shape.rank(); ++d) {
        if (e->shape.dim(d) != first->shape.dim(d)) return false;
      }
      rows += e->shape.dim(0);
      *dtype = e->dtype;
      *shape = e->shape;
    }
    std::vector<int64_t> dims = shape->dims();
    dims[0] = rows;
    *shape = Shape(dims);
    return true;
  }

  Expected<Tensor> ReadWhole(const std::string& whole) const {
    if (reader_.Find(whole) != nullptr) return reader_.Read(whole);
    DType dtype = DType::kInvalid;
    Shape shape;
    if (!WholeShape(whole, &dtype, &shape)) {
      return NotFoundError("checkpoint ", reader_.prefix(), " has neither ", Quote(whole), " nor all of its parts");
    }
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(dtype, shape));
    uint64_t at = 0;
    for (const auto& [k, e] : saved_parts_.at(whole)) {
      WEFT_ASSIGN_OR_RETURN(Tensor part, reader_.Read(e->name));
      std::memcpy(static_cast<char*>(out.raw_data()) + at, part.raw_data(), part.byte_size());
      at += part.byte_size();
    }
    return out;
  }

  const checkpoint::BundleReader& reader_;
  std::map<std::string, std::map<int, const checkpoint::TensorEntry*>> saved_parts_;
  std::map<std::string, int> wanted_parts_;
};

Status CheckCompatible(const std::string& prefix, const checkpoint::BundleReader& reader, const TrainingGraph& tg) {
  std::vector<std::string> problems;
  const CheckpointView view(reader, tg);
  for (const std::string& name : tg.state) {
    DType saved_dtype = DType::kInvalid;
    Shape saved_shape;
    const bool found = view.Describe(name, &saved_dtype, &saved_shape);
    const Graph::Node* node = tg.graph.Find(name);
    const DType dtype = node->def.attrs.at("dtype").get<DType>();
    const Shape shape = node->def.attrs.at("shape").get<Shape>();
    if (!found) {
      problems.push_back(
          StrCat("the model's variable ", Quote(name), " (", Describe(dtype, shape), ") is not in the checkpoint"));
    } else if (saved_dtype != dtype || !shape.IsCompatibleWith(saved_shape)) {
      problems.push_back(StrCat("variable ", Quote(name), " is ", Describe(saved_dtype, saved_shape),
                                " in the checkpoint but ", Describe(dtype, shape), " in the model"));
    }
  }
  std::set<std::string> known(tg.state.begin(), tg.state.end());
  for (const checkpoint::TensorEntry& entry : reader.entries()) {
    if (!view.Used(entry.name, known)) {
      problems.push_back(StrCat("the checkpoint's tensor ", Quote(entry.name), " is not a variable of the model"));
    }
  }
  if (problems.empty()) return Status();
  const std::size_t shown = std::min<std::size_t>(problems.size(), 5);
  std::string text = StrCat("checkpoint ", prefix, " was not written for this model (or optimizer): ");
  for (std::size_t i = 0; i < shown; ++i) text += StrCat(i == 0 ? "" : "; ", problems[i]);
  if (problems.size() > shown) text += StrCat("; and ", problems.size() - shown, " more differences");
  return InvalidArgumentError(text);
}

int64_t MetaInt(const std::map<std::string, std::string>& meta, const std::string& key, int64_t fallback) {
  auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (...) {
    return fallback;
  }
}

// --- The run
// --------------------------------------------------------------------

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
        reporter_(options.out, options.interactive, config.training.metrics) {}

  // Allreduce mode: a worker that stops on an error closes its links, so
  // that the others fail at once rather than at their collective timeout.
  ~Run() {
    if (group_ == nullptr) return;
    if (!finished_) group_->Abort(AbortedError(dist::TaskPrefix("worker", worker_), " stopped on an error"));
    runtime::UnregisterCollectiveGroup(group_->options().name);
  }
  Expected<TrainResult> Go();
  Expected<TrainingPlacementPlan> Plan();

 private:
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
  // Sync mode: the rest of Go() once the variables have values.
  Expected<TrainResult> GoSync(bool restored);
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
  // --trace-steps.
  runtime::RunOptions TraceStep(int64_t step) const {
    runtime::RunOptions o;
    if (options_.trace != nullptr && step >= options_.trace_first && step <= options_.trace_last) {
      o.trace = options_.trace;
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

Status Run::CheckClusterRole() {
  const dist::ClusterSpec* c = options_.cluster;
  if (c == nullptr || !c->distributed()) return Status();
  const dist::JobSpec* workers = c->FindJob("worker");
  const dist::JobSpec* ps = c->FindJob("ps");
  auto jobs = [&] {
    std::vector<std::string> names;
    for (const dist::JobSpec& j : c->jobs) names.push_back(StrCat(j.name, " (", j.tasks.size(), ")"));
    return StrJoin(names, ", ");
  };
  if (workers == nullptr || workers->tasks.empty()) {
    return InvalidArgumentError(config_.source,
                                ": weft train on a cluster runs on the tasks of a job named "
                                "\"worker\", and [cluster] has none (jobs: ",
                                jobs(), ")");
  }
  if (!c->self) {
    return InvalidArgumentError("weft train on a cluster runs one worker: give --job worker --task I (", config_.source,
                                " has ", workers->tasks.size(), " worker", workers->tasks.size() == 1 ? "" : "s",
                                "; worker 0 is the chief)");
  }
  if (c->self->job != "worker") {
    return InvalidArgumentError("weft train runs the worker tasks of a cluster, not ", c->self->ToString(),
                                ": start it with `weft serve --config ", config_.source, " --job ", c->self->job,
                                " --task ", c->self->task, "`, and each worker with `weft train MODEL --config ",
                                config_.source, " --job worker --task I`");
  }
  worker_ = c->self->task;
  num_workers_ = static_cast<int64_t>(workers->tasks.size());
  if (config_.training.mode == "allreduce") {
    // Every worker holds the whole model; a ps job, if any, is not used.
    allreduce_cluster_ = c;
    return Status();
  }
  if (ps == nullptr || ps->tasks.empty()) {
    return InvalidArgumentError(config_.source,
                                ": weft train on a cluster keeps the variables on the tasks of a job "
                                "named \"ps\", and [cluster] has none (jobs: ",
                                jobs(), ")");
  }
  cluster_ = c;
  WEFT_RETURN_IF_ERROR(CheckTrainingMode(config_, num_workers_, true));
  return Status();
}

Status Run::WaitForPeers(dist::TaskService& service, const std::vector<dist::Peer>& peers) {
  // The other tasks may not be up yet: wait for each (cluster.
  // connect_timeout_ms in all), saying what this worker waits for.
  const int64_t connect_ms = config_.cluster ? config_.cluster->connect_timeout_ms : 10000;
  const Clock::time_point start = Clock::now();
  Clock::time_point next_note = start + std::chrono::seconds(2);
  for (const dist::Peer& peer : peers) {
    if (peer.name == service.name()) continue;
    while (true) {
      Status answered = service.Ping(peer.name, 1000);
      if (answered.ok()) break;
      const Clock::time_point now = Clock::now();
      const double waited = Seconds(now - start);
      if (waited * 1000 >= static_cast<double>(connect_ms)) {
        return Status(Code::kUnavailable, StrCat("task ", peer.name, " (", peer.address, ") did not answer within ",
                                                 connect_ms, " ms (cluster.connect_timeout_ms): ", answered.message()));
      }
      if (now >= next_note) {
        reporter_.Note(StrCat("waiting for ", peer.name, " (", peer.address, ") to start: ", Fixed(waited, 0), " s of ",
                              Fixed(static_cast<double>(connect_ms) / 1000, 0), " (cluster.connect_timeout_ms)"));
        next_note = now + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  return Status();
}

Status Run::StartCluster() {
  const dist::ClusterSpec& c = *cluster_;
  const dist::JobSpec& ps = *c.FindJob("ps");
  dist::DistSessionOptions so = dist::SessionOptionsFor(c, config_);
  // This worker and the tasks of the other jobs, not the other workers: a
  // worker's steps involve only itself and the parameter servers, so one
  // worker that is late or gone does not hold up another. Itself first:
  // what is left unpinned (the model's compute, the gradients) runs here.
  const std::string me = c.self->ToString();
  std::erase_if(so.tasks, [&](const dist::Peer& p) { return p.name != me && p.name.rfind("/job:worker/", 0) == 0; });
  std::stable_partition(so.tasks.begin(), so.tasks.end(), [&](const dist::Peer& p) { return p.name == me; });
  for (placement::Pin& pin : ClusterPins()) so.placement.pins.push_back(std::move(pin));
  WEFT_ASSIGN_OR_RETURN(dist::TaskService::Options service_options, dist::ServiceOptionsFor(c, *c.self, config_));
  board_->SetRole(
      StrCat("worker ", worker_, " of ", num_workers_, chief() ? ", the chief" : "", sync() ? ", sync" : ", async"));
  board_->SetState("starting");
  service_options.board = board_;
  if (recovery_auto() && !chief()) {
    // A finished worker stays (its progress is safe in this process) until
    // the chief ends the run.
    service_options.on_shutdown = [stop = told_to_stop_](const std::string&, const std::string&) { stop->store(true); };
  }
  auto service = dist::TaskService::Start(service_options, host_, devices_);
  if (!service.ok()) return service.status().WithContext(StrCat("starting ", me));
  WEFT_RETURN_IF_ERROR(WaitForPeers(**service, so.tasks));
  // One incarnation for the process: its task and its session.
  so.incarnation = (*service)->incarnation();
  auto session = dist::DistSession::Create(tg_.graph, so, host_);
  if (!session.ok()) return session.status();
  session_ = std::make_unique<ClusterRunner>(
      std::move(*service), std::move(*session),
      StrCat("worker ", worker_, " of ", num_workers_, (chief() ? " (the chief)" : ""), ", variables on ",
             ps.tasks.size(), " ps task", ps.tasks.size() == 1 ? "" : "s"));
  return Status();
}

Status Run::WaitForChief() {
  const Clock::time_point start = Clock::now();
  int64_t timeout_s = config_.cluster ? config_.cluster->init_timeout_s : 300;
  if (recovery_auto()) timeout_s = std::max(timeout_s, recovery_timeout_s());
  const Clock::time_point deadline = start + std::chrono::seconds(timeout_s);
  Clock::time_point next_note = start + std::chrono::seconds(2);
  bool noted = false;
  const std::size_t n = tg_.state_ready.size();
  while (true) {
    std::vector<Tensor> ready;
    Status asked = session_->Run({}, tg_.state_ready, {}, &ready)
                       .WithContext("asking the ps tasks whether the variables have values");
    if (!asked.ok()) {
      // recovery = "auto": a ps task lost or restarting is waited out (up
      // to the deadline); the chief may end the run meanwhile.
      if (!recovery_auto() || !IsRecoverable(asked)) return asked;
      if (told_to_stop_->load()) return Status();
      if (Clock::now() >= deadline) {
        return Status(Code::kUnavailable, StrCat(asked.message(), "; waited ", timeout_s, " s (recovery_timeout_s)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    std::size_t count = 0;
    for (const Tensor& t : ready) count += *static_cast<const uint8_t*>(t.raw_data()) != 0 ? 1 : 0;
    if (count == n) {
      if (Clock::now() > start + std::chrono::seconds(2)) {
        reporter_.Note(StrCat("the chief initialised the variables after ", Fixed(Seconds(Clock::now() - start), 1),
                              " s; training"));
      }
      return Status();
    }
    const Clock::time_point now = Clock::now();
    auto note = [&] {
      reporter_.Note(StrCat("waiting for the chief (/job:worker/task:0) to initialise the variables: ", count, " of ",
                            n, " have a value (", Fixed(Seconds(now - start), 0), " s of ", timeout_s, ")"));
      noted = true;
    };
    if (now >= deadline) {
      if (!noted) note();  // said at least once, however slow the first asking was
      return Status(Code::kDeadlineExceeded,
                    StrCat("worker ", worker_, " waited ", timeout_s,
                           " s for the chief (/job:worker/task:0) to initialise the variables, and ", count, " of ", n,
                           " have a value: is the chief running? (the wait is cluster.init_timeout_s)"));
    }
    if (now >= next_note) {
      note();
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status Run::FinishCluster() {
  board_->SetState(chief() ? "finished; waiting for the other workers" : "finished");
  const std::string chief_task = dist::TaskPrefix("worker", 0);
  if (recovery_auto() && !chief()) {
    board_->SetState("finished; staying until the chief ends the run");
    reporter_.Note("finished; staying until the chief ends the run (recovery = \"auto\")");
    Clock::time_point last_seen = Clock::now();
    while (!told_to_stop_->load()) {
      runner().service().NotifyKvSet(chief_task, StrCat("recovery/done/", worker_), "1");
      if (runner().Ping(chief_task, 2000).ok()) {
        last_seen = Clock::now();
      } else if (Clock::now() - last_seen > std::chrono::seconds(recovery_timeout_s())) {
        reporter_.Note(
            StrCat("the chief has not answered for ", recovery_timeout_s(), " s (recovery_timeout_s); stopping"));
        break;
      }
      for (int i = 0; i < 10 && !told_to_stop_->load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Status();
  }
  if (recovery_auto()) {
    // The others say they finished in this task's store (again every
    // second, so a restart of this process loses nothing).
    auto store = runner().service().KvStoreOf(chief_task);
    if (!store.ok()) return store.status();
    std::vector<int64_t> awaited;
    for (int64_t w = 1; w < num_workers_; ++w) awaited.push_back(w);
    const Clock::time_point start = Clock::now();
    const int64_t timeout_s = std::max(config_.cluster->init_timeout_s, recovery_timeout_s());
    Clock::time_point next_note = start;
    Clock::time_point next_check = start;
    // A lost worker is given recovery_timeout_s to come back (its launcher
    // restarts it), from when it was lost.
    std::map<int64_t, Clock::time_point> lost_since;
    while (!awaited.empty()) {
      std::erase_if(awaited, [&](int64_t w) {
        if ((*store)->Get(StrCat("recovery/done/", w), 0).ok()) return true;
        const std::string why = LostWorker(w);
        if (why.empty()) {
          lost_since.erase(w);
          return false;
        }
        const Clock::time_point now = Clock::now();
        auto [since, first] = lost_since.emplace(w, now);
        if (first) {
          reporter_.Note(
              StrCat(why, "; waiting up to ", recovery_timeout_s(), " s for it to come back (recovery_timeout_s)"));
          return false;
        }
        if (now - since->second < std::chrono::seconds(recovery_timeout_s())) return false;
        reporter_.Note(StrCat(why, "; it did not come back within ", recovery_timeout_s(),
                              " s (recovery_timeout_s), so the run finishes without it"));
        return true;
      });
      if (awaited.empty()) break;
      const Clock::time_point now = Clock::now();
      if (now >= next_check) {
        // A ps task restarted while the others still train: they wait for
        // the variables, which only this task restores.
        auto incarnations = PsIncarnations(now + std::chrono::seconds(2));
        if (incarnations.ok() && *incarnations != state_incarnations_) {
          const int64_t finished_at = step_;
          WEFT_RETURN_IF_ERROR(Recover(UnavailableError("a ps task was restarted while the other workers finished")));
          step_ = finished_at;
        }
        next_check = Clock::now() + std::chrono::seconds(2);
      }
      if (now >= start + std::chrono::seconds(timeout_s)) {
        reporter_.Note(StrCat("note: ", AwaitedWorkers(awaited), " did not finish within ", timeout_s,
                              " s; ending the run without ", awaited.size() == 1 ? "it" : "them"));
        break;
      }
      if (now >= next_note) {
        reporter_.Note(StrCat("waiting for ", AwaitedWorkers(awaited), " to finish (",
                              num_workers_ - 1 - static_cast<int64_t>(awaited.size()), " of ", num_workers_ - 1,
                              " done); at most ", SecondsLeft(start, timeout_s, now), " s more"));
        next_note = now + std::chrono::seconds(10);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (num_workers_ > 1 && !sync()) {
      // The model as every worker left it, not as it was at the chief's
      // last step.
      auto e = Evaluate();
      if (e.ok() && e->examples > 0) {
        reporter_.Note("evaluating again now that every worker finished:");
        reporter_.Evaluation(step_, e->loss, e->accuracy, e->examples);
        final_evaluation_ = *e;
      }
    }
    std::vector<std::string> tasks;
    for (const dist::JobSpec& job : cluster_->jobs) {
      for (const dist::TaskSpec& t : job.tasks) {
        if (job.name != "worker" || t.index != 0) tasks.push_back(dist::TaskPrefix(job.name, t.index));
      }
    }
    std::vector<std::string> failed;
    for (const std::string& task : tasks) {
      Status stopped =
          runner().service().AskToStop(task, StrCat("the chief ended the training run at step ", step_), 10000);
      if (!stopped.ok()) failed.push_back(stopped.message());
    }
    reporter_.Note(failed.empty() ? StrCat("stopped ", StrJoin(tasks, ", "), ": the run is over")
                                  : StrCat("note: stopping the tasks: ", StrJoin(failed, "; ")));
    return Status();
  }
  if (!chief()) {
    // Who finished, for the chief's lines (the count on ps task 0 is what
    // it waits on).
    if (auto store = runner().service().KvStoreOf(chief_task); store.ok()) {
      (void)(*store)->Set(StrCat("cluster/done/", worker_), "1");
    }
    return session_->Run({}, {}, {"cluster/worker_done"}, nullptr)
        .WithContext("telling the chief this worker finished");
  }
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = config_.cluster ? config_.cluster->init_timeout_s : 300;
  Clock::time_point next_note = start;
  const int64_t others = num_workers_ - 1;
  auto own_store = runner().service().KvStoreOf(chief_task);
  if (!own_store.ok()) return own_store.status();
  // The workers still awaited; a worker the heartbeats declared lost is
  // not awaited (without recovery nothing brings it back).
  std::vector<int64_t> awaited;
  for (int64_t w = 1; w < num_workers_; ++w) awaited.push_back(w);
  int64_t lost = 0;
  while (others > 0) {
    std::vector<Tensor> done;
    WEFT_RETURN_IF_ERROR(session_->Run({}, {"cluster/workers_done/read"}, {}, &done)
                             .WithContext("asking ps task 0 how many workers finished"));
    const int64_t count = done[0].scalar<int64_t>();
    if (count + lost >= others) break;
    std::erase_if(awaited, [&](int64_t w) {
      if ((*own_store)->Get(StrCat("cluster/done/", w), 0).ok()) return true;
      const std::string why = LostWorker(w);
      if (why.empty()) return false;
      reporter_.Note(StrCat(why, "; it did not come back, so the run finishes without it"));
      ++lost;
      return true;
    });
    if (awaited.empty() || count + lost >= others) break;
    const Clock::time_point now = Clock::now();
    if (now >= start + std::chrono::seconds(timeout_s)) {
      reporter_.Note(StrCat("note: ", AwaitedWorkers(awaited), " did not finish within ", timeout_s,
                            " s (cluster.init_timeout_s); ending the run without ",
                            awaited.size() == 1 ? "it" : "them"));
      break;
    }
    if (now >= next_note) {
      reporter_.Note(StrCat("waiting for ", AwaitedWorkers(awaited), " to finish (", count, " of ", others,
                            " done); at most ", SecondsLeft(start, timeout_s, now),
                            " s more (cluster.init_timeout_s)"));
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::vector<std::string> servers;
  for (const dist::JobSpec& job : cluster_->jobs) {
    if (job.name == "worker") continue;
    for (const dist::TaskSpec& t : job.tasks) servers.push_back(dist::TaskPrefix(job.name, t.index));
  }
  auto* runner = static_cast<ClusterRunner*>(session_.get());
  Status stopped = runner->StopTasks(servers, StrCat("the chief ended the training run at step ", step_));
  if (stopped.ok()) {
    reporter_.Note(StrCat("stopped ", StrJoin(servers, ", "), ": the run is over"));
  } else {
    reporter_.Note(StrCat("note: ", stopped.message(), " (tasks started with `weft serve` keep serving)"));
  }
  return Status();
}

Expected<std::map<std::string, uint64_t>> Run::PsIncarnations(Clock::time_point deadline) {
  std::map<std::string, uint64_t> out;
  std::vector<std::string> names;
  for (const dist::TaskSpec& t : cluster_->FindJob("ps")->tasks) names.push_back(dist::TaskPrefix("ps", t.index));
  Status last;
  for (;;) {
    for (const std::string& name : names) {
      if (out.count(name) != 0) continue;
      auto incarnation = runner().service().IncarnationOf(name, 2000);
      if (incarnation.ok()) {
        out[name] = *incarnation;
      } else {
        last = incarnation.status();
      }
    }
    if (out.size() == names.size()) return out;
    if (Clock::now() >= deadline) return UnavailableError("not every ps task answers: ", last.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status Run::Recover(const Status& why, bool always) {
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = recovery_timeout_s();
  const Clock::time_point deadline = start + std::chrono::seconds(timeout_s);
  const int64_t before = step_;
  board_->SetState(StrCat("recovering: ", why.message().substr(0, 300)));
  reporter_.Note(StrCat("recovery: step ", step_ + 1, " failed: ", why.message(),
                        "; waiting for every ps task (recovery_timeout_s = ", timeout_s, ")"));
  auto gave_up = [&](const Status& s) {
    return Status(Code::kUnavailable, StrCat(why.message(), "; then ", s.message(), "; gave up after ", timeout_s,
                                             " s (recovery_timeout_s)"));
  };
  for (;;) {
    auto now = PsIncarnations(deadline);
    if (!now.ok()) return gave_up(now.status());
    std::vector<std::string> restarted;
    for (const auto& [task, incarnation] : *now) {
      const uint64_t known = state_incarnations_[task];
      if (known != incarnation) {
        restarted.push_back(StrCat(task, " (incarnation ", dist::FormatIncarnation(known), " -> ",
                                   dist::FormatIncarnation(incarnation), ")"));
      }
    }
    if (restarted.empty() && !always) {
      reporter_.Note(StrCat("recovery: the ps tasks answer and none was restarted; nothing to restore (",
                            Fixed(Seconds(Clock::now() - start), 1), " s)"));
      board_->SetState("training");
      return Status();
    }
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string> latest, checkpoints_->Latest());
    if (!latest.has_value()) {
      return FailedPreconditionError(why.message(), "; and no checkpoint in ", config_.checkpoint.dir,
                                     " opens to restore the ps tasks from");
    }
    Status restored = Restore(*latest);
    if (!restored.ok()) {
      if (!IsRecoverable(restored)) return restored;
      if (Clock::now() >= deadline) return gave_up(restored);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;  // another fault meanwhile: wait for the tasks again
    }
    // Whole only if no ps task was restarted during the restore.
    auto after = PsIncarnations(deadline);
    if (!after.ok()) return gave_up(after.status());
    if (*after != *now) continue;
    state_incarnations_ = *after;
    const double seconds = Seconds(Clock::now() - start);
    const std::string cause =
        restarted.empty()
            ? std::string(" (no ps task was restarted, but the synchronous update may have reached only some of them)")
            : StrCat(" after ", StrJoin(restarted, ", "), " restarted");
    reporter_.Note(StrCat("recovered from ", *latest, cause, ": step ", before, " -> ", step_, ", ", before - step_,
                          " steps lost, ", Fixed(seconds, 1), " s"));
    board_->SetState("training");
    return Status();
  }
}

Status Run::WaitForRecovery(const Status& why) {
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = recovery_timeout_s();
  board_->SetState("waiting for the chief to restore the variables");
  reporter_.Note(StrCat("recovery: step ", step_ + 1, " failed: ", why.message(),
                        "; waiting for the chief to restore the variables (recovery_timeout_s = ", timeout_s, ")"));
  Clock::time_point next_note = start + std::chrono::seconds(10);
  const std::size_t n = tg_.state_ready.size();
  for (;;) {
    std::vector<Tensor> ready;
    Status asked = session_->Run({}, tg_.state_ready, {}, &ready);
    if (asked.ok()) {
      std::size_t count = 0;
      for (const Tensor& t : ready) count += *static_cast<const uint8_t*>(t.raw_data()) != 0 ? 1 : 0;
      if (count == n) {
        reporter_.Note(StrCat("recovery: every variable has a value again after ",
                              Fixed(Seconds(Clock::now() - start), 1), " s; carrying on at step ", step_ + 1));
        board_->SetState("training");
        return Status();
      }
    } else if (!IsRecoverable(asked)) {
      return asked;
    }
    const Clock::time_point now = Clock::now();
    if (now >= start + std::chrono::seconds(timeout_s)) {
      return Status(Code::kUnavailable, StrCat(why.message(), "; the variables did not come back within ", timeout_s,
                                               " s; gave up (recovery_timeout_s)"));
    }
    if (now >= next_note) {
      reporter_.Note(
          StrCat("still waiting for the chief to restore the variables (", Fixed(Seconds(now - start), 0), " s)"));
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void Run::RecordProgress(int64_t step) {
  if (recovery_auto()) {
    // With every other task, so that it outlives any one of them.
    for (const std::string& task : OtherTasks()) {
      runner().service().NotifyKvSet(task, StrCat("recovery/progress/", worker_), std::to_string(step));
    }
    return;
  }
  if (chief()) return;
  const Clock::time_point now = Clock::now();
  if (now - progress_recorded_at_ < std::chrono::seconds(1) && step < total_steps_) return;
  progress_recorded_at_ = now;
  runner().service().NotifyKvSet(dist::TaskPrefix("worker", 0), StrCat("cluster/progress/", worker_),
                                 std::to_string(step));
}

int64_t Run::RecordedStep(int64_t w) {
  auto store = runner().service().KvStoreOf(dist::TaskPrefix("worker", 0));
  if (!store.ok()) return -1;
  auto value = (*store)->Get(StrCat(recovery_auto() ? "recovery/progress/" : "cluster/progress/", w), 0);
  return value.ok() ? RecordedStepValue(*value) : -1;
}

std::string Run::LostWorker(int64_t w) {
  const std::string name = dist::TaskPrefix("worker", w);
  auto state = runner().service().PeerStateOf(name);
  if (!state.has_value() || state->state != dist::HeartbeatMonitor::PeerState::State::kLost) return {};
  const int64_t step = RecordedStep(w);
  return StrCat(
      "worker ", name, " (", state->peer.address, ") was lost",
      step >= 0 ? StrCat(" at step ", step, " (the last it reported)") : std::string(" before it reported a step"),
      ": no heartbeat answer for ", dist::FormatSilence(state->silent_ms));
}

std::string Run::AwaitedWorkers(const std::vector<int64_t>& workers) {
  std::vector<std::string> named;
  for (int64_t w : workers) {
    const int64_t step = RecordedStep(w);
    named.push_back(StrCat(dist::TaskPrefix("worker", w), step >= 0 ? StrCat(" (at step ", step, ")") : std::string()));
  }
  return StrCat(workers.size() == 1 ? "worker " : "workers ", StrJoin(named, ", "));
}

Status Run::StopHere(int64_t saved_step) {
  const int signal = options_.stop_signal->load();
  const std::string name = signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : StrCat("signal ", signal);
  std::string saved;
  if (chief() && checkpoints_ != nullptr) {
    if (saved_step == step_) {
      auto latest = checkpoints_->Latest();
      if (latest.ok() && latest->has_value()) saved = StrCat("; ", **latest, " holds it: --resume continues from it");
    } else {
      auto prefix = Save(step_);
      saved = prefix.ok() ? StrCat("; saved ", *prefix, ": --resume continues from it")
                          : StrCat("; saving it failed (", prefix.status().message(), ")");
    }
  }
  return CancelledError("stopped by ", name, " at step ", step_, " of ", total_steps_, saved);
}

Status Run::ChiefLost(int64_t step, const Status& why) const {
  const dist::TaskSpec* chief_task = cluster_->FindTask({"worker", 0});
  dist::LostTask lost{dist::TaskPrefix("worker", 0), chief_task != nullptr ? chief_task->Url() : "?",
                      StrCat("the chief did not answer at this worker's step ", step)};
  return dist::LostTaskError(lost,
                             "This worker stops. To go on: start the chief again with --resume, then the workers; or "
                             "run the cluster under `weft cluster launch` with [cluster] recovery = \"auto\", which "
                             "restarts lost tasks by itself.",
                             why.message());
}

std::vector<std::string> Run::OtherTasks() const {
  std::vector<std::string> tasks;
  const std::string me = cluster_->self->ToString();
  for (const dist::JobSpec& job : cluster_->jobs) {
    for (const dist::TaskSpec& t : job.tasks) {
      if (dist::TaskPrefix(job.name, t.index) != me) tasks.push_back(dist::TaskPrefix(job.name, t.index));
    }
  }
  return tasks;
}

int64_t Run::RemoteProgress() {
  // The furthest any task recorded: one that restarted meanwhile lost it.
  int64_t furthest = 0;
  for (const std::string& task : OtherTasks()) {
    auto store = runner().service().KvStoreOf(task);
    if (!store.ok()) continue;
    auto value = (*store)->Get(StrCat("recovery/progress/", worker_), 0);
    if (value.ok()) furthest = std::max(furthest, RecordedStepValue(*value));
  }
  return furthest;
}

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

Expected<TrainResult> Run::Go() {
  WEFT_RETURN_IF_ERROR(Prepare());
  reporter_.Note(StrCat("training ", options_.model_path, ": ", total_steps_, " steps (", steps_per_epoch_,
                        " per epoch) of batch ", config_.training.batch_size, ", ", optimizer_->name(), " at ",
                        optimizer_choice_.learning_rate, ", ", tg_.variables.size(), " variables, ",
                        session_->Describe()));
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
    if (latest.ok() && latest->has_value()) {
      std::vector<Tensor> ready;
      bool all_set = !sync() && session_->Run({}, tg_.state_ready, {}, &ready).ok();
      for (const Tensor& t : ready) all_set = all_set && *static_cast<const uint8_t*>(t.raw_data()) != 0;
      if (all_set) {
        kept_from = **latest;
      } else {
        resume = true;
        resumed_by_recovery = true;
      }
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
      return ended;
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
  TrainResult result;
  bool restored = false;
  if (resume && chief()) {
    WEFT_ASSIGN_OR_RETURN(std::optional<std::string> latest, checkpoints_->Latest());
    if (latest.has_value()) {
      WEFT_RETURN_IF_ERROR(Restore(*latest));
      restored = true;
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
  if (!restored) {
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
    if (!restored && step_ != kept_step) {
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
  if (sync()) return GoSync(restored);
  if (allreduce()) {
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
  }

  std::vector<std::string> fetches = {tg_.loss};
  if (!accuracy_.empty()) fetches.push_back(accuracy_);
  checkpoint::SavePolicy policy(config_.checkpoint.every_steps, config_.checkpoint.every_seconds);
  policy.Saved(step_, Clock::now());
  const int64_t batch_size = config_.training.batch_size;
  const int64_t first_step = step_;
  double train_seconds = 0;
  double wait_at_start = pipeline_->wait_seconds();
  double interval_loss = 0, interval_accuracy = 0;
  int64_t interval_steps = 0;
  Clock::time_point interval_start = Clock::now();
  // A resumed run has its starting step saved already.
  int64_t saved_step = restored ? step_ : -1;
  // A worker other than the chief checks every few seconds that the chief
  // is still there (automatic recovery is not implemented: it stops).
  Clock::time_point next_chief_check = Clock::now() + std::chrono::seconds(5);
  const dist::WireCounters wire_before = dist::ReadWireCounters();
  // recovery = "auto": a step, evaluation or save that failed because a
  // task was lost is waited out (the chief restores the ps tasks when one
  // came back restarted), and the loop carries on from step_.
  auto recover = [&](const Status& why) -> Status {
    if (!recovery_auto() || !IsRecoverable(why)) return why;
    WEFT_RETURN_IF_ERROR(chief() ? Recover(why) : WaitForRecovery(why));
    if (chief()) {
      policy.Saved(step_, Clock::now());
      saved_step = step_;
    }
    interval_loss = interval_accuracy = 0;
    interval_steps = 0;
    interval_start = Clock::now();
    return Status();
  };
  board_->SetState("training");
  board_->SetTotalSteps(total_steps_);
  while (step_ < total_steps_) {
    if (StopRequested()) return StopHere(saved_step);
    if (distributed() && !chief() && !recovery_auto() && Clock::now() >= next_chief_check) {
      Status alive = static_cast<ClusterRunner*>(session_.get())->Ping("/job:worker/task:0", 5000);
      if (!alive.ok()) return ChiefLost(step_, alive);
      next_chief_check = Clock::now() + std::chrono::seconds(5);
    }
    const Clock::time_point t0 = Clock::now();
    auto batch = pipeline_->Next();
    if (!batch.ok()) return batch.status().WithContext(StrCat("reading training batch ", step_ + 1));
    const double lr = LearningRateAt(config_.schedule, optimizer_choice_.learning_rate, step_, total_steps_);
    std::vector<Tensor> out;
    Status ran = session_->Run({{images_, batch->features},
                                {labels_, batch->labels},
                                {tg_.learning_rate, Tensor::Scalar<float>(static_cast<float>(lr))}},
                               fetches, {tg_.train}, &out, TraceStep(step_ + 1));
    if (!ran.ok()) {
      WEFT_RETURN_IF_ERROR(recover(ran.WithContext(StrCat("training step ", step_ + 1))));
      continue;
    }
    ++step_;
    if (distributed()) RecordProgress(step_);
    train_seconds += Seconds(Clock::now() - t0);
    board_->StepDone(step_, Seconds(Clock::now() - t0) * 1000.0);
    const double loss = ScalarValue(out[0]);
    if (!std::isfinite(loss)) {
      return FailedPreconditionError("the loss became ", loss, " at step ", step_, " (learning rate ", lr,
                                     "); lower optimizer.learning_rate or set training.clip_global_norm");
    }
    interval_loss += loss;
    if (!accuracy_.empty()) interval_accuracy += ScalarValue(out[1]);
    ++interval_steps;
    if (step_ % config_.training.log_every == 0 || step_ == total_steps_) {
      const double seconds = Seconds(Clock::now() - interval_start);
      const double eps = seconds > 0 ? static_cast<double>(interval_steps * batch_size) / seconds : 0;
      const double mean_loss = interval_loss / static_cast<double>(interval_steps);
      const double mean_acc = accuracy_.empty() ? kNaN : interval_accuracy / static_cast<double>(interval_steps);
      const double per_step = seconds / static_cast<double>(interval_steps);
      reporter_.Progress(step_, total_steps_, mean_loss, mean_acc, lr, eps,
                         per_step * static_cast<double>(total_steps_ - step_));
      result.loss = mean_loss;
      interval_loss = interval_accuracy = 0;
      interval_steps = 0;
      interval_start = Clock::now();
    }
    if (config_.training.eval_every > 0 && step_ % config_.training.eval_every == 0 && step_ != total_steps_) {
      auto e = Evaluate();
      if (!e.ok()) {
        WEFT_RETURN_IF_ERROR(recover(e.status()));
        continue;
      }
      if (e->examples > 0) reporter_.Evaluation(step_, e->loss, e->accuracy, e->examples);
    }
    if (checkpoints_ != nullptr && step_ != total_steps_ && policy.Due(step_, Clock::now())) {
      auto saved = Save(step_);
      if (!saved.ok()) {
        WEFT_RETURN_IF_ERROR(recover(saved.status().WithContext(StrCat("saving at step ", step_))));
        continue;
      }
      result.checkpoint = *saved;
      policy.Saved(step_, Clock::now());
      saved_step = step_;
      WEFT_LOG(INFO) << "saved " << result.checkpoint;
    }
    if (step_ == total_steps_ && chief() && recovery_auto()) {
      // The end needs the ps tasks too: a fault there goes back to the
      // checkpoint like any other.
      Status ended = EndOfTraining(saved_step, &result);
      if (!ended.ok()) {
        WEFT_RETURN_IF_ERROR(recover(ended));
        continue;
      }
      ended_ = true;
    }
  }
  if (interval_steps > 0) result.loss = interval_loss / static_cast<double>(interval_steps);
  if (distributed() && step_ > first_step) {
    // What this worker moved per step: the parameters it read and the
    // gradients it sent, with the requests around them.
    const dist::WireCounters wire = dist::ReadWireCounters();
    const double steps = static_cast<double>(step_ - first_step);
    const double sent = static_cast<double>(wire.sent_bytes - wire_before.sent_bytes) / steps;
    const double received = static_cast<double>(wire.received_bytes - wire_before.received_bytes) / steps;
    const double messages = static_cast<double>(wire.sent_messages - wire_before.sent_messages +
                                                wire.received_messages - wire_before.received_messages) /
                            steps;
    result.wire_bytes_per_step = sent + received;
    reporter_.Note(StrCat("on the wire: ", HumanBytes(static_cast<uint64_t>(sent + received)), " per step (sent ",
                          HumanBytes(static_cast<uint64_t>(sent)), ", received ",
                          HumanBytes(static_cast<uint64_t>(received)), ", ", Fixed(messages, 1), " messages)"));
  }
  if (!ended_) WEFT_RETURN_IF_ERROR(EndOfTraining(saved_step, &result));
  const int64_t trained = step_ - first_step;
  result.examples_per_sec = train_seconds > 0 ? static_cast<double>(trained * batch_size) / train_seconds : 0;
  result.input_wait_fraction = train_seconds > 0 ? (pipeline_->wait_seconds() - wait_at_start) / train_seconds : 0;
  reporter_.Note(StrCat("trained ", trained, " steps in ", Fixed(train_seconds, 1), " s; waiting for input took ",
                        Fixed(100 * result.input_wait_fraction, 1), "% of it"));
  if (distributed()) WEFT_RETURN_IF_ERROR(FinishCluster());
  if (final_evaluation_.has_value()) {
    result.test_loss = final_evaluation_->loss;
    result.test_accuracy = final_evaluation_->accuracy;
  }
  if (allreduce()) {
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
  }
  reporter_.Final(result);
  return result;
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

bool Run::SyncRunEnded() {
  if (told_to_stop_->load()) return true;
  auto store = runner().service().KvStoreOf(dist::TaskPrefix("worker", 0));
  return store.ok() && (*store)->Get(kSyncEndedKey, 0).ok();
}

Expected<std::optional<int64_t>> Run::RejoinSync(const Status& why) {
  const SyncNodes& sn = *tg_.sync;
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = recovery_timeout_s();
  const bool first = why.ok();
  if (!first) {
    board_->SetState("waiting for the chief to release a step again");
    reporter_.Note(StrCat("recovery: ", why.message(), "; waiting for the chief to release a step again ",
                          "(recovery_timeout_s = ", timeout_s, ")"));
  }
  std::chrono::milliseconds pause(100);
  for (;;) {
    if (SyncRunEnded()) return std::optional<int64_t>();
    // Bounded, so that the end of the run is seen even when the queue
    // stays closed.
    runtime::RunOptions options;
    options.timeout_ms = 3000;
    std::vector<Tensor> out;
    Status s = session_->Run({{sn.local_step, Tensor::Scalar<int64_t>(-1)}}, {sn.first_token}, {}, &out, options);
    if (s.ok()) {
      const int64_t step = out[0].scalar<int64_t>();
      if (!first) {
        reporter_.Note(StrCat("recovery: the chief released step ", step, " after ",
                              Fixed(Seconds(Clock::now() - start), 1), " s; carrying on"));
        board_->SetState("training");
      }
      return std::optional<int64_t>(step);
    }
    if (s.code() == Code::kOutOfRange) return std::optional<int64_t>();
    if (!IsSyncRecoverable(s)) return s.WithContext("waiting for the chief to release a step");
    if (Clock::now() >= start + std::chrono::seconds(timeout_s)) {
      return Status(
          Code::kUnavailable,
          StrCat(first ? std::string("waiting for the chief to release the first step") : why.message(),
                 "; no step was released within ", timeout_s, " s (", s.message(), "); gave up (recovery_timeout_s)"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(1));
  }
}

Status Run::SyncWorkerLoop(SyncWorkerStats* stats, bool report) {
  const SyncNodes& sn = *tg_.sync;
  // recovery = "auto": a worker rides out what the chief recovers from
  // (the chief's own worker ends instead, and the chief starts it again).
  const bool rejoin = recovery_auto() && !chief();
  std::vector<Tensor> out;
  int64_t local = -1;
  // The first step the chief releases: after it initialised or restored
  // the variables and set the accumulators to that step.
  if (rejoin) {
    WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> first, RejoinSync(Status()));
    if (!first.has_value()) {
      reporter_.Note("the chief ended the run before this worker took a step");
      return Status();
    }
    local = *first;
    if (local > 0) reporter_.Note(StrCat("starting at step ", local + 1, ", the step the chief released"));
  } else {
    WEFT_RETURN_IF_ERROR(session_->Run({{sn.local_step, Tensor::Scalar<int64_t>(-1)}}, {sn.first_token}, {}, &out)
                             .WithContext("waiting for the chief to release the first step"));
    local = out[0].scalar<int64_t>();
  }
  std::vector<std::string> fetches = {tg_.loss, sn.token, sn.accepted};
  if (!accuracy_.empty()) fetches.push_back(accuracy_);
  const int64_t batch_size = config_.training.batch_size;
  double interval_loss = 0, interval_accuracy = 0;
  int64_t interval_steps = 0;
  Clock::time_point interval_start = Clock::now();
  Clock::time_point next_chief_check = Clock::now() + std::chrono::seconds(5);
  while (local < total_steps_) {
    if (report && StopRequested()) {
      step_ = local;
      return StopHere(-1);
    }
    if (!chief() && !recovery_auto() && Clock::now() >= next_chief_check) {
      Status alive = static_cast<ClusterRunner*>(session_.get())->Ping("/job:worker/task:0", 5000);
      if (!alive.ok()) return ChiefLost(local, alive);
      next_chief_check = Clock::now() + std::chrono::seconds(5);
    }
    const Clock::time_point t0 = Clock::now();
    // A worker whose gradients came too late skips to the step released
    // since, and to that step's slice of the data.
    const data::Position want = pipeline_->PositionOfStep(local);
    if (!(pipeline_->position() == want)) WEFT_RETURN_IF_ERROR(pipeline_->Seek(want));
    auto batch = pipeline_->Next();
    if (!batch.ok()) return batch.status().WithContext(StrCat("reading training batch ", local + 1));
    Status ran = session_->Run(
        {{images_, batch->features}, {labels_, batch->labels}, {sn.local_step, Tensor::Scalar<int64_t>(local)}},
        fetches, {}, &out, TraceStep(local + 1));
    if (!ran.ok() && rejoin && IsKeptAlready(ran)) {
      // Its gradients for this step were kept before it was restarted:
      // the next step.
      ran = session_->Run({{sn.local_step, Tensor::Scalar<int64_t>(local)}}, {sn.next_token}, {}, &out);
      if (ran.ok()) {
        reporter_.Note(StrCat("its gradients for step ", local + 1, " were kept before it was restarted; rejoined at ",
                              "step ", out[0].scalar<int64_t>() + 1));
        local = out[0].scalar<int64_t>();
        continue;
      }
    }
    if (!ran.ok()) {
      if (ran.code() == Code::kOutOfRange) {
        if (report) reporter_.Note(StrCat("the chief ended the run before step ", local + 1));
        break;
      }
      if (rejoin && IsSyncRecoverable(ran)) {
        WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> again,
                              RejoinSync(ran.WithContext(StrCat("training step ", local + 1))));
        if (!again.has_value()) break;
        local = *again;
        continue;
      }
      return ran.WithContext(StrCat("training step ", local + 1));
    }
    const double loss = ScalarValue(out[0]);
    if (!std::isfinite(loss)) {
      return FailedPreconditionError("the loss became ", loss, " at step ", local + 1,
                                     "; lower optimizer.learning_rate or set training.clip_global_norm");
    }
    const int64_t next = out[1].scalar<int64_t>();
    const bool accepted = out[2].scalar<bool>();
    const double accuracy = accuracy_.empty() ? kNaN : ScalarValue(out[3]);
    const double seconds = Seconds(Clock::now() - t0);
    if (!chief()) {
      board_->StepDone(next, seconds * 1000.0);
      board_->AddGradients(accepted ? 1 : 0, accepted ? 0 : 1);
    }
    {
      std::lock_guard<std::mutex> lock(stats->mutex);
      stats->loss_sum += loss;
      if (!accuracy_.empty()) stats->accuracy_sum += accuracy;
      ++stats->steps;
      ++stats->computed;
      (accepted ? stats->accepted : stats->late) += 1;
      stats->last_loss = loss;
      stats->seconds += seconds;
    }
    interval_loss += loss;
    interval_accuracy += accuracy_.empty() ? 0 : accuracy;
    ++interval_steps;
    // Progress at each multiple of log_every the released step passes.
    if (report && (next / config_.training.log_every > local / config_.training.log_every || next >= total_steps_)) {
      const double elapsed = Seconds(Clock::now() - interval_start);
      int64_t accepted_total, late_total;
      {
        std::lock_guard<std::mutex> lock(stats->mutex);
        accepted_total = stats->accepted;
        late_total = stats->late;
      }
      const double eps = elapsed > 0 ? static_cast<double>(interval_steps * batch_size) / elapsed : 0;
      const double per_step = elapsed / static_cast<double>(interval_steps);
      reporter_.Progress(std::min(next, total_steps_), total_steps_, interval_loss / interval_steps,
                         accuracy_.empty() ? kNaN : interval_accuracy / interval_steps,
                         LearningRateAt(config_.schedule, optimizer_choice_.learning_rate, local, total_steps_), eps,
                         per_step * static_cast<double>(std::max<int64_t>(0, total_steps_ - next)),
                         StrCat("own gradients: ", accepted_total, " kept, ", late_total, " dropped as stale"),
                         {{"own_accepted", accepted_total}, {"own_dropped", late_total}});
      interval_loss = interval_accuracy = 0;
      interval_steps = 0;
      interval_start = Clock::now();
    }
    local = next;
    // recovery = "auto" rejoins by the step queue, not by a recorded step.
    if (!recovery_auto()) RecordProgress(std::min(local, total_steps_));
    std::lock_guard<std::mutex> lock(stats->mutex);
    stats->reached = std::min(local, total_steps_);
  }
  return Status();
}

Expected<TrainResult> Run::GoSync(bool restored) {
  board_->SetState("training");
  board_->SetTotalSteps(total_steps_);
  const SyncNodes& sn = *tg_.sync;
  TrainResult result;
  SyncWorkerStats stats;
  const int64_t n = config_.training.replicas_to_aggregate > 0 ? config_.training.replicas_to_aggregate
                                                               : num_workers_ - config_.training.backup_workers;
  if (!chief()) {
    const Clock::time_point start = Clock::now();
    WEFT_RETURN_IF_ERROR(SyncWorkerLoop(&stats, /*report=*/true));
    const double seconds = Seconds(Clock::now() - start);
    result.step = stats.reached;
    result.loss = stats.last_loss;
    result.test_loss = result.test_accuracy = kNaN;
    result.examples_per_sec =
        seconds > 0 ? static_cast<double>(stats.computed * config_.training.batch_size) / seconds : 0;
    result.late_gradients = stats.late;
    reporter_.Note(StrCat("computed ", stats.computed, " steps; ", stats.accepted, " of this worker's gradients were ",
                          "averaged, ", stats.late, " dropped as stale"));
    WEFT_RETURN_IF_ERROR(FinishCluster());
    reporter_.Final(result);
    return result;
  }

  reporter_.Note(StrCat("synchronous: each step averages the first ", n, " of the ", num_workers_,
                        " workers' gradients (", num_workers_ - n, " backup worker", num_workers_ - n == 1 ? "" : "s",
                        "); a global batch is ", num_workers_, " x ", config_.training.batch_size, " examples"));
  // Accumulators and the first token at the current step (0, or the
  // restored one): the workers start there.
  WEFT_RETURN_IF_ERROR(session_->Run({{sn.reset_step, Tensor::Scalar<int64_t>(step_)}}, {}, {sn.reset}, nullptr)
                           .WithContext("setting the gradient accumulators to the first step"));
  // The chief's own worker thread: its status, set once when it ends
  // (read here only after worker_failed says so, or after the join).
  Status worker_status;
  std::atomic<bool> worker_failed{false};
  std::thread worker;
  auto start_worker = [&] {
    worker_status = Status();
    worker_failed.store(false);
    worker = std::thread([&] {
      Status s = SyncWorkerLoop(&stats, /*report=*/false);
      if (!s.ok()) {
        worker_status = std::move(s);
        worker_failed.store(true);
      }
    });
  };
  start_worker();
  // Ends the run for the workers and joins this process's worker thread:
  // at the end, those waiting for a step get OUT_OF_RANGE (a clean end);
  // after an error (|aborted|), ABORTED.
  bool closed = false;
  auto close = [&](bool aborted) -> Status {
    if (closed) return Status();
    closed = true;
    Status s = session_->Run({}, {}, {aborted ? sn.abort : sn.close}, nullptr);
    if (worker.joinable()) worker.join();
    return s;
  };
  // The first error wins: this thread's, or the chief's worker's when it
  // failed first (this thread then waited for its gradients in vain).
  auto fail = [&](Status s) -> Status {
    const bool worker_first = worker_failed.load();
    (void)close(/*aborted=*/true);
    if (worker_first) return worker_status.WithContext("the chief's own worker");
    return s;
  };

  checkpoint::SavePolicy policy(config_.checkpoint.every_steps, config_.checkpoint.every_seconds);
  policy.Saved(step_, Clock::now());
  const int64_t first_step = step_;
  int64_t saved_step = restored ? step_ : -1;
  int64_t aggregated_total = 0, dropped_total = 0, interval_aggregated = 0, interval_dropped = 0;
  int64_t last_aggregated = 0, last_dropped = 0;
  double train_seconds = 0;
  Clock::time_point interval_start = Clock::now();
  int64_t interval_steps = 0;
  const std::vector<std::string> counts = {sn.aggregated, sn.stale, sn.late};
  // recovery = "auto": an update, release, evaluation or save that failed
  // because a task was lost, or the chief's own worker's step, goes back
  // to the newest checkpoint, whether or not a ps task was restarted:
  // nothing else tells which part of a synchronous update reached the ps
  // tasks. The queue is closed with an error first (waiting workers take
  // their first step again), and opened at the restored step.
  std::optional<Clock::time_point> failing_since;
  auto recover = [&](Status why) -> Status {
    if (!recovery_auto() || !IsSyncRecoverable(why)) return fail(std::move(why));
    (void)session_->Run({}, {}, {sn.abort}, nullptr);
    if (worker.joinable()) worker.join();
    if (worker_failed.load() && !IsSyncRecoverable(worker_status)) {
      return fail(worker_status.WithContext("the chief's own worker"));
    }
    // Its error is this one's (a lost task); what the recovery says wins.
    worker_failed.store(false);
    if (!failing_since.has_value()) failing_since = Clock::now();
    for (;;) {
      if (Clock::now() - *failing_since > std::chrono::seconds(recovery_timeout_s())) {
        return fail(Status(Code::kUnavailable, StrCat(why.message(), "; no update succeeded for ", recovery_timeout_s(),
                                                      " s; gave up (recovery_timeout_s)")));
      }
      Status recovered = Recover(why, /*always=*/true);
      if (!recovered.ok()) return fail(std::move(recovered));
      // Again: a restarted ps task's new queue, or one not reached before.
      (void)session_->Run({}, {}, {sn.abort}, nullptr);
      Status reset = session_->Run({{sn.reset_step, Tensor::Scalar<int64_t>(step_)}}, {}, {sn.reset}, nullptr);
      if (reset.ok()) break;
      if (!IsSyncRecoverable(reset)) return fail(reset.WithContext("setting the gradient accumulators again"));
      why = reset.WithContext("setting the gradient accumulators again");
    }
    start_worker();
    policy.Saved(step_, Clock::now());
    saved_step = step_;
    ended_ = false;
    interval_aggregated = interval_dropped = 0;
    interval_steps = 0;
    interval_start = Clock::now();
    return Status();
  };
  while (step_ < total_steps_) {
    if (StopRequested()) return fail(StopHere(saved_step));
    const Clock::time_point t0 = Clock::now();
    const int64_t next = step_ + 1;
    const bool eval_due =
        config_.training.eval_every > 0 && next % config_.training.eval_every == 0 && next != total_steps_;
    const bool save_due = checkpoints_ != nullptr && next != total_steps_ && policy.Due(next, Clock::now());
    // recovery = "auto": the end (last checkpoint, evaluation) before the
    // last release, so that a fault there goes back like any other.
    const bool end_due = recovery_auto() && next == total_steps_;
    const bool pause = eval_due || save_due || end_due;
    const double lr = LearningRateAt(config_.schedule, optimizer_choice_.learning_rate, step_, total_steps_);
    std::vector<Tensor> out;
    Status applied = session_->Run({{tg_.learning_rate, Tensor::Scalar<float>(static_cast<float>(lr))}}, counts,
                                   {pause ? sn.apply : sn.apply_and_release}, &out, TraceStep(step_ + 1));
    if (!applied.ok()) {
      WEFT_RETURN_IF_ERROR(recover(applied.WithContext(
          StrCat("update ", next, " (the averaged gradients of the workers' step at global step ", step_, ")"))));
      continue;
    }
    failing_since.reset();
    step_ = next;
    train_seconds += Seconds(Clock::now() - t0);
    const int64_t aggregated = out[0].scalar<int64_t>();
    const int64_t stale = out[1].scalar<int64_t>();
    const int64_t late = out[2].scalar<int64_t>();
    board_->StepDone(step_, Seconds(Clock::now() - t0) * 1000.0);
    board_->SetGlobalStep(step_);
    board_->AddGradients(aggregated, stale + late);
    reporter_.SyncStep(step_, aggregated, stale, late);
    aggregated_total += aggregated;
    dropped_total += stale + late;
    interval_aggregated += aggregated;
    interval_dropped += stale + late;
    last_aggregated = aggregated;
    last_dropped = stale + late;
    ++interval_steps;
    if (step_ % config_.training.log_every == 0 || step_ == total_steps_) {
      double loss_sum, accuracy_sum;
      int64_t steps;
      {
        std::lock_guard<std::mutex> lock(stats.mutex);
        loss_sum = stats.loss_sum;
        accuracy_sum = stats.accuracy_sum;
        steps = stats.steps;
        stats.loss_sum = stats.accuracy_sum = 0;
        stats.steps = 0;
      }
      const double seconds = Seconds(Clock::now() - interval_start);
      const double eps =
          seconds > 0 ? static_cast<double>(interval_steps * n * config_.training.batch_size) / seconds : 0;
      // The chief's own worker finishes step k after its release, so the
      // losses lag a step; before the first, say so with NaN.
      double last_loss;
      {
        std::lock_guard<std::mutex> lock(stats.mutex);
        last_loss = stats.last_loss;
      }
      const double mean_loss = steps > 0 ? loss_sum / static_cast<double>(steps) : last_loss;
      const double mean_acc = accuracy_.empty() || steps == 0 ? kNaN : accuracy_sum / static_cast<double>(steps);
      reporter_.Progress(
          step_, total_steps_, mean_loss, mean_acc, lr, eps,
          seconds / static_cast<double>(interval_steps) * static_cast<double>(total_steps_ - step_),
          StrCat("gradients ", last_aggregated, " aggregated, ", last_dropped, " dropped as stale (last step); ",
                 interval_steps, " steps: ", interval_aggregated, " aggregated, ", interval_dropped, " dropped"),
          {{"aggregated", interval_aggregated}, {"stale_dropped", interval_dropped}});
      if (steps > 0) result.loss = mean_loss;
      interval_aggregated = interval_dropped = 0;
      interval_steps = 0;
      interval_start = Clock::now();
    }
    // Between this update and the release of the next step every worker
    // waits, so an evaluation or a checkpoint sees exactly |step_| updates.
    if (eval_due) {
      auto e = Evaluate();
      if (!e.ok()) {
        WEFT_RETURN_IF_ERROR(recover(e.status()));
        continue;
      }
      if (e->examples > 0) reporter_.Evaluation(step_, e->loss, e->accuracy, e->examples);
    }
    if (save_due) {
      auto saved = Save(step_);
      if (!saved.ok()) {
        WEFT_RETURN_IF_ERROR(recover(saved.status().WithContext(StrCat("saving at step ", step_))));
        continue;
      }
      result.checkpoint = *saved;
      policy.Saved(step_, Clock::now());
      saved_step = step_;
      WEFT_LOG(INFO) << "saved " << result.checkpoint;
    }
    if (end_due) {
      if (saved_step != step_) {
        // The end always has a checkpoint to go back to.
        auto saved = Save(step_);
        if (!saved.ok()) {
          WEFT_RETURN_IF_ERROR(recover(saved.status().WithContext(StrCat("saving at step ", step_))));
          continue;
        }
        result.checkpoint = *saved;
        saved_step = step_;
        reporter_.Note(StrCat("saved ", result.checkpoint));
      }
      Status ended = EndOfTraining(saved_step, &result);
      if (!ended.ok()) {
        WEFT_RETURN_IF_ERROR(recover(ended));
        continue;
      }
      ended_ = true;
      saved_step = step_;
    }
    if (pause) {
      Status released = session_->Run({}, {}, {sn.release}, nullptr);
      if (!released.ok()) {
        WEFT_RETURN_IF_ERROR(recover(released.WithContext(StrCat("releasing step ", step_))));
        continue;
      }
    }
    if (worker_failed.load()) {
      if (!recovery_auto()) return fail(Status());
      WEFT_RETURN_IF_ERROR(recover(worker_status.WithContext("the chief's own worker")));
    }
  }
  // A worker started again from now on finishes at once.
  if (recovery_auto()) runner().service().NotifyKvSet(dist::TaskPrefix("worker", 0), kSyncEndedKey, "1");
  Status closed_ok = close(/*aborted=*/false);
  if (worker_failed.load()) {
    // recovery = "auto": the run is over; a lost task no longer matters.
    if (!(recovery_auto() && ended_ && IsSyncRecoverable(worker_status))) {
      return worker_status.WithContext("the chief's own worker");
    }
  }
  if (recovery_auto() && ended_ && !closed_ok.ok()) {
    // The workers learn the end from this task's store.
    reporter_.Note(StrCat("note: closing the step queue: ", closed_ok.message()));
    closed_ok = Status();
  }
  WEFT_RETURN_IF_ERROR(closed_ok.WithContext("ending the run for the workers"));
  if (!ended_) WEFT_RETURN_IF_ERROR(EndOfTraining(saved_step, &result));
  const int64_t trained = step_ - first_step;
  result.examples_per_sec =
      train_seconds > 0 ? static_cast<double>(trained * n * config_.training.batch_size) / train_seconds : 0;
  result.aggregated = aggregated_total;
  result.stale_dropped = dropped_total;
  {
    std::lock_guard<std::mutex> lock(stats.mutex);
    result.late_gradients = stats.late;
  }
  reporter_.Note(StrCat("trained ", trained, " synchronous steps in ", Fixed(train_seconds, 1),
                        " s: ", aggregated_total, " gradients averaged, ", dropped_total, " dropped as stale"));
  WEFT_RETURN_IF_ERROR(FinishCluster());
  reporter_.Final(result);
  return result;
}

}  // namespace

Status CheckOptimizerSection(const config::Config& config, const plugin::PluginHost& host) {
  if (!config.optimizer.has_value()) return Status();
  return ChooseOptimizer(config, host).status();
}

Expected<TrainResult> Train(const config::Config& config, const plugin::PluginHost& host,
                            const TrainerOptions& options) {
  Run run(config, host, options);
  return run.Go();
}

Expected<TrainingPlacementPlan> PlanTrainingPlacement(const config::Config& config, const plugin::PluginHost& host,
                                                      const TrainerOptions& options) {
  Run run(config, host, options);
  return run.Plan();
}

}  // namespace weft::train
