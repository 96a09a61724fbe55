// The `weft` binary end to end: real processes, real plugin files, real
// config files. Every error path checks the message and the exit code.
// This file: plugins, devices, placement and configs; graph files and the
// other commands are in cli_graph_test.cc, the fixture in cli_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/tensor/npy.h"
#include "tests/integration/cli_fixture.h"
#include "tests/support/output_text.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;

TEST_F(Cli, PluginsListsTheCpuPluginAsLoaded) {
  ProcessResult r = Weft({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Columns are as wide as their widest cell, so spaces are matched as runs.
  EXPECT_TRUE(r.out.starts_with("NAME ")) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"NAME", "KIND", "ABI", "VERSION", "STATUS", "PATH"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cpu", "device", "1.3", "0.1.0", "loaded", WEFT_BUILT_PLUGIN_DIR "/weft_device_cpu.so"}))
      << r.out;
  // The optimizer plugins built with the tree are listed too.
  for (const char* name : {"sgd", "momentum", "adam", "adamw", "rmsprop", "adagrad"}) {
    EXPECT_TRUE(HasRow(r.out, {name, "optimizer", "1.3", "0.1.0", "loaded"})) << name << "\n" << r.out;
  }
  EXPECT_EQ(r.err, "");
}

TEST_F(Cli, PluginsAsJson) {
  ProcessResult r = Weft({"plugins", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("{\"name\":\"cpu\",\"kind\":\"device\",\"abi\":\"1.3\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"status\":\"loaded\""), std::string::npos);
}

TEST_F(Cli, PluginsOptionsListsDeclaredKeys) {
  ProcessResult r = Weft({"plugins", "--options"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[devices.cpu]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  count               an integer in [1, 64]       1 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  allocator_cache_mb  an integer in [0, 1048576]"), std::string::npos) << r.out;
}

TEST_F(Cli, DevicesShowsTheCpuDevice) {
  ProcessResult r = Weft({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("/device:CPU:0  (plugin cpu)\n")) << r.out;
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
  const std::string config = Write("none.toml", "[plugins]\ndisable = [\"cpu\", \"opencl\"]\n");
  ProcessResult r = Weft({"--config", config, "devices"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: no devices: no device plugin is loaded (see `weft plugins`)\n");
}

TEST_F(Cli, PlaceExplainShowsDevicesReasonsAndSendRecvPairs) {
  const std::string config =
      Write("split.toml", "[devices.cpu]\ncount = 2\n[placement.pins]\n\"dense2/*\" = \"/device:CPU:1\"\n");
  ProcessResult r = Weft({"--config", config, "place", WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt", "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fashion_mlp.wgt: 64 nodes on 2 devices\n"), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"dense2/MatMul", "MatMul", "/device:CPU:1", "pinned", "by", "placement.pins",
                             "\"dense2/*\":", "/device:CPU:1"}))
      << r.out;
  EXPECT_TRUE(HasRow(r.out, {"dense1/kernel/init/assign", "Assign", "/device:CPU:0", "with", "its", "colocation",
                             "group", "(uses", "the", "resource", "of", "\"dense1/kernel\"):"}))
      << r.out;
  EXPECT_NE(r.out.find("Send/Recv pairs (4):"), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"dense1/Relu", "f32[?,512]", "/device:CPU:0", "/device:CPU:1",
                             "dense1/Relu/_send_0_to_CPU_1", "dense1/Relu/_recv_0_from_CPU_0", "dense2/MatMul"}))
      << r.out;
  EXPECT_TRUE(HasRow(r.out, {"^dense2/bias/init/assign", "control", "/device:CPU:1", "/device:CPU:0"})) << r.out;
}

TEST_F(Cli, PlaceOnOneDeviceSaysSo) {
  ProcessResult r = Weft({"place", WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"transfers\":[]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("{\"name\":\"images\",\"op\":\"Placeholder\",\"device\":\"/device:CPU:0\""), std::string::npos)
      << r.out;
}

TEST_F(Cli, PlaceWithAPinToAMissingDeviceIsAUserError) {
  const std::string config = Write("bad.toml", "[placement.pins]\n\"dense1/*\" = \"/device:OPENCL:7\"\n");
  ProcessResult r = Weft({"--config", config, "place", WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("weft: error: placing " WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt: placement.pins "
                       "\"dense1/*\" = \"/device:OPENCL:7\" ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("bad.toml:2:1): this process has no such device (devices: /device:CPU:0"), std::string::npos)
      << r.err;
}

TEST_F(Cli, ConfigCheckPrintsOkForTheShippedDefault) {
  ProcessResult r = Weft({"config", "check", WEFT_SOURCE_DIR "/configs/local.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "OK\n");
}

// A config that `weft config check` reports on, and what it must print:
// each problem with the file's path and the line and column of the key.
struct ConfigCase {
  const char* test;  // the case's name
  const char* file;
  std::string toml;
  int exit_code;
  std::function<std::string(const std::string& path)> expected;
};

std::ostream& operator<<(std::ostream& out, const ConfigCase& c) { return out << c.test; }

const std::vector<ConfigCase>& ConfigCases() {
  static const std::vector<ConfigCase> cases = {
      {"ReportsAWrongTypeWithPosition", "local.toml", "# threads\n[runtime]\ninter_op_threads = \"two\"\n", 1,
       [](const std::string& config) {
         return config + ":3:20: runtime.inter_op_threads: expected an integer >= 1, got \"two\"\n";
       }},
      {"ReportsPluginSectionErrors", "cpu.toml", "[devices.cpu]\ncount = \"lots\"\n", 1,
       [](const std::string& config) {
         return config + ":2:9: devices.cpu.count: expected an integer in [1, 64], got \"lots\"\n";
       }},
      // A device type no plugin of this tree serves.
      {"WarnsAboutSectionsNobodyReads", "tpu.toml", "[devices.tpu]\nmemory_fraction = 0.5\n", 0,
       [](const std::string& config) {
         return "warning: " + config + ":1:1: devices.tpu: no plugin named 'tpu' is loaded; section ignored\nOK\n";
       }},
      {"ReportsEveryClusterErrorWithItsPosition", "cluster.toml", R"([cluster]
transport = "tcp"
job = "worker"
task = 3
[cluster.jobs]
ps = ["127.0.0.1:7070"]
worker = ["127.0.0.1:7071", "127.0.0.1:7070", "localhost"]
)",
       1,
       [](const std::string& config) {
         return config + ":4:8: cluster.task: task 3 is out of range: job 'worker' has 3 tasks (0..2)\n" + config +
                ":7:29: cluster.jobs.worker[1]: address \"127.0.0.1:7070\" is also used by job 'ps' task 0 at " +
                config + ":6:7; give every task its own host:port\n" + config +
                ":7:47: cluster.jobs.worker[2]: expected host:port, got \"localhost\": it has no port (write "
                "host:port, e.g. \"127.0.0.1:7070\")\n";
       }},
      {"OfAnUnknownTransport", "quic.toml",
       "[cluster]\ntransport = \"quic\"\n[cluster.jobs]\nps = [\"127.0.0.1:7070\"]\n", 1,
       [](const std::string& config) {
         return config +
                ":2:13: cluster.transport: unknown transport \"quic\": not built in (tcp, zmq, rdma) and no loaded "
                "plugin serves it\n";
       }},
  };
  return cases;
}

class ConfigCheck : public Cli, public ::testing::WithParamInterface<ConfigCase> {};

TEST_P(ConfigCheck, PrintsWhatIsWrongWithItsPosition) {
  const ConfigCase& c = GetParam();
  const std::string config = Write(c.file, c.toml);
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  EXPECT_EQ(r.out, c.expected(config));
}

INSTANTIATE_TEST_SUITE_P(Cli, ConfigCheck, ::testing::ValuesIn(ConfigCases()),
                         [](const ::testing::TestParamInfo<ConfigCase>& param) {
                           return std::string(param.param.test);
                         });

TEST_F(Cli, ConfigCheckReportsAPinToADeviceThatDoesNotExist) {
  const std::string config = Write("pins.toml", "[placement.pins]\n\"dense1/*\" = \"/device:CPU:7\"\n");
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("placement.pins \"dense1/*\" = \"/device:CPU:7\" (" + config +
                            ":2:1): this process has no such device (devices: /device:CPU:0",
                        0),
            0u)
      << r.out;
  const std::string good = Write("pins_ok.toml", "[placement.pins]\n\"dense1/*\" = \"/device:CPU:0\"\n");
  r = Weft({"config", "check", good});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "OK\n");
}

TEST_F(Cli, ConfigCheckReportsDataFilesThatAreEmptyOrMissing) {
  const std::string config = Write("data.toml",
                                   "[data]\ntrain_images = \"\"\ntrain_labels = \"nowhere.idx\"\n"
                                   "test_images = \"sub\"\n");
  const std::string dir = fs::path(config).parent_path().string();
  fs::create_directories(dir + "/sub");
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out, config + ":2:16: data.train_images: is empty; name a file\n" + config +
                       ":3:16: data.train_labels: no such file: " + dir + "/nowhere.idx\n" + config +
                       ":4:15: data.test_images: " + dir + "/sub is a directory\n");
}

TEST_F(Cli, ConfigCheckAcceptsDataFilesThatExist) {
  ASSERT_FALSE(Write("images.idx", "x").empty());
  const std::string config = Write("data_ok.toml", "[data]\ntrain_images = \"images.idx\"\n");
  ProcessResult r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "OK\n");
}

TEST_F(Cli, ConfigCheckMatchesSyncReplicasToTheWorkers) {
  const std::string cluster = R"(
[cluster]
transport = "tcp"
[cluster.jobs]
ps = ["127.0.0.1:7070"]
worker = ["127.0.0.1:7071", "127.0.0.1:7072", "127.0.0.1:7073"]
)";
  // N + b = 2 + 2 = 4 workers, and there are 3.
  const std::string bad = Write("sync_bad.toml",
                                "[training]\nmode = \"sync\"\nreplicas_to_aggregate = 2\n"
                                "backup_workers = 2\n" +
                                    cluster);
  ProcessResult r = Weft({"config", "check", bad});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, bad + ":3:25: training.replicas_to_aggregate: 2 + training.backup_workers (" + bad +
                       ":4:18) 2 = 4 workers, but the cluster has 3; they must be equal (replicas_to_aggregate = 0 "
                       "means all the workers but the backup ones)\n");
  // b = 3 leaves no worker to aggregate.
  const std::string none = Write("sync_none.toml", "[training]\nmode = \"sync\"\nbackup_workers = 3\n" + cluster);
  r = Weft({"config", "check", none});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, none +
                       ":3:18: training.backup_workers: 3 backup workers leave none of the 3 workers to "
                       "aggregate; replicas_to_aggregate + backup_workers must equal the workers\n");
  // sync needs parameter servers.
  const std::string no_ps = Write("sync_no_ps.toml", R"([training]
mode = "sync"
[cluster]
transport = "tcp"
[cluster.jobs]
worker = ["127.0.0.1:7071", "127.0.0.1:7072"]
)");
  r = Weft({"config", "check", no_ps});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, no_ps +
                       ":2:8: training.mode: \"sync\" averages the workers' gradients on the parameter "
                       "servers, and [cluster] has no job named \"ps\"; add one, or use mode = \"allreduce\"\n");
  // N = 0 (the default) is the workers less the backups: 2 + 1 = 3.
  const std::string good = Write("sync_good.toml", "[training]\nmode = \"sync\"\nbackup_workers = 1\n" + cluster);
  r = Weft({"config", "check", good});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.out.ends_with("OK\n")) << r.out;
}

TEST_F(Cli, ConfigCheckSummarisesTheShippedCluster) {
  ProcessResult r = Weft({"config", "check", WEFT_SOURCE_DIR "/configs/cluster_local.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cluster: 2 jobs, 3 tasks (membership static); connect timeout 10000 ms, RPC timeout "
                       "60000 ms\n"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(HasRow(r.out, {"TASK", "ADDRESS", "TRANSPORT"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"/job:ps/task:0", "127.0.0.1:7070", "tcp"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"/job:worker/task:0", "127.0.0.1:7071", "tcp"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"/job:worker/task:1", "127.0.0.1:7072", "tcp"})) << r.out;
  EXPECT_EQ(r.out.find("this task"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("OK\n")) << r.out;
}

TEST_F(Cli, JobAndTaskFlagsNameThisTask) {
  ProcessResult r =
      Weft({"--job", "worker", "--task", "1", "config", "check", WEFT_SOURCE_DIR "/configs/cluster_local.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("this task: /job:worker/task:1\nOK\n"), std::string::npos) << r.out;

  r = Weft({"--job", "worker", "--task", "2", "config", "check", WEFT_SOURCE_DIR "/configs/cluster_local.toml"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(WithoutTransportWarnings(r.out), "--task 2 is out of range: job 'worker' has 2 tasks (0..1)\n");

  // A flag that overrides the file's [cluster] job.
  const std::string config = Write("ps.toml", R"([cluster]
job = "ps"
[cluster.jobs]
ps = ["127.0.0.1:7070"]
worker = ["127.0.0.1:7071"]
)");
  r = Weft({"config", "check", config});
  EXPECT_NE(r.out.find("this task: /job:ps/task:0\n"), std::string::npos) << r.out;
  r = Weft({"config", "check", config, "--job", "worker"});
  EXPECT_NE(r.out.find("this task: /job:worker/task:0\n"), std::string::npos) << r.out;

  r = Weft({"--task", "-1", "version"});
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(Cli, ConfigCheckChecksSchemesAgainstTheLoadedTransports) {
  // The test plugin "nulltransport" serves the scheme "null".
  const std::string config = Write("null.toml", R"([cluster]
transport = "null"
[cluster.jobs]
ps = ["127.0.0.1:7070"]
worker = ["127.0.0.1:7071"]
[cluster.transports]
worker = "zmq"
[plugins]
disable = ["zmq"]
)");
  ProcessResult r = Weft({"config", "check", config}, {{"WEFT_PLUGIN_PATH", kRoot + "/kinds"}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(r.out.starts_with("warning: " + config +
                                ":7:10: cluster.transports.worker: the \"zmq\" transport plugin is not loaded on "
                                "this machine (`weft plugins` says why); tasks started here cannot use it\n"))
      << r.out;
  EXPECT_TRUE(HasRow(r.out, {"/job:ps/task:0", "127.0.0.1:7070", "null"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"/job:worker/task:0", "127.0.0.1:7071", "zmq"})) << r.out;
  EXPECT_TRUE(r.out.ends_with("OK\n")) << r.out;
  // Without the plugin, "null" is no transport at all.
  r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(WithoutTransportWarnings(r.out),
            config +
                ":2:13: cluster.transport: unknown transport \"null\": not built in (tcp, zmq, rdma) and no "
                "loaded plugin serves it\n");
}

TEST_F(Cli, ConfigCheckOfALauncherClusterOutsideTheLauncher) {
  const std::string config = Write("mpi.toml", R"([cluster]
membership = "mpi"
[cluster.tasks]
ps = 1
worker = "rest"
)");
  ProcessResult r = Weft({"config", "check", config}, {{"OMPI_COMM_WORLD_RANK", ""}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("cluster: membership mpi, ranks per job ps = 1 (tcp), worker = \"rest\" (tcp), ports from "
                       "7070; addresses come from mpirun's environment when each task starts\n"),
            std::string::npos)
      << r.out;
  // As rank 1 of 3 under mpirun.
  r = Weft({"config", "check", config}, {{"OMPI_COMM_WORLD_RANK", "1"},
                                         {"OMPI_COMM_WORLD_SIZE", "3"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(HasRow(r.out, {"/job:worker/task:1", "127.0.0.1:7072", "tcp"})) << r.out;
  EXPECT_NE(r.out.find("this task: /job:worker/task:0\n"), std::string::npos) << r.out;
  r = Weft({"config", "check", config}, {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "three"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(WithoutTransportWarnings(r.out),
            config + ": membership = \"mpi\" (" + config +
                ":2:14), but OMPI_COMM_WORLD_SIZE is \"three\", not an integer >= 1\n");
}

TEST_F(Cli, ConfigCheckOfAMissingFile) {
  ProcessResult r = Weft({"config", "check", (dir_ / "nope.toml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "cannot read config file \"" + (dir_ / "nope.toml").string() + "\": No such file or directory\n");
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
  EXPECT_EQ(UserError({"--log-level", "loud", "version"}),
            "weft: error: --log-level: expected one of trace, debug, info, warning, error, off; got \"loud\"\n");
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
  EXPECT_TRUE(HasRow(r.out, {"runtime.inter_op_threads", "an", "integer", ">=", "1"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cluster.rpc_timeout_ms", "an", "integer", ">=", "1", "60000"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cluster.jobs.<job>", "an", "array", "of", "strings"})) << r.out;
}

TEST_F(Cli, RefusedPluginsAreListedWithTheirReason) {
  ProcessResult r = Weft({"plugins"}, {{"WEFT_PLUGIN_PATH", kRoot + "/garbage:" + kRoot + "/abi_v2"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string garbage = kRoot + "/garbage/weft_device_garbage.so";
  const std::string v2 = kRoot + "/abi_v2/weft_device_abi_v2.so";
  EXPECT_TRUE(HasRow(r.out, {"-", "-", "-", "-", "refused", garbage})) << r.out;
  EXPECT_NE(r.out.find(garbage + ": refused: not a loadable shared library: invalid ELF header\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(v2 + ": refused: built for plugin ABI v2"), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cpu", "device", "1.3", "0.1.0", "loaded"})) << r.out;
  EXPECT_NE(r.err.find("plugin " + garbage + " refused: not a loadable shared library"), std::string::npos) << r.err;
}

TEST_F(Cli, UnavailablePluginsAreListedNotFatal) {
  ProcessResult r = Weft({"plugins"}, {{"WEFT_PLUGIN_PATH", kRoot + "/unavailable_count"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("frob: unavailable: no frobnicator found on this machine\n"), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cpu", "device", "1.3", "0.1.0", "loaded"})) << r.out;
}

TEST_F(Cli, StrictModeMakesARefusalFatal) {
  const std::string config = Write("strict.toml", "[plugins]\nstrict = true\n");
  ProcessResult r = Weft({"--config", config, "plugins"}, {{"WEFT_PLUGIN_PATH", kRoot + "/init_throws"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: plugin " + kRoot +
                       "/init_throws/weft_device_testdev.so refused: init failed: INTERNAL: "
                       "uncaught C++ exception: frobnicator exploded\n");
}

TEST_F(Cli, APluginBugIsAnInternalError) {
  ProcessResult r = Weft({"devices"}, {{"WEFT_PLUGIN_PATH", kRoot + "/properties_internal"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "weft: error: /device:TESTDEV:0: properties: device table corrupted (test)\n");
}

}  // namespace
}  // namespace weft::testing
