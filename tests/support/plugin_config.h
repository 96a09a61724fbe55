// Configs and plugin-host options for tests that load plugins themselves:
// a config parsed from a TOML string, and a host that sees only the
// plugins a test names.
#ifndef WEFT_TESTS_SUPPORT_PLUGIN_CONFIG_H_
#define WEFT_TESTS_SUPPORT_PLUGIN_CONFIG_H_

#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/plugin/plugin_host.h"

namespace weft::testing {

// |toml| parsed as the file "test.toml" in "/" (so messages name
// "test.toml:line:col"); fails the test when it does not parse.
config::Config MakeConfig(const std::string& toml = "");

// Options for a host that sees only what a test gives it: no
// $WEFT_PLUGIN_PATH, no built-in folder.
plugin::PluginHostOptions Isolated();

// An isolated host over the plugin files and folders |paths| (not loaded
// yet), with the config |toml|.
std::unique_ptr<plugin::PluginHost> IsolatedHost(const std::vector<std::string>& paths, const std::string& toml = "");

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_PLUGIN_CONFIG_H_
