// The model server's configuration (`weft model-server`, docs/serving.md):
// the process's [serving] section, and the config.toml a served model may
// have next to its versions (MODELS/NAME/config.toml).
#ifndef WEFT_CORE_CONFIG_SERVING_CONFIG_H_
#define WEFT_CORE_CONFIG_SERVING_CONFIG_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/config/options.h"

namespace weft::config {

// [serving]
struct ServingConfig {
  std::string host = "0.0.0.0";
  int64_t http_port = 8501;
  int64_t http_threads = 0;  // 0: one per core
  int64_t max_body_mb = 64;
  int64_t request_timeout_ms = 30000;
  int64_t read_timeout_ms = 30000;
  int64_t max_connections = 4096;
  double poll_interval_s = 2.0;   // 0: load at start only
  std::string bearer_token_file;  // resolved; empty: no token asked
};

std::vector<OptionSpec> ServingSpecs();
void ApplyServing(const OptionValues& values, std::string_view base_dir, ServingConfig& out);

// MODELS/NAME/config.toml. Unset batching keys are chosen by the server
// from what it measures (docs/serving.md, "Batching").
struct ModelServingConfig {
  std::string source;  // the file, or "" for the defaults
  std::string signature_name = "serving_default";
  std::vector<std::string> inputs;        // empty: the graph's Placeholders / ONNX inputs
  std::vector<std::string> outputs;       // empty: the graph's outputs / ONNX outputs
  std::string version_policy = "latest";  // latest, all, specific
  int64_t latest = 1;
  std::vector<int64_t> specific;
  bool batching = true;
  std::optional<int64_t> max_batch_size;
  std::optional<int64_t> batch_timeout_us;
  std::optional<int64_t> max_enqueued_batches;
  std::optional<int64_t> num_batch_threads;
};

// Parses a model's config.toml; every problem is reported with its
// file:line:col.
Expected<ModelServingConfig> ParseModelServingConfig(std::string_view text, std::string_view file);

// The documented keys of a model's config.toml ("batching.max_batch_size"),
// for the docs.
std::vector<std::pair<std::string, OptionSpec>> ModelServingKeys();

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_SERVING_CONFIG_H_
