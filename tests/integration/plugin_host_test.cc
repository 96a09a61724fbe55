// The plugin host against real plugin files: the CPU plugin and the
// deliberately broken plugins of tests/plugins/. Every refusal is checked
// by its message.
#include "core/plugin/plugin_host.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/base/logging.h"

namespace weft::plugin {
namespace {

const std::string kRoot = WEFT_TEST_PLUGIN_ROOT;

std::string PluginFile(const std::string& folder, const std::string& file) { return kRoot + "/" + folder + "/" + file; }

config::Config MakeConfig(const std::string& toml = "") {
  auto config = config::ParseConfig(toml, "test.toml", "/");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

// A host that sees only what a test gives it: no $WEFT_PLUGIN_PATH, no
// built-in folder.
PluginHostOptions Isolated() {
  PluginHostOptions options;
  options.use_environment = false;
  options.use_builtin_folder = false;
  return options;
}

struct LogCapture {
  LogCapture() {
    old = SetLogSink([this](const LogRecord& r) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(StrCat(LogLevelName(r.level), ": ", r.message));
    });
  }
  ~LogCapture() { SetLogSink(old); }
  std::mutex mutex;
  std::vector<std::string> lines;
  LogSink old;
};

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

TEST(PluginHost, RefusesAFileThatIsNotASharedLibrary) {
  const std::string file = PluginFile("garbage", "weft_device_garbage.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file + " refused: not a loadable shared library: invalid ELF header");
}

TEST(PluginHost, RefusesALibraryWithoutTheEntrySymbol) {
  const std::string file = PluginFile("no_entry", "weft_device_noentry.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: no entry symbol weft_plugin_init_v1; it is not a Weft "
                                 "plugin, or was built without WEFT_PLUGIN_EXPORT");
}

TEST(PluginHost, RefusesAnotherMajorVersionNamingBoth) {
  const std::string file = PluginFile("abi_v2", "weft_device_abi_v2.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: built for plugin ABI v2 (it exports "
                                 "weft_plugin_init_v2), but this weft speaks ABI v1." +
                                 std::to_string(WEFT_ABI_VERSION_MINOR) +
                                 "; rebuild the plugin against a matching Weft SDK");
}

TEST(PluginHost, RefusesADeclaredMajorVersionMismatch) {
  const std::string file = PluginFile("abi_major_field", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file + " refused: built for plugin ABI v2." +
                                 std::to_string(WEFT_ABI_VERSION_MINOR) + ", but this weft speaks ABI v1." +
                                 std::to_string(WEFT_ABI_VERSION_MINOR) +
                                 "; rebuild the plugin against a matching Weft SDK");
}

TEST(PluginHost, RefusesATableSmallerThanTheAbi) {
  const std::string file = PluginFile("small_table", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file),
            StrCat("plugin ", file,
                   " refused: weft_device_plugin_t.struct_size is 16 bytes, "
                   "smaller than the ",
                   WEFT_DEVICE_PLUGIN_SIZE_V1_0, " bytes of ABI 1.0; rebuild the plugin against the Weft SDK"));
}

TEST(PluginHost, RefusesAMissingRequiredMember) {
  const std::string file = PluginFile("missing_member", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: required member "
                                 "weft_device_plugin_t.copy_device_to_device is NULL");
}

TEST(PluginHost, RefusesAnInitError) {
  const std::string file = PluginFile("init_error", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: init failed: INTERNAL: cannot open /dev/frobnicator: "
                                 "permission denied");
}

TEST(PluginHost, GuardTurnsAnExceptionInInitIntoARefusal) {
  const std::string file = PluginFile("init_throws", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: init failed: INTERNAL: uncaught C++ exception: "
                                 "frobnicator exploded");
}

TEST(PluginHost, CatchesAnExceptionThatEscapesAnUnguardedPlugin) {
  const std::string file = PluginFile("unguarded_throw", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: init let a C++ exception escape (boom); plugins must "
                                 "run entry points inside weft::sdk::Guard");
}

TEST(PluginHost, RefusesABadOptionDeclaration) {
  const std::string file = PluginFile("bad_option_default", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: option 'count': default \"\\\"many\\\"\" is not an "
                                 "integer in [1, 8]");
}

TEST(PluginHost, RefusesAConfigureError) {
  const std::string file = PluginFile("configure_error", "weft_device_testdev.so");
  EXPECT_EQ(RefusalOf(file), "plugin " + file +
                                 " refused: configure failed: INVALID_ARGUMENT: the frobnicator "
                                 "rejects this configuration");
}

TEST(PluginHost, RefusesASecondPluginWithTheSameName) {
  PluginHost host(MakeConfig(), Isolated());
  const std::string a = PluginFile("dup", "weft_device_dup_a.so");
  const std::string b = PluginFile("dup", "weft_device_dup_b.so");
  ASSERT_TRUE(host.Load(a).ok());
  Status status = host.Load(b);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "plugin " + b + " refused: name 'dup' is already taken by " + a);
  EXPECT_NE(host.devices().Find("DUPA"), nullptr);
  EXPECT_EQ(host.devices().Find("DUPB"), nullptr);
}

TEST(PluginHost, RefusesASecondPluginForTheSameDeviceType) {
  PluginHost host(MakeConfig(), Isolated());
  const std::string a = PluginFile("same_type", "weft_device_samea.so");
  const std::string b = PluginFile("same_type", "weft_device_sameb.so");
  ASSERT_TRUE(host.Load(a).ok());
  Status status = host.Load(b);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "plugin " + b +
                                  " refused: device type 'SAME' is already provided by plugin "
                                  "'samea' (" +
                                  a + ")");
}

