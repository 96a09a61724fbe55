// The plugin host against real plugin files: the CPU plugin and the
// deliberately broken plugins of tests/plugins/. Every refusal is checked
// by its message.
#include "core/plugin/plugin_host.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "core/base/logging.h"
#include "core/plugin/linked_plugins.h"
#include "tests/support/log_capture.h"
#include "tests/support/plugin_config.h"

namespace weft::plugin {
namespace {

const std::string kRoot = WEFT_TEST_PLUGIN_ROOT;

using testing::Isolated;
using testing::IsolatedHost;
using testing::MakeConfig;

std::string PluginFile(const std::string& folder, const std::string& file) { return kRoot + "/" + folder + "/" + file; }

// Loads |file| alone and returns the refusal message.
std::string RefusalOf(const std::string& file) {
  PluginHost host(MakeConfig(), Isolated());
  Status status = host.Load(file);
  EXPECT_FALSE(status.ok()) << file;
  EXPECT_EQ(host.plugins().size(), 1u);
  if (!host.plugins().empty()) {
    EXPECT_EQ(host.plugins()[0].state, PluginState::kRefused);
    EXPECT_EQ(status.message(), StrCat("plugin ", file, " refused: ", host.plugins()[0].reason));
  }
  return status.message();
}

// Loads |first|, then |second|, into |host|; returns the refusal of the
// second.
std::string RefusalOfSecond(PluginHost& host, const std::string& first, const std::string& second) {
  EXPECT_TRUE(host.Load(first).ok()) << first;
  Status status = host.Load(second);
  EXPECT_FALSE(status.ok()) << second;
  return status.message();
}

// Whether the log had |line|, printing the log when not.
::testing::AssertionResult Logged(const testing::LogCapture& log, const std::string& line) {
  const std::vector<std::string> lines = log.Lines();
  if (std::find(lines.begin(), lines.end(), line) != lines.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "log had: " << StrJoin(lines, "\n");
}

TEST(PluginHost, LoadsTheCpuPlugin) {
  PluginHost host(MakeConfig(), Isolated());
  ASSERT_TRUE(host.Load(WEFT_BUILT_PLUGIN_DIR "/weft_device_cpu.so").ok());
  ASSERT_EQ(host.plugins().size(), 1u);
  const PluginInfo& info = host.plugins()[0];
  EXPECT_EQ(info.name, "cpu");
  EXPECT_EQ(info.kind, PluginKind::kDevice);
  EXPECT_EQ(info.state, PluginState::kLoaded);
  EXPECT_EQ(info.abi_major, 1u);
  EXPECT_EQ(info.abi_minor, 3u);
  EXPECT_FALSE(info.version.empty());
  ASSERT_EQ(info.options.size(), 2u);
  EXPECT_EQ(info.options[0].key, "count");
  EXPECT_EQ(info.options[1].key, "allocator_cache_mb");
  const DevicePlugin* cpu = host.devices().Find("CPU");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->plugin_name(), "cpu");
  EXPECT_EQ(*cpu->DeviceCount(), 1);
}

// A plugin file of tests/plugins/ that the host refuses, and the reason
// it gives after "plugin <file> refused: ".
struct Refusal {
  const char* test;  // the case's name
  const char* folder;
  const char* file;
  std::string reason;
};

std::ostream& operator<<(std::ostream& out, const Refusal& r) { return out << r.test; }

std::vector<Refusal> Refusals() {
  const std::string minor = std::to_string(WEFT_ABI_VERSION_MINOR);
  const std::string rebuild = "; rebuild the plugin against a matching Weft SDK";
  return {
      {"RefusesAFileThatIsNotASharedLibrary", "garbage", "weft_device_garbage.so",
       "not a loadable shared library: invalid ELF header"},
      {"RefusesALibraryWithoutTheEntrySymbol", "no_entry", "weft_device_noentry.so",
       "no entry symbol weft_plugin_init_v1; it is not a Weft plugin, or was built without WEFT_PLUGIN_EXPORT"},
      {"RefusesAnotherMajorVersionNamingBoth", "abi_v2", "weft_device_abi_v2.so",
       "built for plugin ABI v2 (it exports weft_plugin_init_v2), but this weft speaks ABI v1." + minor + rebuild},
      {"RefusesADeclaredMajorVersionMismatch", "abi_major_field", "weft_device_testdev.so",
       "built for plugin ABI v2." + minor + ", but this weft speaks ABI v1." + minor + rebuild},
      {"RefusesATableSmallerThanTheAbi", "small_table", "weft_device_testdev.so",
       StrCat("weft_device_plugin_t.struct_size is 16 bytes, smaller than the ", WEFT_DEVICE_PLUGIN_SIZE_V1_0,
              " bytes of ABI 1.0; rebuild the plugin against the Weft SDK")},
      {"RefusesAMissingRequiredMember", "missing_member", "weft_device_testdev.so",
       "required member weft_device_plugin_t.copy_device_to_device is NULL"},
      {"RefusesAnInitError", "init_error", "weft_device_testdev.so",
       "init failed: INTERNAL: cannot open /dev/frobnicator: permission denied"},
      {"GuardTurnsAnExceptionInInitIntoARefusal", "init_throws", "weft_device_testdev.so",
       "init failed: INTERNAL: uncaught C++ exception: frobnicator exploded"},
      {"CatchesAnExceptionThatEscapesAnUnguardedPlugin", "unguarded_throw", "weft_device_testdev.so",
       "init let a C++ exception escape (boom); plugins must run entry points inside weft::sdk::Guard"},
      {"RefusesABadOptionDeclaration", "bad_option_default", "weft_device_testdev.so",
       "option 'count': default \"\\\"many\\\"\" is not an integer in [1, 8]"},
      {"RefusesAConfigureError", "configure_error", "weft_device_testdev.so",
       "configure failed: INVALID_ARGUMENT: the frobnicator rejects this configuration"},
      {"RefusesACollectivesTableSmallerThanTheAbi", "coll_1", "weft_collectives_nullcoll.so",
       StrCat("weft_collectives_plugin_t.struct_size is 16 bytes, smaller than the ", WEFT_COLLECTIVES_PLUGIN_SIZE_V1_2,
              " bytes of ABI 1.2; rebuild the plugin against the Weft SDK")},
      {"RefusesACollectivesTableWithoutAllReduce", "coll_2", "weft_collectives_nullcoll.so",
       "required member weft_collectives_plugin_t.all_reduce is NULL"},
      {"RefusesACollectivesKindThatPredatesItsAbi", "coll_3", "weft_collectives_nullcoll.so",
       "kind is collectives but its description predates ABI 1.2 (no collectives member); rebuild the plugin "
       "against the Weft SDK"},
      {"RefusesACollectivesDtypeThatIsNotNumeric", "coll_4", "weft_collectives_nullcoll.so",
       "dtypes[1] is 7, not a numeric element type"},
  };
}

class PluginHostRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(PluginHostRefusal, NamesTheFileAndTheReason) {
  const std::string file = PluginFile(GetParam().folder, GetParam().file);
  EXPECT_EQ(RefusalOf(file), "plugin " + file + " refused: " + GetParam().reason);
}

INSTANTIATE_TEST_SUITE_P(PluginHost, PluginHostRefusal, ::testing::ValuesIn(Refusals()),
                         [](const ::testing::TestParamInfo<Refusal>& param) { return std::string(param.param.test); });

TEST(PluginHost, RefusesASecondPluginWithTheSameName) {
  PluginHost host(MakeConfig(), Isolated());
  const std::string a = PluginFile("dup", "weft_device_dup_a.so");
  const std::string b = PluginFile("dup", "weft_device_dup_b.so");
  EXPECT_EQ(RefusalOfSecond(host, a, b), "plugin " + b + " refused: name 'dup' is already taken by " + a);
  EXPECT_NE(host.devices().Find("DUPA"), nullptr);
  EXPECT_EQ(host.devices().Find("DUPB"), nullptr);
}

TEST(PluginHost, RefusesASecondPluginForTheSameDeviceType) {
  PluginHost host(MakeConfig(), Isolated());
  const std::string a = PluginFile("same_type", "weft_device_samea.so");
  const std::string b = PluginFile("same_type", "weft_device_sameb.so");
  EXPECT_EQ(RefusalOfSecond(host, a, b), "plugin " + b +
                                             " refused: device type 'SAME' is already provided by plugin "
                                             "'samea' (" +
                                             a + ")");
}

// Loads the test plugin "frob" of |folder|, which cannot serve here, then
// the built plugins, logging at debug level; checks that frob is
// unavailable with |reason|.
std::unique_ptr<PluginHost> LoadWithUnavailableFrob(const std::string& folder, const std::string& reason) {
  SetLogLevel(LogLevel::kDebug);
  auto host = IsolatedHost({PluginFile(folder, ""), WEFT_BUILT_PLUGIN_DIR});
  EXPECT_TRUE(host->LoadAll().ok());
  const PluginInfo* frob = host->FindPlugin("frob");
  EXPECT_NE(frob, nullptr);
  if (frob != nullptr) {
    EXPECT_EQ(frob->state, PluginState::kUnavailable);
    EXPECT_EQ(frob->reason, reason);
  }
  return host;
}

TEST(PluginHost, UnavailableAtInitIsLoggedAndSkipped) {
  testing::LogCapture log;
  auto host = LoadWithUnavailableFrob("unavailable_init", "no frobnicator driver (libfrob.so.1 not found)");
  // The process goes on: the CPU plugin after it is loaded.
  ASSERT_NE(host->FindPlugin("cpu"), nullptr);
  EXPECT_EQ(host->FindPlugin("cpu")->state, PluginState::kLoaded);
  EXPECT_TRUE(Logged(log, "debug: plugin " + PluginFile("unavailable_init", "weft_device_frob.so") +
                              " is unavailable: no frobnicator driver (libfrob.so.1 not found)"));
}

TEST(PluginHost, UnavailableFromDeviceCountIsLoggedAndSkipped) {
  testing::LogCapture log;
  auto host = LoadWithUnavailableFrob("unavailable_count", "no frobnicator found on this machine");
  EXPECT_EQ(host->devices().Find("TESTDEV"), nullptr);
  EXPECT_NE(host->devices().Find("CPU"), nullptr);
  EXPECT_TRUE(Logged(log, "debug: plugin 'frob' (" + PluginFile("unavailable_count", "weft_device_frob.so") +
                              ") is unavailable: no frobnicator found on this machine"));
}

TEST(PluginHost, RefusalsAreLoggedAndTheProcessGoesOn) {
  testing::LogCapture log;
  auto host = IsolatedHost({PluginFile("garbage", ""), WEFT_BUILT_PLUGIN_DIR});
  ASSERT_TRUE(host->LoadAll().ok());
  EXPECT_NE(host->devices().Find("CPU"), nullptr);
  const std::string file = PluginFile("garbage", "weft_device_garbage.so");
  EXPECT_TRUE(Logged(log, "warning: plugin " + file + " refused: not a loadable shared library: invalid ELF header"));
}

TEST(PluginHost, StrictModeStopsAtTheFirstRefusal) {
  auto host = IsolatedHost({PluginFile("garbage", ""), WEFT_BUILT_PLUGIN_DIR}, "[plugins]\nstrict = true\n");
  Status status = host->LoadAll();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "plugin " + PluginFile("garbage", "weft_device_garbage.so") +
                                  " refused: not a loadable shared library: invalid ELF header");
  EXPECT_EQ(host->devices().Find("CPU"), nullptr);
}

TEST(PluginHost, PluginSectionIsValidatedAgainstItsDeclaration) {
  auto host = IsolatedHost({PluginFile("good", "")}, "[devices.testdev]\ncount = 9\nmode = \"slow\"\ncuont = 1\n");
  Status status = host->LoadAll();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "test.toml:2:9: devices.testdev.count: expected an integer in [1, 8], got 9\n"
            "test.toml:3:8: devices.testdev.mode: expected one of \"fast\", \"exact\", got \"slow\"\n"
            "test.toml:4:1: devices.testdev.cuont: unknown key; did you mean 'count'?");
}

