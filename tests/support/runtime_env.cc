#include "tests/support/runtime_env.h"

#include <gtest/gtest.h>

#include "tests/support/plugin_config.h"

namespace weft::testing {

RuntimeEnv::RuntimeEnv(const std::string& toml, const std::vector<std::string>& extra_paths) {
  config::Config config = MakeConfig(toml);
  config.plugins.paths = {WEFT_BUILT_PLUGIN_DIR};
  config.plugins.paths.insert(config.plugins.paths.end(), extra_paths.begin(), extra_paths.end());
  host_ = std::make_unique<plugin::PluginHost>(config, Isolated());
  Status loaded = host_->LoadAll();
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
  auto devices = runtime::DeviceSet::Open(*host_);
  EXPECT_TRUE(devices.ok()) << devices.status().ToString();
  if (devices.ok()) devices_ = std::move(*devices);
}

std::unique_ptr<runtime::Session> RuntimeEnv::Session(const GraphBuilder& b, const runtime::SessionOptions& options) {
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return nullptr;
  return Session(std::move(*graph), options);
}

std::unique_ptr<runtime::Session> RuntimeEnv::Session(Graph graph, const runtime::SessionOptions& options) {
  auto session = runtime::Session::Create(std::move(graph), devices_, options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return session.ok() ? std::move(*session) : nullptr;
}

RuntimeEnv& SharedRuntimeEnv() {
  static RuntimeEnv* env = new RuntimeEnv();
  return *env;
}

}  // namespace weft::testing
