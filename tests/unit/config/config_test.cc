#include "core/config/config.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <set>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace weft::config {
namespace {

namespace fs = std::filesystem;

Expected<Config> Parse(std::string_view text, std::string_view name = "local.toml") {
  return ParseConfig(text, name, "/etc/weft");
}

std::string ErrorOf(std::string_view text, std::string_view name = "local.toml") {
  auto config = Parse(text, name);
  EXPECT_FALSE(config.ok()) << "expected an error for:\n" << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  return config.status().message();
}

TEST(Config, EmbeddedDefaultIsConfigsLocalToml) {
  std::ifstream in(WEFT_SOURCE_DIR "/configs/local.toml");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(EmbeddedDefaultText(), text.str());
}

TEST(Config, EmbeddedDefaultParsesToTheDocumentedDefaults) {
  auto config = DefaultConfig();
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, "<embedded configs/local.toml>");
  EXPECT_FALSE(config->runtime.inter_op_threads.has_value());
  EXPECT_FALSE(config->runtime.intra_op_threads.has_value());
  EXPECT_TRUE(config->plugins.paths.empty());
  EXPECT_TRUE(config->plugins.disable.empty());
  EXPECT_FALSE(config->plugins.strict);
  EXPECT_EQ(config->logging.level, LogLevel::kInfo);
  EXPECT_EQ(config->logging.format, LogFormat::kText);
  EXPECT_EQ(config->logging.file, "");
  const Section* cpu = config->PluginSection("devices", "cpu");
  ASSERT_NE(cpu, nullptr);
  ASSERT_EQ(cpu->values.count("count"), 1u);
  EXPECT_EQ(cpu->values.at("count").i, 1);
}

TEST(Config, EmptyFileGivesDefaults) {
  auto config = Parse("");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->logging.level, LogLevel::kInfo);
  EXPECT_TRUE(config->plugin_sections.empty());
}

TEST(Config, ReadsEveryCoreKey) {
  auto config = Parse(R"(
[runtime]
inter_op_threads = 3
intra_op_threads = 5
[plugins]
paths = ["plugins", "/opt/weft/plugins"]
disable = ["cuda"]
strict = true
[logging]
level = "debug"
format = "json"
file = "/var/log/weft.log"
)");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->runtime.inter_op_threads, 3);
  EXPECT_EQ(config->runtime.intra_op_threads, 5);
  // Relative paths are relative to the file's directory.
  EXPECT_EQ(config->plugins.paths, (std::vector<std::string>{"/etc/weft/plugins", "/opt/weft/plugins"}));
  EXPECT_EQ(config->plugins.disable, std::vector<std::string>{"cuda"});
  EXPECT_TRUE(config->plugins.strict);
  EXPECT_EQ(config->logging.level, LogLevel::kDebug);
  EXPECT_EQ(config->logging.format, LogFormat::kJson);
  EXPECT_EQ(config->logging.file, "/var/log/weft.log");
}

TEST(Config, WrongTypeNamesFileLineColumnKeyAndValue) {
  // The exact form the Foundation issue asks for.
  EXPECT_EQ(ErrorOf("# threads\n[runtime]\ninter_op_threads = \"two\"\n"),
            "local.toml:3:20: runtime.inter_op_threads: expected an integer >= 1, got \"two\"");
}

TEST(Config, OutOfRangeValue) {
  EXPECT_EQ(ErrorOf("[runtime]\nintra_op_threads = 0\n"),
            "local.toml:2:20: runtime.intra_op_threads: expected an integer >= 1, got 0");
  EXPECT_EQ(ErrorOf("[runtime]\nintra_op_threads = 2.5\n"),
            "local.toml:2:20: runtime.intra_op_threads: expected an integer >= 1, got 2.5");
}

TEST(Config, ValueNotAmongChoices) {
  EXPECT_EQ(ErrorOf("[logging]\nlevel = \"verbose\"\n"),
            "local.toml:2:9: logging.level: expected one of \"trace\", \"debug\", \"info\", "
            "\"warning\", \"error\", \"off\", got \"verbose\"");
}

TEST(Config, ArraysAreCheckedElementByElement) {
  EXPECT_EQ(ErrorOf("[plugins]\npaths = [\"a\", 3]\n"),
            "local.toml:2:9: plugins.paths: expected an array of strings, got [\"a\", 3]");
  EXPECT_EQ(ErrorOf("[plugins]\npaths = \"a\"\n"),
            "local.toml:2:9: plugins.paths: expected an array of strings, got \"a\"");
}

TEST(Config, UnknownKeySuggestsTheClosest) {
  EXPECT_EQ(ErrorOf("[runtime]\nintra_op_thread = 3\n"),
            "local.toml:2:1: runtime.intra_op_thread: unknown key; did you mean "
            "'intra_op_threads'?");
}

TEST(Config, UnknownKeyFarFromAllListsThem) {
  EXPECT_EQ(ErrorOf("[logging]\nwhere = 1\n"),
            "local.toml:2:1: logging.where: unknown key; known keys: level, format, file");
}

