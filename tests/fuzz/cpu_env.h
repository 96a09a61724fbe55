// What the fuzz targets that run graphs share: the CPU plugin of this
// build tree loaded (with the fuzz preset's sanitizers and coverage) and
// its devices open, once per process.
#ifndef WEFT_TESTS_FUZZ_CPU_ENV_H_
#define WEFT_TESTS_FUZZ_CPU_ENV_H_

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/config/config.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "core/tensor/size.h"

namespace weft::fuzz {

struct CpuEnv {
  std::unique_ptr<plugin::PluginHost> host;
  std::shared_ptr<runtime::DeviceSet> devices;
};

// Loads the CPU plugin from WEFT_BUILT_PLUGIN_DIR and opens its devices;
// aborts naming |target| when it cannot (a fuzz run without its plugin
// would test nothing).
inline CpuEnv* LoadCpuEnv(const char* target) {
  auto config = config::ParseConfig("[logging]\nlevel = \"off\"\n", "fuzz.toml", "/");
  if (!config.ok()) std::abort();
  config->plugins.paths = {WEFT_BUILT_PLUGIN_DIR};
  plugin::PluginHostOptions options;
  options.use_environment = false;
  options.use_builtin_folder = false;
  auto* env = new CpuEnv;
  env->host = std::make_unique<plugin::PluginHost>(*config, options);
  Status loaded = env->host->LoadAll();
  auto devices = runtime::DeviceSet::Open(*env->host);
  if (!loaded.ok() || !devices.ok()) {
    std::fprintf(stderr, "%s: cannot load the CPU plugin from %s\n", target, WEFT_BUILT_PLUGIN_DIR);
    std::abort();
  }
  env->devices = std::move(*devices);
  // Small inputs never need much; a kernel asked for more fails cleanly.
  SetMaxTensorBytes(uint64_t{64} << 20);
  return env;
}

}  // namespace weft::fuzz

#endif  // WEFT_TESTS_FUZZ_CPU_ENV_H_
