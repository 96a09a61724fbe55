#include "tests/support/plugin_checks.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "core/plugin/host_services.h"
#include "core/plugin/plugin_host.h"
#include "tests/support/plugin_config.h"
#include "tests/support/subprocess.h"

namespace weft::testing {

std::string ExpectOnlyTheEntryPointExported(const std::string& nm, const std::string& readelf,
                                            const std::string& file) {
  ProcessResult r = Run({nm, "-D", "--defined-only", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return "";
  std::set<std::string> exported;
  std::istringstream lines(r.out);
  std::string address, type, name;
  while (lines >> address >> type >> name) {
    if (std::string("TWDBRVu").find(type) != std::string::npos) exported.insert(name);
  }
  EXPECT_EQ(exported, std::set<std::string>{"weft_plugin_init_v1"}) << r.out;
  const std::string dynamic = DynamicSection(readelf, file);
  EXPECT_EQ(dynamic.find("libweft"), std::string::npos) << dynamic;
  return dynamic;
}

std::string DynamicSection(const std::string& readelf, const std::string& file) {
  ProcessResult r = Run({readelf, "-d", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? r.out : "";
}

void ExpectStrictModeLeavesItUnavailable(const std::string& file) {
  config::Config config = MakeConfig("[plugins]\nstrict = true\n");
  config.plugins.paths = {file};
  plugin::PluginHost host(config, Isolated());
  Status loaded = host.LoadAll();
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  ASSERT_EQ(host.plugins().size(), 1u);
  EXPECT_EQ(host.plugins()[0].state, plugin::PluginState::kUnavailable);
}

std::optional<std::string> RestOfLine(const std::string& out, const std::string& prefix) {
  const auto at = out.find(prefix);
  if (at == std::string::npos) return std::nullopt;
  const auto end = out.find('\n', at + prefix.size());
  return out.substr(at + prefix.size(), end - at - prefix.size());
}

void Done::Call(void* user, weft_status_t status) {
  auto* done = static_cast<Done*>(user);
  std::lock_guard<std::mutex> lock(done->mutex_);
  done->status_ = plugin::TakeStatus(status).ToString();
  done->called_ = true;
  done->cv_.notify_all();
}

std::string Done::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return called_; });
  return status_;
}

bool Done::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return called_; });
}

std::string Done::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

}  // namespace weft::testing
