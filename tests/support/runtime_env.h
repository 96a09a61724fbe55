// A test environment with the built plugins loaded and the devices open,
// for tests that run graphs.
#ifndef WEFT_TESTS_SUPPORT_RUNTIME_ENV_H_
#define WEFT_TESTS_SUPPORT_RUNTIME_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/graph/builder.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/session.h"

namespace weft::testing {

class RuntimeEnv {
 public:
  // Loads the plugins of the build tree (and those in |extra_paths|) with
  // the config |toml|.
  explicit RuntimeEnv(const std::string& toml = "", const std::vector<std::string>& extra_paths = {});
  const std::shared_ptr<runtime::DeviceSet>& devices() const { return devices_; }
  // The host that loaded the plugins (optimizers are found through it).
  const plugin::PluginHost& host() const { return *host_; }
  // A session over what |b| built (failing the test if it does not build).
  std::unique_ptr<runtime::Session> Session(const GraphBuilder& b, const runtime::SessionOptions& options = {});
  std::unique_ptr<runtime::Session> Session(Graph graph, const runtime::SessionOptions& options = {});

 private:
  std::unique_ptr<plugin::PluginHost> host_;
  std::shared_ptr<runtime::DeviceSet> devices_;
};

// A RuntimeEnv of the built plugins with the default config, made on first
// use and shared by every test of the program; never destroyed, so that
// what its sessions return may outlive a test.
RuntimeEnv& SharedRuntimeEnv();

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_RUNTIME_ENV_H_
