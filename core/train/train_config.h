// The checks of a training config that need more than its types: data
// files, the optimizer plugin and its hyperparameters (docs/training.md).
// Internal to core/train; the public checks are in trainer.h.
#pragma once

#include <map>
#include <string>

#include "core/config/config.h"
#include "core/plugin/plugin_host.h"

namespace weft::train::internal {

// "file:line:col: data.train_images: " for a key the user set, or
// "data.train_images: " for a default.
std::string Where(const config::Config& config, const std::string& section, const std::string& key);

// A data file the run reads: set (when |required|), existing, not a
// directory.
Status CheckDataFile(const config::Config& config, const std::string& key, const std::string& path, bool required);

struct OptimizerChoice {
  const plugin::OptimizerPlugin* plugin = nullptr;
  double learning_rate = 0;
  config::OptionValues hyperparameters;
};

Expected<OptimizerChoice> ChooseOptimizer(const config::Config& config, const plugin::PluginHost& host);

}  // namespace weft::train::internal
