#include "tests/support/two_tasks.h"

#include "core/config/config.h"
#include "tests/support/loopback.h"

namespace weft::testing {

plugin::PluginHost& BuiltPlugins() {
  static plugin::PluginHost* host = [] {
    auto* h = new plugin::PluginHost(*config::DefaultConfig());
    EXPECT_TRUE(h->LoadAll().ok());
    return h;
  }();
  return *host;
}

void TwoTasksTest::SetUp() {
  if (BuiltPlugins().transports().Find("tcp") == nullptr) GTEST_SKIP() << "the tcp transport is not built";
  peers_ = {{kPsTask, "tcp://127.0.0.1:" + std::to_string(FreePort())},
            {kWorkerTask, "tcp://127.0.0.1:" + std::to_string(FreePort())}};
  for (const auto& [name, address] : peers_) {
    services_.push_back(StartTask(name));
    ASSERT_NE(services_.back(), nullptr);
  }
}

std::unique_ptr<dist::TaskService> TwoTasksTest::StartTask(const std::string& name) const {
  dist::TaskService::Options o;
  o.name = name;
  o.listen_address = peers_.at(name);
  o.peers = peers_;
  o.cluster_fingerprint = kFingerprint;
  o.rpc_timeout_ms = 20000;
  auto devices = runtime::DeviceSet::Open(BuiltPlugins());
  EXPECT_TRUE(devices.ok()) << devices.status().ToString();
  if (!devices.ok()) return nullptr;
  auto service = dist::TaskService::Start(o, BuiltPlugins(), std::move(*devices));
  EXPECT_TRUE(service.ok()) << service.status().ToString();
  return service.ok() ? std::move(*service) : nullptr;
}

dist::DistSessionOptions TwoTasksTest::Options() const {
  dist::DistSessionOptions o;
  o.tasks = {{kWorkerTask, peers_.at(kWorkerTask)}, {kPsTask, peers_.at(kPsTask)}};
  o.cluster_fingerprint = kFingerprint;
  o.rpc_timeout_ms = 20000;
  return o;
}

}  // namespace weft::testing