TEST(PluginHost, PluginReadsItsValidatedOptions) {
  auto host = IsolatedHost({PluginFile("good", "")}, "[devices.testdev]\ncount = 3\n");
  ASSERT_TRUE(host->LoadAll().ok());
  const DevicePlugin* dev = host->devices().Find("TESTDEV");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(*dev->DeviceCount(), 3);
}

TEST(PluginHost, UnusedSectionsAreWarnings) {
  // (devices.cuda would be read by the CUDA plugin where it is built.)
  auto host = IsolatedHost({WEFT_BUILT_PLUGIN_DIR}, "[devices.tpu]\nmemory_fraction = 0.5\n");
  ASSERT_TRUE(host->LoadAll().ok());
  auto warnings = host->UnusedSections();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].ToString(), "test.toml:1:1: devices.tpu: no plugin named 'tpu' is loaded; section ignored");
}

TEST(PluginHost, DisabledPluginsAreNotLoaded) {
  auto host = IsolatedHost({WEFT_BUILT_PLUGIN_DIR}, "[plugins]\ndisable = [\"cpu\"]\n");
  ASSERT_TRUE(host->LoadAll().ok());
  const PluginInfo* cpu = host->FindPlugin("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->state, PluginState::kDisabled);
  EXPECT_EQ(cpu->reason, "disabled by plugins.disable in test.toml");
  // Other device plugins of the build (opencl) may still be loaded.
  EXPECT_EQ(host->devices().Find("CPU"), nullptr);
}

TEST(PluginHost, SearchPathOrderIsConfigThenEnvironmentThenBuiltIn) {
  config::Config config = MakeConfig();
  config.plugins.paths = {"/from/config"};
  setenv("WEFT_PLUGIN_PATH", "/env/a::/env/b", 1);
  PluginHostOptions options;
  options.builtin_folder = "/built/in";
  PluginHost host(config, options);
  EXPECT_EQ(host.SearchPath(), (std::vector<std::string>{"/from/config", "/env/a", "/env/b", "/built/in"}));
  unsetenv("WEFT_PLUGIN_PATH");
}

TEST(PluginHost, AFileReachedTwiceIsLoadedOnce) {
  auto host = IsolatedHost({WEFT_BUILT_PLUGIN_DIR, WEFT_BUILT_PLUGIN_DIR "/weft_device_cpu.so"});
  ASSERT_TRUE(host->LoadAll().ok());
  int cpu = 0;
  for (const auto& plugin : host->plugins()) cpu += plugin.name == "cpu" ? 1 : 0;
  EXPECT_EQ(cpu, 1);
}

TEST(PluginHost, MissingFileIsRefusedWithTheReason) {
  PluginHost host(MakeConfig(), Isolated());
  Status status = host.Load("/nonexistent/weft_device_x.so");
  EXPECT_EQ(status.message(),
            "plugin /nonexistent/weft_device_x.so refused: cannot open it: No such file or directory");
}

TEST(PluginHost, DefaultFolderIsNextToLibweft) {
  EXPECT_EQ(std::filesystem::path(DefaultPluginDir()).lexically_normal(),
            std::filesystem::path(WEFT_BUILT_PLUGIN_DIR).lexically_normal());
}

TEST(PluginHost, APluginWrittenInC) {
  PluginHost host(MakeConfig(), Isolated());
  ASSERT_TRUE(host.Load(PluginFile("c_plugin", "weft_device_cdev.so")).ok());
  const DevicePlugin* cdev = host.devices().Find("CDEV");
  ASSERT_NE(cdev, nullptr);
  auto device = cdev->Open(0);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto props = (*device)->Properties();
  ASSERT_TRUE(props.ok());
  EXPECT_EQ(props->model, "C99 test device");
  EXPECT_EQ(props->alignment, 16u);
  auto missing = cdev->Open(1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "opening /device:CDEV:1: only /device:CDEV:0 exists");
}

TEST(PluginHost, TransportAndOptimizerRegistries) {
  auto host = IsolatedHost({PluginFile("kinds", "")}, "[optimizers.nullopt]\n");
  ASSERT_TRUE(host->LoadAll().ok());
  const TransportPlugin* transport = host->transports().Find("null");
  ASSERT_NE(transport, nullptr);
  EXPECT_EQ(transport->plugin_name, "nulltransport");
  const OptimizerPlugin* optimizer = host->optimizers().Find("nullopt");
  ASSERT_NE(optimizer, nullptr);
  ASSERT_EQ(optimizer->hyperparameters.size(), 1u);
  EXPECT_EQ(optimizer->hyperparameters[0].key, "momentum");
  EXPECT_EQ(config::DescribeExpected(optimizer->hyperparameters[0]), "a number in [0, 1]");
  EXPECT_EQ(host->FindPlugin("nulltransport")->kind, PluginKind::kTransport);
}

TEST(PluginHost, LoadsACollectivesPlugin) {
  PluginHost host(MakeConfig(), Isolated());
  const std::string file = PluginFile("coll_0", "weft_collectives_nullcoll.so");
  ASSERT_TRUE(host.Load(file).ok());
  const CollectivesPlugin* coll = host.collectives().Find("nullcoll");
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(coll->plugin_name, "nullcoll");
  EXPECT_TRUE(coll->Serves("CPU", WEFT_DTYPE_F32));
  EXPECT_FALSE(coll->Serves("CPU", WEFT_DTYPE_F64));
  EXPECT_FALSE(coll->Serves("CUDA"));
  EXPECT_EQ(host.FindPlugin("nullcoll")->kind, PluginKind::kCollectives);
  EXPECT_EQ(KindName(PluginKind::kCollectives), "collectives");
}

// --- Plugins linked into the program (linked_plugins.h, the lite build) ---------------

namespace linked {
weft_status_t Unavailable(const weft_host_t* host, const weft_plugin_t** out) {
  *out = nullptr;
  return host->status_new(WEFT_UNAVAILABLE, "no frobnicator here");
}
weft_status_t NoDescription(const weft_host_t*, const weft_plugin_t** out) {
  *out = nullptr;
  return nullptr;
}
weft_status_t Throws(const weft_host_t*, const weft_plugin_t**) { throw std::runtime_error("boom"); }
}  // namespace linked

TEST(PluginHost, LoadsLinkedPluginsByName) {
  RegisterLinkedPlugin("test_unavailable", linked::Unavailable);
  EXPECT_EQ(FindLinkedPlugin("test_unavailable"), &linked::Unavailable);
  EXPECT_EQ(FindLinkedPlugin("test_never_registered"), nullptr);
  PluginHost host(MakeConfig(), Isolated());
  ASSERT_TRUE(host.Load("linked:test_unavailable").ok());
  ASSERT_EQ(host.plugins().size(), 1u);
  EXPECT_EQ(host.plugins()[0].path, "linked:test_unavailable");
  EXPECT_EQ(host.plugins()[0].state, PluginState::kUnavailable);
  EXPECT_EQ(host.plugins()[0].reason, "no frobnicator here");
  // Loaded once per host, as a file is.
  EXPECT_TRUE(host.Load("linked:test_unavailable").ok());
  EXPECT_EQ(host.plugins().size(), 1u);
}

TEST(PluginHost, RefusesLinkedPluginsThatAreNotThereOrFailInit) {
  RegisterLinkedPlugin("test_no_description", linked::NoDescription);
  RegisterLinkedPlugin("test_throws", linked::Throws);
  EXPECT_EQ(RefusalOf("linked:test_no_description"),
            "plugin linked:test_no_description refused: init returned OK but no plugin description");
  EXPECT_EQ(RefusalOf("linked:test_throws"),
            "plugin linked:test_throws refused: init let a C++ exception escape (boom); plugins must run entry "
            "points inside weft::sdk::Guard");
  const std::string missing = RefusalOf("linked:nope");
  EXPECT_TRUE(
      missing.starts_with("plugin linked:nope refused: no plugin 'nope' is linked into this program "
                          "(linked in: "))
      << missing;
  EXPECT_NE(missing.find("test_throws"), std::string::npos) << missing;
}

}  // namespace
}  // namespace weft::plugin
