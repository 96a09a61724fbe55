#include "core/train/train_config.h"

#include <filesystem>

#include "core/base/strings.h"
#include "core/train/trainer.h"

namespace weft::train {
namespace internal {
namespace fs = std::filesystem;

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

}  // namespace internal

using internal::CheckDataFile;
using internal::Where;

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

Status CheckOptimizerSection(const config::Config& config, const plugin::PluginHost& host) {
  if (!config.optimizer.has_value()) return Status();
  return internal::ChooseOptimizer(config, host).status();
}

}  // namespace weft::train
