// The rdma transport plugin as built in this tree, through the real plugin
// host and the real `weft` binary.
//
// What the plugin must say is checked against libibverbs itself: the test
// asks ibv_get_device_list on its own and expects the plugin's reason to
// carry verbs' words. Without an RDMA device (every machine here) the
// plugin must be listed as unavailable, not refused; with one it must be
// loaded, and the loopback test sends a message through a real queue pair.
// That last test has never run: no machine it was written on has a device.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/plugin/host_services.h"
#include "core/plugin/plugin_host.h"
#include "tests/support/output_text.h"
#include "tests/support/plugin_checks.h"
#include "tests/support/plugin_config.h"
#include "tests/support/weft_cli.h"
#include "weft/weft_plugin.h"

namespace weft {
namespace {

using plugin::PluginHost;
using plugin::PluginState;
using testing::HasRow;
using testing::ProcessResult;
using testing::RunWeft;

const std::string kPlugin = WEFT_BUILT_PLUGIN_DIR "/weft_transport_rdma.so";

// What libibverbs, asked directly, says about this machine.
struct Probe {
  bool listed = false;  // ibv_get_device_list returned a list
  int error = 0;        // its errno
  int count = 0;
  bool has_device() const { return listed && count > 0; }
};

Probe AskVerbs() {
  Probe probe;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&probe.count);
  probe.error = errno;
  probe.listed = list != nullptr;
  if (list != nullptr) ibv_free_device_list(list);
  return probe;
}

std::string ErrnoText(int error) { return StrCat("errno ", error, ": ", std::strerror(error)); }

class RdmaPluginTest : public ::testing::Test {
 protected:
  void SetUp() override { probe_ = AskVerbs(); }

  // The reason must carry what verbs said: the call's errno and its text
  // when the call failed, the device count when it returned none.
  void ExpectVerbsReason(const std::string& reason) {
    EXPECT_TRUE(reason.starts_with("no RDMA device found (ibv_get_device_list ")) << reason;
    if (!probe_.listed) {
      EXPECT_NE(reason.find(StrCat("ibv_get_device_list failed with ", ErrnoText(probe_.error))), std::string::npos)
          << reason;
    } else {
      EXPECT_NE(reason.find("ibv_get_device_list returned 0 devices"), std::string::npos) << reason;
    }
    EXPECT_NE(reason.find("ibverbs-providers"), std::string::npos) << reason;
    EXPECT_NE(reason.find("or use the tcp transport"), std::string::npos) << reason;
  }