TEST(PluginHost, UnavailableAtInitIsLoggedAndSkipped) {
  LogCapture log;
  SetLogLevel(LogLevel::kDebug);
  config::Config config = MakeConfig();
  config.plugins.paths = {PluginFile("unavailable_init", ""), WEFT_BUILT_PLUGIN_DIR};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  const PluginInfo* frob = host.FindPlugin("frob");
  ASSERT_NE(frob, nullptr);
  EXPECT_EQ(frob->state, PluginState::kUnavailable);
  EXPECT_EQ(frob->reason, "no frobnicator driver (libfrob.so.1 not found)");
  // The process goes on: the CPU plugin after it is loaded.
  ASSERT_NE(host.FindPlugin("cpu"), nullptr);
  EXPECT_EQ(host.FindPlugin("cpu")->state, PluginState::kLoaded);
  const std::string expected = "debug: plugin " + PluginFile("unavailable_init", "weft_device_frob.so") +
                               " is unavailable: no frobnicator driver (libfrob.so.1 not found)";
  EXPECT_NE(std::find(log.lines.begin(), log.lines.end(), expected), log.lines.end())
      << "log had: " << StrJoin(log.lines, "\n");
}

TEST(PluginHost, UnavailableFromDeviceCountIsLoggedAndSkipped) {
  LogCapture log;
  SetLogLevel(LogLevel::kDebug);
  config::Config config = MakeConfig();
  config.plugins.paths = {PluginFile("unavailable_count", ""), WEFT_BUILT_PLUGIN_DIR};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  const PluginInfo* frob = host.FindPlugin("frob");
  ASSERT_NE(frob, nullptr);
  EXPECT_EQ(frob->state, PluginState::kUnavailable);
  EXPECT_EQ(frob->reason, "no frobnicator found on this machine");
  EXPECT_EQ(host.devices().Find("TESTDEV"), nullptr);
  EXPECT_NE(host.devices().Find("CPU"), nullptr);
  const std::string expected = "debug: plugin 'frob' (" + PluginFile("unavailable_count", "weft_device_frob.so") +
                               ") is unavailable: no frobnicator found on this machine";
  EXPECT_NE(std::find(log.lines.begin(), log.lines.end(), expected), log.lines.end())
      << "log had: " << StrJoin(log.lines, "\n");
}

TEST(PluginHost, RefusalsAreLoggedAndTheProcessGoesOn) {
  LogCapture log;
  config::Config config = MakeConfig();
  config.plugins.paths = {PluginFile("garbage", ""), WEFT_BUILT_PLUGIN_DIR};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  EXPECT_NE(host.devices().Find("CPU"), nullptr);
  const std::string file = PluginFile("garbage", "weft_device_garbage.so");
  const std::string expected =
      "warning: plugin " + file + " refused: not a loadable shared library: invalid ELF header";
  EXPECT_NE(std::find(log.lines.begin(), log.lines.end(), expected), log.lines.end())
      << "log had: " << StrJoin(log.lines, "\n");
}

TEST(PluginHost, StrictModeStopsAtTheFirstRefusal) {
  config::Config config = MakeConfig("[plugins]\nstrict = true\n");
  config.plugins.paths = {PluginFile("garbage", ""), WEFT_BUILT_PLUGIN_DIR};
  PluginHost host(config, Isolated());
  Status status = host.LoadAll();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "plugin " + PluginFile("garbage", "weft_device_garbage.so") +
                                  " refused: not a loadable shared library: invalid ELF header");
  EXPECT_EQ(host.devices().Find("CPU"), nullptr);
}

