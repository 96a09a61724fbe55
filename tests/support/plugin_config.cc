#include "tests/support/plugin_config.h"

#include <gtest/gtest.h>

namespace weft::testing {

config::Config MakeConfig(const std::string& toml) {
  auto config = config::ParseConfig(toml, "test.toml", "/");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

plugin::PluginHostOptions Isolated() {
  plugin::PluginHostOptions options;
  options.use_environment = false;
  options.use_builtin_folder = false;
  return options;
}

std::unique_ptr<plugin::PluginHost> IsolatedHost(const std::vector<std::string>& paths, const std::string& toml) {
  config::Config config = MakeConfig(toml);
  config.plugins.paths = paths;
  return std::make_unique<plugin::PluginHost>(config, Isolated());
}

}  // namespace weft::testing
