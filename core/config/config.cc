#include "core/config/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config/internal/cluster_parse.h"
#include "core/config/internal/specs.h"
#include "core/config/internal/toml_convert.h"

namespace weft::config {
namespace {

using internal::Bool;
using internal::Default;
using internal::Float;
using internal::Int;
using internal::Spec;
using internal::Str;

constexpr const char* kEmbeddedSource = "<embedded configs/local.toml>";

// The kinds of plugin section, in the order the docs list them.
constexpr std::string_view kPluginKinds[] = {"devices", "transports", "optimizers", "collectives"};

std::vector<OptionSpec> RuntimeSpecs() {
  OptionSpec inter = Spec("inter_op_threads", OptionType::kInt,
                          "Threads that run independent graph nodes concurrently. "
                          "Unset: derived from the number of cores.");
  inter.min = 1;
  OptionSpec intra = Spec("intra_op_threads", OptionType::kInt,
                          "Threads one kernel may use (oneDNN, parallel loops). "
                          "Unset: derived from the number of cores.");
  intra.min = 1;
  OptionSpec max_tensor = Spec("max_tensor_mb", OptionType::kInt,
                               "The largest tensor this process allocates, in MiB; a bigger one is refused "
                               "(RESOURCE_EXHAUSTED, naming the node and shape) before any memory is taken. "
                               "Unset: this machine's physical memory.");
  max_tensor.min = 1;
  return {inter, intra, max_tensor};
}

std::vector<OptionSpec> PluginsSpecs() {
  OptionSpec paths = Spec("paths", OptionType::kStringList,
                          "Plugin directories or files, searched before WEFT_PLUGIN_PATH and "
                          "the built-in folder. Relative to this file's directory.");
  paths.default_value = Default("[]");
  OptionSpec disable = Spec("disable", OptionType::kStringList, "Names of plugins not to load.");
  disable.default_value = Default("[]");
  OptionSpec strict =
      Spec("strict", OptionType::kBool, "Stop when a plugin is refused, instead of logging it and going on.");
  strict.default_value = Default("false");
  return {paths, disable, strict};
}

std::vector<OptionSpec> LoggingSpecs() {
  OptionSpec level = Spec("level", OptionType::kString, "The least severe level written.");
  level.choices = {"trace", "debug", "info", "warning", "error", "off"};
  level.default_value = Default("\"info\"");
  OptionSpec format =
      Spec("format", OptionType::kString, "\"text\" for people, \"json\" for one JSON object per line.");
  format.choices = {"text", "json"};
  format.default_value = Default("\"text\"");
  OptionSpec file =
      Spec("file", OptionType::kString, "Append to this file instead of writing to stderr. Empty: stderr.");
  file.default_value = Default("\"\"");
  return {level, format, file};
}

std::vector<OptionSpec> ModelSpecs() {
  return {Str("loss", "loss",
              "The scalar tensor training minimises; with [model] output set, the built-in loss to build over the "
              "output instead: \"softmax_cross_entropy\" or \"mse\"."),
          Str("output", "",
              "The model's output tensor (logits, for softmax_cross_entropy), for a model without its own loss, such "
              "as an imported ONNX model: training then builds [model] loss over it, and the labels Placeholder and "
              "the accuracy when the model has none. Empty: the model has its loss."),
          Str("images", "images", "The Placeholder fed with a batch of examples."),
          Str("labels", "labels", "The Placeholder fed with their labels."),
          Str("accuracy", "accuracy", "A scalar metric reported with the loss; empty for none."),
          Str("init", "init", "The node that initialises the model's variables; empty if it has none.")};
}

std::vector<OptionSpec> DataSpecs() {
  OptionSpec format = Str("format", "idx",
                          "\"idx\" (IDX files, optionally gzip-compressed), \"npy\", \"csv\" or \"text\" (a "
                          "plain-text file for a character model: each line, cut to the model's example length, is "
                          "an example of byte values and its length the label).");
  format.choices = {"idx", "npy", "csv", "text"};
  OptionSpec label_column =
      Spec("csv_label_column", OptionType::kInt, "For CSV: the column holding the label; -1 is the last.");
  label_column.default_value = Default("-1");
  label_column.min = -1;
  return {format,
          Str("train_images", "", "Training examples. Relative to this file's directory."),
          Str("train_labels", "", "Their labels (unused for CSV and text, whose files hold both)."),
          Str("test_images", "", "Examples for evaluation; empty: no evaluation."),
          Str("test_labels", "", "Their labels."),
          label_column,
          Float("scale", "1.0", std::nullopt, "Each feature becomes x * scale + shift."),
          Float("shift", "0.0", std::nullopt, "See scale."),
          Bool("shuffle", true, "Visit the training examples in a new seeded order each epoch."),
          Int("prefetch", 4, 1, "Batches prepared ahead of the training step, on a background thread."),
          Int("test_batch_size", 1000, 1, "Examples per evaluation step.")};
}

std::vector<OptionSpec> TrainingSpecs() {
  OptionSpec mode = Str("mode", "async",
                        "How the workers of a cluster combine their gradients: async (each applies its own to the "
                        "parameter servers), sync (the first replicas_to_aggregate of each step, averaged), "
                        "allreduce (every worker's, averaged by a collective). One process trains the same in "
                        "every mode.");
  mode.choices = {"async", "sync", "allreduce"};
  return {Int("batch_size", 64, 1, "Examples per step."),
          Int("epochs", 1, 0, "Passes over the training data (a last partial batch is dropped)."),
          Int("steps", 0, 0, "Steps to train; when > 0 it overrides epochs."),
          Int("seed", 0, 0, "Seeds the data order and every random op of the model."),
          Int("log_every", 100, 1, "Steps between progress reports."),
          Int("eval_every", 0, 0, "Steps between evaluations on the test data; 0: at the end only."),
          Float("clip_global_norm", "0.0", 0,
                "Scale the gradients down to this global L2 norm when they exceed it; 0: no clipping."),
          Bool("sparse_updates", true,
               "Update a variable read only through gathers (an embedding) from the rows read, with the "
               "optimizer's sparse rule; false: a dense gradient of the whole variable."),
          Str("metrics", "", "Append one JSON object per report to this file; empty: none."),
          mode,
          Int("replicas_to_aggregate", 0, 0,
              "mode = sync: the gradients averaged into each step's update (N); 0: the workers less "
              "backup_workers."),
          Int("backup_workers", 0, 0,
              "mode = sync: workers beyond N whose gradients, arriving after the first N of a step, are dropped "
              "(b); stragglers then cost no time."),
          Float("bucket_mb", "25.0", 0.001,
                "mode = allreduce: gradients are reduced in buckets of about this many MiB while the backward "
                "pass still runs.")};
}

std::vector<OptionSpec> ScheduleSpecs() {
  OptionSpec kind = Str("kind", "constant",
                        "constant; step (times gamma every step_size steps); exponential (times "
                        "decay_rate per decay_steps); cosine (down to min_learning_rate over total_steps).");
  kind.choices = {"constant", "step", "exponential", "cosine"};
  return {kind,
          Int("warmup_steps", 0, 0,
              "Scale the rate by min(1, (step + 1) / warmup_steps), step counting completed updates; 0: none."),
          Int("step_size", 1000, 1, "For step: steps between decays."),
          Float("gamma", "0.1", 0, "For step: the factor of each decay."),
          Int("decay_steps", 1000, 1, "For exponential: steps per factor of decay_rate."),
          Float("decay_rate", "0.96", 0, "For exponential: the factor per decay_steps."),
          Bool("staircase", false, "For exponential: decay in whole steps of decay_steps."),
          Float("min_learning_rate", "0.0", 0, "For cosine: the final rate."),
          Int("total_steps", 0, 0, "For cosine: steps from the full rate to the final one; 0: the run's steps.")};
}

std::vector<OptionSpec> CheckpointSpecs() {
  return {Str("dir", "", "Where checkpoints go (relative to this file's directory); empty: none."),
          Int("every_steps", 0, 0, "Save every this many steps; 0: not by steps."),
          Float("every_seconds", "0.0", 0, "Save when this many seconds passed since the last save; 0: not by time."),
          Int("keep", 3, 1, "How many of the newest checkpoints to keep."),
          Bool("at_end", true, "Save when training ends.")};
}

std::vector<OptionSpec> PlacementSpecs() {
  OptionSpec priority = Spec("priority", OptionType::kStringList,
                             "Device types, most preferred first, for nodes nothing pins; types not listed come "
                             "after. Empty: CUDA, HIP, CPU, OPENCL (an OpenCL device is often the CPU itself, "
                             "through PoCL, and slower than the CPU plugin).");
  priority.default_value = Default("[]");
  return {Bool("soft", true,
               "When a node's requested device (in the graph or in [placement.pins]) cannot run it, place it "
               "elsewhere and log why, instead of failing."),
          priority};
}

std::vector<OptionSpec> GraphOptimizerSpecs() {
  OptionSpec level = Spec("level", OptionType::kInt,
                          "How much the graph optimizer rewrites a graph before it runs (docs/optimizer.md): 0 "
                          "nothing; 1 constant folding, common subexpressions, Identity and no-op removal, "
                          "arithmetic simplification; 2 adds fusions; 3 adds layout. Unset: the default of this "
                          "build (`weft optimize --explain` shows it). `--optimize LEVEL` overrides it.");
  level.min = 0;
  level.max = 3;
  OptionSpec disable =
      Spec("disable", OptionType::kStringList, "Names of passes not to run (`weft optimize --explain` lists them).");
  disable.default_value = Default("[]");
  return {level, disable};
}

struct CoreSection {
  std::string_view name;
  std::vector<OptionSpec> (*specs)();
};

constexpr CoreSection kCoreSections[] = {
    {"runtime", RuntimeSpecs},     {"plugins", PluginsSpecs},
    {"logging", LoggingSpecs},     {"model", ModelSpecs},
    {"data", DataSpecs},           {"training", TrainingSpecs},
    {"schedule", ScheduleSpecs},   {"checkpoint", CheckpointSpecs},
    {"placement", PlacementSpecs}, {"graph_optimizer", GraphOptimizerSpecs},
    {"serving", ServingSpecs},
};

// Reads the scalar keys of |table| into a Section.
Section ToSection(const toml::table& table, std::string path, const SourcePos& pos, std::string_view file) {
  Section section;
  section.path = std::move(path);
  section.pos = pos;
  for (const auto& [key, node] : table) {
    const SourcePos key_pos = internal::PosOf(key.source(), file);
    section.values[std::string(key.str())] = internal::ConvertNode(node, file, key_pos);
  }
  return section;
}

using internal::ResolvePath;

// Fills the typed sections from validated values. Only called once
// validation passed, so the getters cannot fail.
void ApplyRuntime(const OptionValues& values, RuntimeConfig& out) {
  if (auto v = values.GetInt("inter_op_threads"); v.ok()) out.inter_op_threads = *v;
  if (auto v = values.GetInt("intra_op_threads"); v.ok()) out.intra_op_threads = *v;
  if (auto v = values.GetInt("max_tensor_mb"); v.ok()) out.max_tensor_mb = *v;
}

void ApplyGraphOptimizer(const OptionValues& values, GraphOptimizerConfig& out) {
  if (auto v = values.GetInt("level"); v.ok()) out.level = *v;
  if (auto v = values.GetStringList("disable"); v.ok()) out.disable = *v;
}

void ApplyPlugins(const OptionValues& values, std::string_view base_dir, PluginsConfig& out) {
  out.paths.clear();
  if (auto v = values.GetStringList("paths"); v.ok()) {
    for (const std::string& path : *v) out.paths.push_back(ResolvePath(path, base_dir));
  }
  if (auto v = values.GetStringList("disable"); v.ok()) out.disable = *v;
  if (auto v = values.GetBool("strict"); v.ok()) out.strict = *v;
}

void ApplyLogging(const OptionValues& values, LoggingConfig& out) {
  if (auto v = values.GetString("level"); v.ok()) {
    out.level = ParseLogLevel(**v).value_or(LogLevel::kInfo);
  }
  if (auto v = values.GetString("format"); v.ok()) {
    out.format = **v == "json" ? LogFormat::kJson : LogFormat::kText;
  }
  if (auto v = values.GetString("file"); v.ok()) out.file = **v;
}

std::string GetStr(const OptionValues& v, std::string_view key) {
  auto s = v.GetString(key);
  return s.ok() ? **s : std::string();
}
int64_t GetI(const OptionValues& v, std::string_view key) { return v.GetInt(key).value_or(0); }
double GetF(const OptionValues& v, std::string_view key) { return v.GetFloat(key).value_or(0); }
bool GetB(const OptionValues& v, std::string_view key) { return v.GetBool(key).value_or(false); }

void ApplyModel(const OptionValues& v, ModelConfig& out) {
  out.loss = GetStr(v, "loss");
  out.images = GetStr(v, "images");
  out.labels = GetStr(v, "labels");
  out.accuracy = GetStr(v, "accuracy");
  out.init = GetStr(v, "init");
  out.output = GetStr(v, "output");
}

void ApplyData(const OptionValues& v, std::string_view base_dir, DataConfig& out) {
  out.format = GetStr(v, "format");
  out.train_images = ResolvePath(GetStr(v, "train_images"), base_dir);
  out.train_labels = ResolvePath(GetStr(v, "train_labels"), base_dir);
  out.test_images = ResolvePath(GetStr(v, "test_images"), base_dir);
  out.test_labels = ResolvePath(GetStr(v, "test_labels"), base_dir);
  out.csv_label_column = GetI(v, "csv_label_column");
  out.scale = GetF(v, "scale");
  out.shift = GetF(v, "shift");
  out.shuffle = GetB(v, "shuffle");
  out.prefetch = GetI(v, "prefetch");
  out.test_batch_size = GetI(v, "test_batch_size");
}

void ApplyTraining(const OptionValues& v, std::string_view base_dir, TrainingConfig& out) {
  out.batch_size = GetI(v, "batch_size");
  out.epochs = GetI(v, "epochs");
  out.steps = GetI(v, "steps");
  out.seed = GetI(v, "seed");
  out.log_every = GetI(v, "log_every");
  out.eval_every = GetI(v, "eval_every");
  out.clip_global_norm = GetF(v, "clip_global_norm");
  out.sparse_updates = GetB(v, "sparse_updates");
  out.metrics = ResolvePath(GetStr(v, "metrics"), base_dir);
  out.mode = GetStr(v, "mode");
  out.replicas_to_aggregate = GetI(v, "replicas_to_aggregate");
  out.backup_workers = GetI(v, "backup_workers");
  out.bucket_mb = GetF(v, "bucket_mb");
}

void ApplySchedule(const OptionValues& v, ScheduleConfig& out) {
  out.kind = GetStr(v, "kind");
  out.warmup_steps = GetI(v, "warmup_steps");
  out.step_size = GetI(v, "step_size");
  out.gamma = GetF(v, "gamma");
  out.decay_steps = GetI(v, "decay_steps");
  out.decay_rate = GetF(v, "decay_rate");
  out.staircase = GetB(v, "staircase");
  out.min_learning_rate = GetF(v, "min_learning_rate");
  out.total_steps = GetI(v, "total_steps");
}

void ApplyCheckpoint(const OptionValues& v, std::string_view base_dir, CheckpointConfig& out) {
  out.dir = ResolvePath(GetStr(v, "dir"), base_dir);
  out.every_steps = GetI(v, "every_steps");
  out.every_seconds = GetF(v, "every_seconds");
  out.keep = GetI(v, "keep");
  out.at_end = GetB(v, "at_end");
}

bool IsPluginName(std::string_view name) {
  if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// Keys that apply to one value of a selector key only (schedule.kind,
// training.mode): written under another value they would be ignored, so
// each is an error naming the key and the selector's value.
void CheckKeysOfKind(const Section& section, std::string_view selector, std::string_view default_value,
                     std::initializer_list<std::pair<std::string_view, std::string_view>> owners,
                     std::vector<ConfigError>& errors) {
  auto it = section.values.find(std::string(selector));
  const std::string value = it != section.values.end() ? it->second.s : std::string(default_value);
  const std::string value_text = it != section.values.end()
                                     ? StrCat(selector, " is \"", value, "\"")
                                     : StrCat(selector, " is \"", default_value, "\" (the default)");
  for (const auto& [key, written] : section.values) {
    for (const auto& [known, owner] : owners) {
      if (key == known && value != owner) {
        errors.push_back({written.key_pos, StrCat(section.path, ".", key),
                          StrCat("applies to ", selector, " = \"", owner, "\" only, but ", value_text)});
      }
    }
  }
}

// What the bounds of ScheduleSpecs cannot say: a key of another kind's
// schedule is a mistake (it would be ignored), and a decay factor of 0
// stops training at the first decay.
void CheckTraining(const Section& section, std::vector<ConfigError>& errors) {
  CheckKeysOfKind(section, "mode", "async",
                  {{"replicas_to_aggregate", "sync"}, {"backup_workers", "sync"}, {"bucket_mb", "allreduce"}}, errors);
}

void CheckSchedule(const Section& section, std::vector<ConfigError>& errors) {
  CheckKeysOfKind(section, "kind", "constant",
                  {{"step_size", "step"},
                   {"gamma", "step"},
                   {"decay_steps", "exponential"},
                   {"decay_rate", "exponential"},
                   {"staircase", "exponential"},
                   {"min_learning_rate", "cosine"},
                   {"total_steps", "cosine"}},
                  errors);
  for (const auto& [key, value] : section.values) {
    if ((key == "gamma" || key == "decay_rate") && value.f == 0 && value.i == 0) {
      errors.push_back({value.pos, StrCat(section.path, ".", key),
                        StrCat("expected a number > 0, got ", value.text, " (the rate would drop to 0)")});
    }
  }
}

// [placement.pins]: a table of node-name pattern = device. Takes "pins"
// out of |section| (it is not a scalar option) and checks its entries.
void CheckPins(const toml::table& placement, std::string_view file, Section& section,
               std::vector<ConfigError>& errors) {
  section.values.erase("pins");
  const toml::node* pins = placement.get("pins");
  if (pins == nullptr) return;
  if (!pins->is_table()) {
    errors.push_back({internal::PosOf(pins->source(), file), "placement.pins",
                      "expected a table of \"node name pattern\" = \"device\", e.g. "
                      "[placement.pins] \"dense1/*\" = \"/device:OPENCL:0\""});
    return;
  }
  for (const auto& [key, value] : *pins->as_table()) {
    if (!value.is_string()) {
      errors.push_back({internal::PosOf(value.source(), file), StrCat("placement.pins.", key.str()),
                        "expected a device name such as \"/device:CPU:1\""});
    } else if (value.as_string()->get().empty()) {
      errors.push_back(
          {internal::PosOf(value.source(), file), StrCat("placement.pins.", key.str()), "the device is empty"});
    }
    if (key.str().empty()) {
      errors.push_back({internal::PosOf(key.source(), file), "placement.pins", "a pin's node name pattern is empty"});
    }
  }
}

void ApplyPlacement(const OptionValues& v, const toml::table* table, std::string_view file, PlacementConfig& out) {
  out.soft = GetB(v, "soft");
  if (auto list = v.GetStringList("priority"); list.ok()) out.priority = *list;
  if (table == nullptr) return;
  if (const toml::table* pins = table->get_as<toml::table>("pins")) {
    // toml++ keeps keys sorted; the first pin that matches a node wins, so
    // restore the order of the file.
    std::vector<std::pair<std::pair<int, int>, PinConfig>> ordered;
    for (const auto& [key, value] : *pins) {
      const SourcePos pos = internal::PosOf(key.source(), file);
      ordered.push_back(
          {{pos.line, pos.column}, {std::string(key.str()), value.value_or(std::string()), pos.ToString()}});
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [pos, pin] : ordered) out.pins.push_back(std::move(pin));
  }
}

// Collects the errors of one core section, appending them to |errors|.
void CheckCoreSection(const CoreSection& core, const toml::node& node, std::string_view file, const SourcePos& key_pos,
                      std::vector<ConfigError>& errors) {
  if (!node.is_table()) {
    errors.push_back(
        {internal::PosOf(node.source(), file), std::string(core.name),
         StrCat("expected a table [", core.name, "], got ", internal::ConvertNode(node, file, key_pos).text)});
    return;
  }
  Section section = ToSection(*node.as_table(), std::string(core.name), internal::PosOf(node.source(), file), file);
  if (core.name == "placement") CheckPins(*node.as_table(), file, section, errors);
  std::vector<ConfigError> found = CheckOptions(&section, core.name, core.specs(), nullptr);
  // Cross-key checks only once every value is of its type and range.
  if (found.empty() && core.name == "schedule") CheckSchedule(section, found);
  if (found.empty() && core.name == "training") CheckTraining(section, found);
  for (ConfigError& error : found) errors.push_back(std::move(error));
}

void CheckPluginKind(std::string_view kind, const toml::node& node, std::string_view file, const SourcePos& key_pos,
                     Config& config, std::vector<ConfigError>& errors) {
  if (!node.is_table()) {
    errors.push_back(
        {internal::PosOf(node.source(), file), std::string(kind),
         StrCat("expected tables [", kind, ".<plugin name>], got ", internal::ConvertNode(node, file, key_pos).text)});
    return;
  }
  for (const auto& [name, child] : *node.as_table()) {
    const std::string path = StrCat(kind, ".", name.str());
    const SourcePos name_pos = internal::PosOf(name.source(), file);
    if (!IsPluginName(name.str())) {
      errors.push_back({name_pos, path,
                        "plugin names are lower_snake_case (letters, digits and '_', "
                        "starting with a letter)"});
      continue;
    }
    if (!child.is_table()) {
      errors.push_back(
          {internal::PosOf(child.source(), file), path,
           StrCat("expected a table [", path, "], got ", internal::ConvertNode(child, file, name_pos).text)});
      continue;
    }
    config.plugin_sections[path] = ToSection(*child.as_table(), path, internal::PosOf(child.source(), file), file);
  }
}

}  // namespace

const Section* Config::PluginSection(std::string_view kind, std::string_view name) const {
  auto it = plugin_sections.find(StrCat(kind, ".", name));
  return it == plugin_sections.end() ? nullptr : &it->second;
}

Expected<Config> ParseConfig(std::string_view text, std::string_view source_name, std::string_view base_dir) {
  WEFT_ASSIGN_OR_RETURN(toml::table document, internal::ParseDocument(text, source_name));

  Config config;
  config.source = std::string(source_name);
  std::vector<ConfigError> errors;

  std::vector<std::string> known;
  for (const CoreSection& core : kCoreSections) known.emplace_back(core.name);
  known.emplace_back("cluster");
  for (std::string_view kind : kPluginKinds) known.emplace_back(kind);
  known.emplace_back("optimizer");

  for (const auto& [key, node] : document) {
    const SourcePos key_pos = internal::PosOf(key.source(), source_name);
    const std::string_view name = key.str();
    bool handled = false;
    for (const CoreSection& core : kCoreSections) {
      if (core.name == name) {
        CheckCoreSection(core, node, source_name, key_pos, errors);
        config.written_sections.emplace_back(name);
        handled = true;
      }
    }
    if (name == "cluster") {
      handled = true;
      config.written_sections.emplace_back(name);
      OptionValues values;
      const size_t errors_before = errors.size();
      ClusterConfig cluster = internal::ParseClusterSection(node, source_name, key_pos, &values, errors);
      if (errors.size() == errors_before) {
        cluster.secret_file = ResolvePath(cluster.secret_file, base_dir);
        config.cluster = std::move(cluster);
        config.values.emplace("cluster", std::move(values));
      }
    }
    if (name == "optimizer") {
      handled = true;
      if (!node.is_table()) {
        errors.push_back(
            {internal::PosOf(node.source(), source_name), "optimizer",
             StrCat("expected a table [optimizer], got ", internal::ConvertNode(node, source_name, key_pos).text)});
      } else {
        config.optimizer =
            ToSection(*node.as_table(), "optimizer", internal::PosOf(node.source(), source_name), source_name);
      }
    }
    for (std::string_view kind : kPluginKinds) {
      if (kind == name) {
        CheckPluginKind(kind, node, source_name, key_pos, config, errors);
        handled = true;
      }
    }
    if (!handled) {
      std::string message = "unknown section";
      const std::string hint = ClosestMatch(name, known);
      message +=
          hint.empty() ? StrCat("; known sections: ", StrJoin(known, ", ")) : StrCat("; did you mean '", hint, "'?");
      errors.push_back({key_pos, std::string(name), message});
    }
  }
  WEFT_RETURN_IF_ERROR(ErrorsToStatus(errors));

  // Validation passed: fill the typed model, defaults included.
  for (const CoreSection& core : kCoreSections) {
    std::optional<Section> section;
    if (const toml::table* table = document[core.name].as_table()) {
      section = ToSection(*table, std::string(core.name), internal::PosOf(table->source(), source_name), source_name);
      section->values.erase("pins");
    }
    WEFT_ASSIGN_OR_RETURN(OptionValues values, ValidateOptions(section ? &*section : nullptr, core.name, core.specs()));
    if (core.name == "runtime") ApplyRuntime(values, config.runtime);
    if (core.name == "plugins") ApplyPlugins(values, base_dir, config.plugins);
    if (core.name == "logging") ApplyLogging(values, config.logging);
    if (core.name == "model") ApplyModel(values, config.model);
    if (core.name == "data") ApplyData(values, base_dir, config.data);
    if (core.name == "training") ApplyTraining(values, base_dir, config.training);
    if (core.name == "schedule") ApplySchedule(values, config.schedule);
    if (core.name == "checkpoint") ApplyCheckpoint(values, base_dir, config.checkpoint);
    if (core.name == "graph_optimizer") ApplyGraphOptimizer(values, config.graph_optimizer);
    if (core.name == "serving") ApplyServing(values, base_dir, config.serving);
    if (core.name == "placement") {
      ApplyPlacement(values, document[core.name].as_table(), source_name, config.placement);
    }
    config.values.emplace(std::string(core.name), std::move(values));
  }
  return config;
}

Expected<Config> LoadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("config file ", Quote(path), " is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot read config file ", Quote(path), ": ", std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return ParseConfig(text.str(), path, base_dir.empty() ? "." : base_dir);
}

Expected<Config> DefaultConfig() { return ParseConfig(EmbeddedDefaultText(), kEmbeddedSource, ""); }

std::vector<std::pair<std::string, OptionSpec>> CoreKeys() {
  std::vector<std::pair<std::string, OptionSpec>> keys;
  for (const CoreSection& core : kCoreSections) {
    for (OptionSpec& spec : core.specs()) {
      keys.emplace_back(StrCat(core.name, ".", spec.key), std::move(spec));
    }
  }
  for (OptionSpec& spec : ClusterSpecs()) keys.emplace_back(StrCat("cluster.", spec.key), std::move(spec));
  for (auto& key : ClusterTableKeys()) keys.push_back(std::move(key));
  return keys;
}

}  // namespace weft::config