TEST(Config, UnknownSection) {
  EXPECT_EQ(ErrorOf("[runtim]\n"), "local.toml:1:2: runtim: unknown section; did you mean 'runtime'?");
  EXPECT_EQ(
      ErrorOf("[cluster_of_things]\n"),
      "local.toml:1:2: cluster_of_things: unknown section; known sections: runtime, plugins, logging, model, data, "
      "training, schedule, checkpoint, placement, graph_optimizer, serving, cluster, devices, transports, optimizers, "
      "collectives, optimizer");
}

TEST(Config, SectionThatIsNotATable) {
  EXPECT_EQ(ErrorOf("runtime = 4\n"), "local.toml:1:11: runtime: expected a table [runtime], got 4");
  EXPECT_EQ(ErrorOf("devices = \"cpu\"\n"),
            "local.toml:1:11: devices: expected tables [devices.<plugin name>], got \"cpu\"");
  EXPECT_EQ(ErrorOf("[devices]\ncpu = 2\n"), "local.toml:2:7: devices.cpu: expected a table [devices.cpu], got 2");
}

TEST(Config, PluginSectionNamesAreSnakeCase) {
  EXPECT_EQ(ErrorOf("[devices.CUDA]\n"),
            "local.toml:1:10: devices.CUDA: plugin names are lower_snake_case (letters, digits "
            "and '_', starting with a letter)");
}

TEST(Config, EveryErrorIsReportedInFileOrder) {
  EXPECT_EQ(ErrorOf("[runtime]\ninter_op_threads = \"two\"\nintra_op_thread = 3\n\n"
                    "[logging]\nlevel = \"verbose\"\n\n[devics.cpu]\ncount = 2\n",
                    "bad.toml"),
            "bad.toml:2:20: runtime.inter_op_threads: expected an integer >= 1, got \"two\"\n"
            "bad.toml:3:1: runtime.intra_op_thread: unknown key; did you mean "
            "'intra_op_threads'?\n"
            "bad.toml:6:9: logging.level: expected one of \"trace\", \"debug\", \"info\", "
            "\"warning\", \"error\", \"off\", got \"verbose\"\n"
            "bad.toml:8:2: devics: unknown section; did you mean 'devices'?");
}

TEST(Config, SyntaxErrorHasPosition) {
  EXPECT_EQ(ErrorOf("[runtime]\ninter_op_threads = \n"),
            "local.toml:2:20: invalid TOML: Error while parsing key-value pair: expected "
            "value, saw '\\n'");
}

TEST(Config, PluginSectionsAreKeptWithPositions) {
  auto config = Parse("[devices.cpu]\ncount = 2\n[transports.tcp]\nport = 7070\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  const Section* tcp = config->PluginSection("transports", "tcp");
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->path, "transports.tcp");
  EXPECT_EQ(tcp->values.at("port").i, 7070);
  EXPECT_EQ(tcp->values.at("port").pos.ToString(), "local.toml:4:8");
  EXPECT_EQ(tcp->values.at("port").key_pos.ToString(), "local.toml:4:1");
  EXPECT_EQ(config->PluginSection("devices", "cuda"), nullptr);
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_config_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  fs::path dir_;
};

TEST_F(ConfigFileTest, LoadsAndResolvesPathsAgainstItsDirectory) {
  const std::string path = Write("site.toml", "[plugins]\npaths = [\"../lib\", \"p\"]\n");
  auto config = LoadConfigFile(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->source, path);
  EXPECT_EQ(config->plugins.paths[0], (dir_.parent_path() / "lib").string());
  EXPECT_EQ(config->plugins.paths[1], (dir_ / "p").string());
}

TEST_F(ConfigFileTest, ErrorsNameTheFileAsGiven) {
  const std::string path = Write("bad.toml", "[runtime]\ninter_op_threads = -1\n");
  auto config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), path + ":2:20: runtime.inter_op_threads: expected an integer >= 1, got -1");
}

TEST_F(ConfigFileTest, MissingFile) {
  auto config = LoadConfigFile((dir_ / "nope.toml").string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kNotFound);
  EXPECT_EQ(config.status().message(),
            "cannot read config file \"" + (dir_ / "nope.toml").string() + "\": No such file or directory");
}

TEST_F(ConfigFileTest, DirectoryIsNotAFile) {
  auto config = LoadConfigFile(dir_.string());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "config file \"" + dir_.string() + "\" is a directory");
}

// --- [schedule] ---------------------------------------------------------------------------

TEST(Config, ScheduleReadsEveryKeyOfItsKind) {
  auto config = Parse(
      "[schedule]\nkind = \"exponential\"\nwarmup_steps = 5\ndecay_steps = 10\n"
      "decay_rate = 0.5\nstaircase = true\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->schedule.kind, "exponential");
  EXPECT_EQ(config->schedule.warmup_steps, 5);
  EXPECT_EQ(config->schedule.decay_steps, 10);
  EXPECT_EQ(config->schedule.decay_rate, 0.5);
  EXPECT_TRUE(config->schedule.staircase);
  config = Parse("[schedule]\nkind = \"cosine\"\nmin_learning_rate = 1e-4\ntotal_steps = 100\n");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->schedule.min_learning_rate, 1e-4);
  EXPECT_EQ(config->schedule.total_steps, 100);
}

