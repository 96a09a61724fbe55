// The typed configuration of a Weft process, loaded from TOML.
//
// One file configures a process: which threads to use, where plugins are,
// how to log, and each plugin's own section. Everything is validated when
// the file is loaded, and every problem is reported at once with its
// position:
//
//   local.toml:3:20: runtime.inter_op_threads: expected an integer >= 1, got "two"
//
// The sections the core owns are typed here; plugin sections
// ([devices.<name>], [transports.<name>], [optimizers.<name>]) are kept as
// written and checked against the plugin's declared options once it is
// loaded (see options.h and core/plugin). The model grows by adding a
// section struct and its specs in config.cc. [cluster] has a file of its
// own (cluster_config.h).
//
// configs/local.toml is the embedded default: a process started without a
// config file behaves as if it had been given that file.
#ifndef WEFT_CORE_CONFIG_CONFIG_H_
#define WEFT_CORE_CONFIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/logging.h"
#include "core/base/status.h"
#include "core/config/cluster_config.h"
#include "core/config/options.h"
#include "core/config/serving_config.h"
#include "core/config/value.h"

namespace weft::config {

// [runtime]: threads. Unset means "derived from the core count".
struct RuntimeConfig {
  std::optional<int64_t> inter_op_threads;
  std::optional<int64_t> intra_op_threads;
  // The largest tensor allocated, in MiB (core/tensor/size.h).
  std::optional<int64_t> max_tensor_mb;
};

// [plugins]: where plugins come from.
struct PluginsConfig {
  // Directories or plugin files, searched before WEFT_PLUGIN_PATH and the
  // built-in folder. Relative paths are resolved against the directory of
  // the config file.
  std::vector<std::string> paths;
  // Plugin names not to load (matched against the file name
  // weft_<kind>_<name>.so before loading, and the name after init).
  std::vector<std::string> disable;
  // When true, a plugin that is refused stops the process instead of being
  // logged and skipped.
  bool strict = false;
};

// [logging]
struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  std::string file;  // empty: stderr
};

// --- Training (`weft train`) ---------------------------------------------------------------------

// [model]: which tensors of a model graph play which part in training.
struct ModelConfig {
  std::string loss = "loss";          // the scalar to minimise
  std::string images = "images";      // the Placeholder fed with examples
  std::string labels = "labels";      // the Placeholder fed with labels
  std::string accuracy = "accuracy";  // a scalar metric; empty for none
  std::string init = "init";          // the node that initialises the model's variables
  std::string output;                 // non-empty: training builds |loss| over this tensor
};

// [data]: where examples come from and how they are prepared.
struct DataConfig {
  std::string format = "idx";                                        // "idx" (optionally .gz), "npy" or "csv"
  std::string train_images, train_labels, test_images, test_labels;  // resolved paths
  int64_t csv_label_column = -1;                                     // -1: the last column
  double scale = 1.0;                                                // each feature becomes x * scale + shift
  double shift = 0.0;
  bool shuffle = true;
  int64_t prefetch = 4;  // batches prepared ahead of the training step
  int64_t test_batch_size = 1000;
};

// [training]
struct TrainingConfig {
  int64_t batch_size = 64;
  int64_t epochs = 1;
  int64_t steps = 0;  // when > 0, overrides epochs
  int64_t seed = 0;
  int64_t log_every = 100;
  int64_t eval_every = 0;       // 0: evaluate at the end only
  double clip_global_norm = 0;  // 0: no clipping
  bool sparse_updates = true;   // sparse gradients for variables read by gathers only
  std::string metrics;          // JSONL file, resolved; empty for none
  // How the workers of a cluster combine their gradients (docs/distributed.md).
  std::string mode = "async";         // async, sync, allreduce
  int64_t replicas_to_aggregate = 0;  // sync: N; 0: the workers less backup_workers
  int64_t backup_workers = 0;         // sync: b
  double bucket_mb = 25.0;            // allreduce: the gradient bucket size
};

// [schedule]: the learning rate over the steps.
struct ScheduleConfig {
  std::string kind = "constant";  // constant, step, exponential, cosine
  int64_t warmup_steps = 0;
  int64_t step_size = 1000;
  double gamma = 0.1;
  int64_t decay_steps = 1000;
  double decay_rate = 0.96;
  bool staircase = false;
  double min_learning_rate = 0;
  int64_t total_steps = 0;  // for cosine; 0: the run's steps
};

// [checkpoint]
struct CheckpointConfig {
  std::string dir;  // resolved; empty: no checkpoints
  int64_t every_steps = 0;
  double every_seconds = 0;
  int64_t keep = 3;
  bool at_end = true;
};

// [placement]: where nodes run (see core/placement/placer.h).
struct PinConfig {
  std::string pattern;  // node names; '*' matches any run of characters
  std::string device;   // "/device:OPENCL:0", "/device:CPU:*"
  std::string where;    // "train.toml:12:1"
};
struct PlacementConfig {
  bool soft = true;
  // Device types, most preferred first; empty: CUDA, HIP, CPU, OPENCL.
  std::vector<std::string> priority;
  // [placement.pins], in file order.
  std::vector<PinConfig> pins;
};

// [graph_optimizer]: the passes that rewrite a graph before it runs
// (docs/optimizer.md). The pass names are checked when a session starts.
struct GraphOptimizerConfig {
  std::optional<int64_t> level;  // unset: the build's default
  std::vector<std::string> disable;
};

struct Config {
  // The file it came from, or "<embedded configs/local.toml>".
  std::string source;
  RuntimeConfig runtime;
  PluginsConfig plugins;
  LoggingConfig logging;
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
  ScheduleConfig schedule;
  CheckpointConfig checkpoint;
  PlacementConfig placement;
  GraphOptimizerConfig graph_optimizer;
  // [serving]: `weft model-server` (serving_config.h).
  ServingConfig serving;
  // [cluster]; absent: a single process (see core/distributed/cluster.h).
  std::optional<ClusterConfig> cluster;
  // [optimizer] as written: its keys depend on the optimizer plugin it
  // names, so the trainer validates it once plugins are loaded.
  std::optional<Section> optimizer;
  // The validated values of each core section ("data"), with where each
  // key was set, for messages about values that are well-formed but wrong
  // (a data file that does not exist).
  std::map<std::string, OptionValues> values;
  // The sections the file wrote (core ones), in file order.
  std::vector<std::string> written_sections;
  // Plugin sections by path ("devices.cpu").
  std::map<std::string, Section> plugin_sections;

  // The section for plugin |name| of |kind| ("devices", "transports",
  // "optimizers"), or nullptr.
  const Section* PluginSection(std::string_view kind, std::string_view name) const;
};

// Parses |text|, reporting positions against |source_name|. Relative
// plugin paths are resolved against |base_dir| (the file's directory).
Expected<Config> ParseConfig(std::string_view text, std::string_view source_name, std::string_view base_dir);

// Reads and parses the file at |path|. A missing or unreadable file is an
// error naming it.
Expected<Config> LoadConfigFile(const std::string& path);

// The text of configs/local.toml, compiled into the library.
std::string_view EmbeddedDefaultText();

// The embedded default, parsed.
Expected<Config> DefaultConfig();

// The documented keys of the core's sections, for `weft config keys` and
// the docs: "runtime.inter_op_threads" -> its spec.
std::vector<std::pair<std::string, OptionSpec>> CoreKeys();

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_CONFIG_H_
