// The `weft` binary end to end: real processes, real plugin files, real
// config files. Every error path checks the message and the exit code.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/strings.h"
#include "tests/integration/subprocess.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;

const std::string kRoot = WEFT_TEST_PLUGIN_ROOT;

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           StrCat("weft_cli_test_", getpid(), "_",
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs weft with an environment that does not leak the caller's
  // WEFT_PLUGIN_PATH.
  ProcessResult Weft(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), WEFT_CLI);
    if (env.count("WEFT_PLUGIN_PATH") == 0) env["WEFT_PLUGIN_PATH"] = "";
    return testing::Run(args, env);
  }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

TEST_F(Cli, PluginsListsTheCpuPluginAsLoaded) {
  ProcessResult r = Weft({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(StartsWith(r.out, "NAME  KIND    ABI  VERSION  STATUS  PATH\n")) << r.out;
  EXPECT_NE(r.out.find("cpu   device  1.0  0.1.0    loaded  " WEFT_BUILT_PLUGIN_DIR
                       "/weft_device_cpu.so\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err, "");
}

TEST_F(Cli, PluginsAsJson) {
  ProcessResult r = Weft({"plugins", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"name\":\"cpu\",\"kind\":\"device\",\"abi\":\"1.0\""), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"status\":\"loaded\""), std::string::npos);
}

TEST_F(Cli, PluginsOptionsListsDeclaredKeys) {
  ProcessResult r = Weft({"plugins", "--options"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[devices.cpu]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  count  an integer in [1, 64]  1"), std::string::npos) << r.out;
}

TEST_F(Cli, DevicesShowsTheCpuDevice) {
  ProcessResult r = Weft({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(StartsWith(r.out, "/device:CPU:0  (plugin cpu)\n")) << r.out;
  EXPECT_NE(r.out.find("  alignment      64 B\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  host visible   yes\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  memory         "), std::string::npos) << r.out;
}

TEST_F(Cli, DevicesFollowsTheConfig) {
  const std::string config = Write("two.toml", "[devices.cpu]\ncount = 2\n");
  ProcessResult r = Weft({"--config", config, "devices", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"name\":\"/device:CPU:0\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"name\":\"/device:CPU:1\""), std::string::npos) << r.out;
}

TEST_F(Cli, DevicesWithNoDevicePluginIsAnError) {
  const std::string config = Write("none.toml", "[plugins]\ndisable = [\"cpu\"]\n");
  ProcessResult r = Weft({"--config", config, "devices"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: no devices: no device plugin is loaded (see `weft plugins`)\n");
}

TEST_F(Cli, ConfigCheckPrintsOkForTheShippedDefault) {
  ProcessResult r = Weft({"config", "check", WEFT_SOURCE_DIR "/configs/local.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "OK\n");
}

TEST_F(Cli, ConfigCheckReportsAWrongTypeWithPosition) {
  const std::string config = Write("local.toml", "# threads\n[runtime]\ninter_op_threads = \"two\"\n");
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, config + ":3:20: runtime.inter_op_threads: expected an integer >= 1, got \"two\"\n");
}

TEST_F(Cli, ConfigCheckReportsPluginSectionErrors) {
  const std::string config = Write("cpu.toml", "[devices.cpu]\ncount = \"lots\"\n");
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, config + ":2:9: devices.cpu.count: expected an integer in [1, 64], got \"lots\"\n");
}

TEST_F(Cli, ConfigCheckWarnsAboutSectionsNobodyReads) {
  const std::string config = Write("cuda.toml", "[devices.cuda]\nmemory_fraction = 0.5\n");
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "warning: " + config +
                       ":1:1: devices.cuda: no plugin named 'cuda' is loaded; section ignored\nOK\n");
}

TEST_F(Cli, ConfigCheckOfAMissingFile) {
  ProcessResult r = Weft({"config", "check", (dir_ / "nope.toml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "cannot read config file \"" + (dir_ / "nope.toml").string() +
                       "\": No such file or directory\n");
}

TEST_F(Cli, BadGlobalConfigStopsEveryCommand) {
  const std::string config = Write("bad.toml", "[logging]\nlevel = \"loud\"\n");
  ProcessResult r = Weft({"--config", config, "plugins"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: " + config +
                       ":2:9: logging.level: expected one of \"trace\", \"debug\", \"info\", "
                       "\"warning\", \"error\", \"off\", got \"loud\"\n");
}

TEST_F(Cli, BadLogLevelFlag) {
  ProcessResult r = Weft({"--log-level", "loud", "version"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: --log-level: expected one of trace, debug, info, warning, error, off; "
            "got \"loud\"\n");
}

TEST_F(Cli, ConfigDefaultPrintsLocalToml) {
  ProcessResult r = Weft({"config", "default"});
  ASSERT_EQ(r.exit_code, 0);
  std::ifstream in(WEFT_SOURCE_DIR "/configs/local.toml");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(r.out, text.str());
}

TEST_F(Cli, ConfigKeysDocumentsTheCore) {
  ProcessResult r = Weft({"config", "keys"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("runtime.inter_op_threads  an integer >= 1"), std::string::npos) << r.out;
}

TEST_F(Cli, RefusedPluginsAreListedWithTheirReason) {
  ProcessResult r = Weft({"plugins"}, {{"WEFT_PLUGIN_PATH", kRoot + "/garbage:" + kRoot + "/abi_v2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string garbage = kRoot + "/garbage/weft_device_garbage.so";
  const std::string v2 = kRoot + "/abi_v2/weft_device_abi_v2.so";
  EXPECT_NE(r.out.find("-     -       -    -        refused  " + garbage), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(garbage + ": refused: not a loadable shared library: invalid ELF header\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(v2 + ": refused: built for plugin ABI v2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu   device  1.0  0.1.0    loaded"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("plugin " + garbage + " refused: not a loadable shared library"),
            std::string::npos)
      << r.err;
}

TEST_F(Cli, UnavailablePluginsAreListedNotFatal) {
  ProcessResult r = Weft({"plugins"}, {{"WEFT_PLUGIN_PATH", kRoot + "/unavailable_count"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("frob: unavailable: no frobnicator found on this machine\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("cpu   device  1.0  0.1.0    loaded"), std::string::npos) << r.out;
}

TEST_F(Cli, StrictModeMakesARefusalFatal) {
  const std::string config = Write("strict.toml", "[plugins]\nstrict = true\n");
  ProcessResult r =
      Weft({"--config", config, "plugins"}, {{"WEFT_PLUGIN_PATH", kRoot + "/init_throws"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: plugin " + kRoot +
                       "/init_throws/weft_device_testdev.so refused: init failed: INTERNAL: "
                       "uncaught C++ exception: frobnicator exploded\n");
}

TEST_F(Cli, APluginBugIsAnInternalError) {
  ProcessResult r = Weft({"devices"}, {{"WEFT_PLUGIN_PATH", kRoot + "/properties_internal"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "weft: error: /device:TESTDEV:0: properties: device table corrupted (test)\n");
}

TEST_F(Cli, VersionNamesReleaseAndAbi) {
  ProcessResult r = Weft({"version"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(StartsWith(r.out, "weft 0.1.0 (commit ")) << r.out;
  EXPECT_NE(r.out.find("\nplugin ABI 1.0\n"), std::string::npos) << r.out;
  r = Weft({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "weft 0.1.0\n");
}

TEST_F(Cli, EveryCommandHasHelp) {
  for (std::vector<std::string> args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"version", "--help"},
                                             {"plugins", "--help"},
                                             {"devices", "--help"},
                                             {"config", "--help"},
                                             {"config", "check", "--help"},
                                             {"config", "default", "--help"},
                                             {"config", "keys", "--help"}}) {
    ProcessResult r = Weft(args);
    EXPECT_EQ(r.exit_code, 0) << StrJoin(args, " ");
    EXPECT_NE(r.out.find("Usage: "), std::string::npos) << StrJoin(args, " ") << r.out;
  }
}

TEST_F(Cli, UnknownCommandIsAUserError) {
  ProcessResult r = Weft({"frobnicate"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: unknown command 'frobnicate'; the commands are version, plugins, "
            "devices, config\nRun `weft --help` for usage.\n");
}

TEST_F(Cli, UnknownFlagIsAUserError) {
  ProcessResult r = Weft({"plugins", "--frobnicate"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: The following argument was not expected: --frobnicate\nRun `weft "
            "--help` for usage.\n");
}

TEST_F(Cli, NoCommandIsAUserError) {
  ProcessResult r = Weft({});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("weft: error: "), std::string::npos) << r.err;
}

TEST_F(Cli, MissingConfigFileIsAUserError) {
  ProcessResult r = Weft({"--config", "/nonexistent/site.toml", "plugins"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: cannot read config file \"/nonexistent/site.toml\": No such file or "
            "directory\n");
}

}  // namespace
}  // namespace weft