TEST(Config, ScheduleStepsMustBePositive) {
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"step\"\nstep_size = 0\n"),
            "local.toml:3:13: schedule.step_size: expected an integer >= 1, got 0");
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"exponential\"\ndecay_steps = -3\n"),
            "local.toml:3:15: schedule.decay_steps: expected an integer >= 1, got -3");
  EXPECT_EQ(ErrorOf("[schedule]\nwarmup_steps = -1\n"),
            "local.toml:2:16: schedule.warmup_steps: expected an integer >= 0, got -1");
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"linear\"\n"),
            "local.toml:2:8: schedule.kind: expected one of \"constant\", \"step\", \"exponential\", "
            "\"cosine\", got \"linear\"");
}

TEST(Config, ScheduleDecayFactorsMustBePositive) {
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"step\"\ngamma = 0.0\n"),
            "local.toml:3:9: schedule.gamma: expected a number > 0, got 0 (the rate would drop to 0)");
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"exponential\"\ndecay_rate = 0\n"),
            "local.toml:3:14: schedule.decay_rate: expected a number > 0, got 0 (the rate would drop to 0)");
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"step\"\ngamma = -0.5\n"),
            "local.toml:3:9: schedule.gamma: expected a number >= 0, got -0.5");
}

TEST(Config, TrainingModes) {
  auto config = Parse("[training]\nmode = \"sync\"\nreplicas_to_aggregate = 2\nbackup_workers = 1\n", "t.toml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->training.mode, "sync");
  EXPECT_EQ(config->training.replicas_to_aggregate, 2);
  EXPECT_EQ(config->training.backup_workers, 1);
  auto defaults = Parse("", "t.toml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->training.mode, "async");
  EXPECT_EQ(defaults->training.replicas_to_aggregate, 0);
  EXPECT_EQ(defaults->training.backup_workers, 0);
  EXPECT_EQ(defaults->training.bucket_mb, 25.0);
  auto allreduce = Parse("[training]\nmode = \"allreduce\"\nbucket_mb = 4\n", "t.toml");
  ASSERT_TRUE(allreduce.ok()) << allreduce.status().ToString();
  EXPECT_EQ(allreduce->training.bucket_mb, 4.0);
}

TEST(Config, TrainingKeysOfAnotherModeAreErrors) {
  EXPECT_EQ(ErrorOf("[training]\nbackup_workers = 1\n"),
            "local.toml:2:1: training.backup_workers: applies to mode = \"sync\" only, but mode is \"async\" (the "
            "default)");
  EXPECT_EQ(ErrorOf("[training]\nmode = \"sync\"\nbucket_mb = 4.0\nreplicas_to_aggregate = 2\n"),
            "local.toml:3:1: training.bucket_mb: applies to mode = \"allreduce\" only, but mode is \"sync\"");
  EXPECT_EQ(ErrorOf("[training]\nmode = \"allreduce\"\nreplicas_to_aggregate = 2\n"),
            "local.toml:3:1: training.replicas_to_aggregate: applies to mode = \"sync\" only, but mode is "
            "\"allreduce\"");
  EXPECT_NE(ErrorOf("[training]\nmode = \"synchronous\"\n").find("training.mode"), std::string::npos);
  EXPECT_NE(ErrorOf("[training]\nmode = \"allreduce\"\nbucket_mb = 0.0\n").find("training.bucket_mb"),
            std::string::npos);
}

TEST(Config, ScheduleKeysOfAnotherKindAreErrors) {
  EXPECT_EQ(ErrorOf("[schedule]\nkind = \"cosine\"\ngamma = 0.5\nstaircase = true\n"),
            "local.toml:3:1: schedule.gamma: applies to kind = \"step\" only, but kind is \"cosine\"\n"
            "local.toml:4:1: schedule.staircase: applies to kind = \"exponential\" only, but kind is \"cosine\"");
  EXPECT_EQ(ErrorOf("[schedule]\ntotal_steps = 100\n"),
            "local.toml:2:1: schedule.total_steps: applies to kind = \"cosine\" only, but kind is \"constant\" "
            "(the default)");
  // warm-up goes with every kind.
  EXPECT_TRUE(Parse("[schedule]\nkind = \"step\"\nwarmup_steps = 3\n").ok());
}

TEST(Config, CoreKeysAreDocumented) {
  auto keys = CoreKeys();
  ASSERT_GT(keys.size(), 8u);
  for (const auto& [key, spec] : keys) EXPECT_FALSE(spec.doc.empty()) << key;
  EXPECT_EQ(keys[0].first, "runtime.inter_op_threads");
  std::set<std::string> names;
  for (const auto& [key, spec] : keys) names.insert(key);
  for (const char* key :
       {"training.batch_size", "data.train_images", "schedule.kind", "checkpoint.keep", "model.loss"}) {
    EXPECT_EQ(names.count(key), 1u) << key;
  }
}

}  // namespace
}  // namespace weft::config