  Probe probe_;
};

TEST_F(RdmaPluginTest, IsUnavailableWithVerbsReasonOrLoaded) {
  PluginHost host(testing::MakeConfig(), testing::Isolated());
  ASSERT_TRUE(host.Load(kPlugin).ok());
  ASSERT_EQ(host.plugins().size(), 1u);
  const plugin::PluginInfo& info = host.plugins()[0];
  EXPECT_EQ(info.name, "rdma");
  EXPECT_EQ(info.kind, plugin::PluginKind::kTransport);
  if (probe_.has_device()) {
    EXPECT_EQ(info.state, PluginState::kLoaded) << info.reason;
    EXPECT_EQ(info.version, "0.1.0");
    const plugin::TransportPlugin* rdma = host.transports().Find("rdma");
    ASSERT_NE(rdma, nullptr);
    EXPECT_NE(rdma->table->memory_register, nullptr);
    EXPECT_NE(rdma->table->memory_unregister, nullptr);
    return;
  }
  EXPECT_EQ(info.state, PluginState::kUnavailable);
  ExpectVerbsReason(info.reason);
  EXPECT_EQ(host.transports().Find("rdma"), nullptr);
}

TEST_F(RdmaPluginTest, InitAnswersUnavailableThroughItsEntryPoint) {
  if (probe_.has_device()) GTEST_SKIP() << "an RDMA device is present: init succeeds";
  void* lib = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<weft_plugin_init_fn>(dlsym(lib, WEFT_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(init, nullptr);
  const weft_plugin_t* description = reinterpret_cast<const weft_plugin_t*>(&lib);  // must be reset
  Status status = plugin::TakeStatus(init(plugin::HostTable(), &description));
  EXPECT_EQ(status.code(), Code::kUnavailable) << status.ToString();
  EXPECT_EQ(description, nullptr);
  ExpectVerbsReason(std::string(status.message()));
}

TEST_F(RdmaPluginTest, StrictModeNeverRefusesIt) {
  if (probe_.has_device()) GTEST_SKIP() << "an RDMA device is present: the plugin is loaded";
  testing::ExpectStrictModeLeavesItUnavailable(kPlugin);
}

TEST_F(RdmaPluginTest, WeftPluginsListsItWithTheReason) {
  ProcessResult r = RunWeft({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (probe_.has_device()) {
    EXPECT_TRUE(HasRow(r.out, {"rdma", "transport", "1.3", "0.1.0", "loaded", kPlugin})) << r.out;
    return;
  }
  // Init said UNAVAILABLE, so the host knows the name and kind from the
  // file name only.
  EXPECT_TRUE(HasRow(r.out, {"rdma", "transport", "-", "-", "unavailable", kPlugin})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cpu", "device", "1.3", "0.1.0", "loaded"})) << r.out;
  const std::optional<std::string> reason = testing::RestOfLine(r.out, "\nrdma: unavailable: ");
  ASSERT_TRUE(reason.has_value()) << r.out;
  ExpectVerbsReason(*reason);

  r = RunWeft({"plugins", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(StrCat("\"path\":\"", kPlugin,
                              "\",\"status\":\"unavailable\",\"reason\":\"no RDMA device found (ibv_get_device_list ")),
            std::string::npos)
      << r.out;
}

// Plugins see the SDK only: the entry point is the one export, libweft is
// not linked, and libibverbs is.
TEST_F(RdmaPluginTest, ExportsOnlyItsEntryPointAndLinksNoLibweft) {
  const std::string dynamic = testing::ExpectOnlyTheEntryPointExported(WEFT_TEST_NM, WEFT_TEST_READELF, kPlugin);
  EXPECT_NE(dynamic.find("libibverbs.so"), std::string::npos) << dynamic;
}

// One message over a real queue pair on the first device, through the
// loopback side channel. NEVER RUN: skipped on every machine without an
// RDMA device, which is every machine this was written on.
TEST_F(RdmaPluginTest, LoopbackMessageOnARealDevice) {
  if (!probe_.has_device()) GTEST_SKIP() << "no RDMA device here: the verbs data path cannot run";
  PluginHost host(testing::MakeConfig(), testing::Isolated());
  ASSERT_TRUE(host.Load(kPlugin).ok());
  const plugin::TransportPlugin* rdma = host.transports().Find("rdma");
  ASSERT_NE(rdma, nullptr);
  const weft_transport_plugin_t* t = rdma->table;

  struct Inbox {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::pair<std::string, std::string>> messages;
    weft_connection_t accepted = nullptr;
  } inbox;
  weft_transport_callbacks_t cb{};
  cb.struct_size = sizeof cb;
  cb.user = &inbox;
  cb.on_accept = [](void* user, weft_connection_t c, const char*) {
    auto* in = static_cast<Inbox*>(user);
    std::lock_guard<std::mutex> lock(in->mutex);
    in->accepted = c;
  };
  cb.on_message = [](void* user, const weft_received_t* m) {
    auto* in = static_cast<Inbox*>(user);
    std::lock_guard<std::mutex> lock(in->mutex);
    in->messages.emplace_back(std::string(static_cast<const char*>(m->header), m->header_size),
                              std::string(static_cast<const char*>(m->payload), m->payload_size));
    in->cv.notify_all();
  };
  cb.on_closed = [](void*, weft_connection_t, weft_status_t status) { (void)plugin::TakeStatus(status); };

  weft_endpoint_t server = nullptr, client = nullptr;
  ASSERT_EQ(plugin::TakeStatus(t->endpoint_open("rdma://127.0.0.1:0", &cb, &server)).ToString(), "OK");
  ASSERT_EQ(plugin::TakeStatus(t->endpoint_open(nullptr, &cb, &client)).ToString(), "OK");
  char address[256];
  ASSERT_EQ(plugin::TakeStatus(t->endpoint_address(server, address, sizeof address)).ToString(), "OK");
  weft_connection_t connection = nullptr;
  ASSERT_EQ(plugin::TakeStatus(t->connection_open(client, address, 5000, &connection)).ToString(), "OK");

  const std::string header = "hello";
  const std::string payload(3 << 20, 'p');  // several ring slots
  const void* slices[] = {payload.data()};
  const uint64_t sizes[] = {payload.size()};
  weft_message_t message{sizeof(weft_message_t), header.data(), header.size(), slices, sizes, 1};
  testing::Done done;
  ASSERT_EQ(plugin::TakeStatus(t->send(connection, &message, testing::Done::Call, &done)).ToString(), "OK");
  ASSERT_TRUE(done.WaitFor(std::chrono::seconds(10)));
  EXPECT_EQ(done.status(), "OK");
  {
    std::unique_lock<std::mutex> lock(inbox.mutex);
    ASSERT_TRUE(inbox.cv.wait_for(lock, std::chrono::seconds(10), [&] { return !inbox.messages.empty(); }));
    EXPECT_EQ(inbox.messages[0].first, header);
    EXPECT_EQ(inbox.messages[0].second, payload);
  }
  t->connection_close(connection);
  weft_connection_t accepted = nullptr;
  {
    std::lock_guard<std::mutex> lock(inbox.mutex);
    accepted = inbox.accepted;
  }
  if (accepted != nullptr) t->connection_close(accepted);
  t->endpoint_close(client);
  t->endpoint_close(server);
}

}  // namespace
}  // namespace weft