TEST(PluginHost, PluginSectionIsValidatedAgainstItsDeclaration) {
  config::Config config = MakeConfig("[devices.testdev]\ncount = 9\nmode = \"slow\"\ncuont = 1\n");
  config.plugins.paths = {PluginFile("good", "")};
  PluginHost host(config, Isolated());
  Status status = host.LoadAll();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "test.toml:2:9: devices.testdev.count: expected an integer in [1, 8], got 9\n"
            "test.toml:3:8: devices.testdev.mode: expected one of \"fast\", \"exact\", got \"slow\"\n"
            "test.toml:4:1: devices.testdev.cuont: unknown key; did you mean 'count'?");
}

TEST(PluginHost, PluginReadsItsValidatedOptions) {
  config::Config config = MakeConfig("[devices.testdev]\ncount = 3\n");
  config.plugins.paths = {PluginFile("good", "")};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  const DevicePlugin* dev = host.devices().Find("TESTDEV");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(*dev->DeviceCount(), 3);
}

TEST(PluginHost, UnusedSectionsAreWarnings) {
  // (devices.cuda would be read by the CUDA plugin where it is built.)
  config::Config config = MakeConfig("[devices.tpu]\nmemory_fraction = 0.5\n");
  config.plugins.paths = {WEFT_BUILT_PLUGIN_DIR};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  auto warnings = host.UnusedSections();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].ToString(), "test.toml:1:1: devices.tpu: no plugin named 'tpu' is loaded; section ignored");
}

TEST(PluginHost, DisabledPluginsAreNotLoaded) {
  config::Config config = MakeConfig("[plugins]\ndisable = [\"cpu\"]\n");
  config.plugins.paths = {WEFT_BUILT_PLUGIN_DIR};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  const PluginInfo* cpu = host.FindPlugin("cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->state, PluginState::kDisabled);
  EXPECT_EQ(cpu->reason, "disabled by plugins.disable in test.toml");
  // Other device plugins of the build (opencl) may still be loaded.
  EXPECT_EQ(host.devices().Find("CPU"), nullptr);
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
  config::Config config = MakeConfig();
  config.plugins.paths = {WEFT_BUILT_PLUGIN_DIR, WEFT_BUILT_PLUGIN_DIR "/weft_device_cpu.so"};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  int cpu = 0;
  for (const auto& plugin : host.plugins()) cpu += plugin.name == "cpu" ? 1 : 0;
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
  config::Config config = MakeConfig("[optimizers.nullopt]\n");
  config.plugins.paths = {PluginFile("kinds", "")};
  PluginHost host(config, Isolated());
  ASSERT_TRUE(host.LoadAll().ok());
  const TransportPlugin* transport = host.transports().Find("null");
  ASSERT_NE(transport, nullptr);
  EXPECT_EQ(transport->plugin_name, "nulltransport");
  const OptimizerPlugin* optimizer = host.optimizers().Find("nullopt");
  ASSERT_NE(optimizer, nullptr);
  ASSERT_EQ(optimizer->hyperparameters.size(), 1u);
  EXPECT_EQ(optimizer->hyperparameters[0].key, "momentum");
  EXPECT_EQ(config::DescribeExpected(optimizer->hyperparameters[0]), "a number in [0, 1]");
  EXPECT_EQ(host.FindPlugin("nulltransport")->kind, PluginKind::kTransport);
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

TEST(PluginHost, RefusesABadCollectivesTable) {
  const std::string small = PluginFile("coll_1", "weft_collectives_nullcoll.so");
  EXPECT_EQ(RefusalOf(small),
            StrCat("plugin ", small, " refused: weft_collectives_plugin_t.struct_size is 16 bytes, smaller than the ",
                   WEFT_COLLECTIVES_PLUGIN_SIZE_V1_2, " bytes of ABI 1.2; rebuild the plugin against the Weft SDK"));
  const std::string null = PluginFile("coll_2", "weft_collectives_nullcoll.so");
  EXPECT_EQ(RefusalOf(null),
            StrCat("plugin ", null, " refused: required member weft_collectives_plugin_t.all_reduce is NULL"));
  const std::string old = PluginFile("coll_3", "weft_collectives_nullcoll.so");
  EXPECT_EQ(RefusalOf(old), StrCat("plugin ", old,
                                   " refused: kind is collectives but its description predates ABI 1.2 (no "
                                   "collectives member); rebuild the plugin against the Weft SDK"));
  const std::string dtype = PluginFile("coll_4", "weft_collectives_nullcoll.so");
  EXPECT_EQ(RefusalOf(dtype), StrCat("plugin ", dtype, " refused: dtypes[1] is 7, not a numeric element type"));
}

}  // namespace
}  // namespace weft::plugin
