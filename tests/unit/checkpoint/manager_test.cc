// CheckpointManager on a real directory: the manifest it writes, what it
// keeps and deletes, how Latest falls back when the manifest is missing or
// wrong (and logs it), and that temporary files are never bundles. Also
// SavePolicy's arithmetic.
#include "core/checkpoint/manager.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "core/base/logging.h"
#include "tests/support/status_printer.h"
#include "tests/support/test_dir.h"

namespace weft::checkpoint {
namespace {

namespace fs = std::filesystem;

using testing::ReadFile;
using testing::WriteFile;

std::vector<std::pair<std::string, Tensor>> TensorsFor(int64_t step) {
  return {{"w", Tensor::FromVector<float>({static_cast<float>(step), 0.5f})}, {"global_step", Tensor::Scalar(step)}};
}

class Manager : public ::testing::Test {
 protected:
  void SetUp() override {
    old_level_ = GetLogLevel();
    SetLogLevel(LogLevel::kWarning);
    old_sink_ = SetLogSink([this](const LogRecord& r) { logs_.push_back(std::string(r.message)); });
  }
  void TearDown() override {
    SetLogSink(old_sink_);
    SetLogLevel(old_level_);
  }

  std::string P(const std::string& name) const { return dir_.File(name); }
  std::vector<std::string> Files() const { return dir_.Files(); }

  // The manager makes the directory.
  testing::TestDir dir_{"weft_manager_test", /*create=*/false};
  std::vector<std::string> logs_;
  LogLevel old_level_ = LogLevel::kInfo;
  LogSink old_sink_;
};

TEST_F(Manager, SavesKeepsTheNewestAndWritesTheManifest) {
  CheckpointManager m(dir_.path().string(), 2);
  EXPECT_EQ(m.ManifestPath(), P("checkpoint"));
  for (int64_t step : {100, 200, 300}) {
    auto prefix = m.Save(step, TensorsFor(step), {{"seed", "7"}});
    ASSERT_TRUE(prefix.ok()) << prefix.status().ToString();
    EXPECT_EQ(*prefix, P(StrCat("ckpt-", step)));
  }
  EXPECT_EQ(Files(), (std::vector<std::string>{"checkpoint", "ckpt-200.data-00000-of-00001", "ckpt-200.index",
                                               "ckpt-300.data-00000-of-00001", "ckpt-300.index"}));
  EXPECT_EQ(ReadFile(dir_ / "checkpoint"),
            "# weft checkpoint manifest: the newest bundle of this directory and those kept, oldest first.\n"
            "format 1\nlatest ckpt-300\nkept ckpt-200\nkept ckpt-300\n");
  EXPECT_EQ(*m.List(), (std::vector<std::string>{P("ckpt-200"), P("ckpt-300")}));
  EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-300")));
  auto reader = BundleReader::Open(P("ckpt-300"));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->metadata(), (std::map<std::string, std::string>{{"seed", "7"}, {"step", "300"}}));
  EXPECT_TRUE((*reader)->Read("w")->BitwiseEquals(Tensor::FromVector<float>({300, 0.5f})));
  EXPECT_TRUE(logs_.empty()) << StrJoin(logs_, "\n");
}

TEST_F(Manager, NewestIsTheLastSavedAndKeepZeroKeepsAll) {
  CheckpointManager m(dir_.path().string(), 0);
  for (int64_t step : {300, 100, 200, 100}) ASSERT_TRUE(m.Save(step, TensorsFor(step), {}).ok());
  // Saving step 100 again moves it to the end of the kept list.
  EXPECT_EQ(*m.List(), (std::vector<std::string>{P("ckpt-300"), P("ckpt-200"), P("ckpt-100")}));
  EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-100")));
}

TEST_F(Manager, EmptyOrMissingDirectoryHasNoCheckpoint) {
  CheckpointManager m(P("not-yet"), 3);
  EXPECT_EQ(*m.Latest(), std::nullopt);
  EXPECT_TRUE(m.List()->empty());
  fs::create_directories(P("not-yet"));
  EXPECT_EQ(*m.Latest(), std::nullopt);
  EXPECT_TRUE(m.List()->empty());
  EXPECT_TRUE(logs_.empty()) << StrJoin(logs_, "\n");
  fs::create_directories(dir_.path());
  WriteFile(dir_ / "file", "x");
  EXPECT_EQ(CheckpointManager(P("file"), 1).Latest().status(),
            FailedPreconditionError("checkpoint directory ", P("file"), " is not a directory"));
}

TEST_F(Manager, MissingManifestFallsBackToTheNewestValidBundle) {
  CheckpointManager m(dir_.path().string(), 5);
  for (int64_t step : {1, 2, 30}) ASSERT_TRUE(m.Save(step, TensorsFor(step), {}).ok());
  fs::remove(dir_ / "checkpoint");
  // The highest step is damaged: the scan skips it.
  WriteFile(dir_ / "ckpt-30.index", "garbage");
  EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-2")));
  ASSERT_EQ(logs_.size(), 2u);
  EXPECT_EQ(logs_[0], StrCat("checkpoint ", P("ckpt-30"), " does not open, skipping it: checkpoint ", P("ckpt-30"),
                             ".index is not a weft checkpoint index: it does not start with \"WEFTCKPT\""));
  EXPECT_EQ(logs_[1], StrCat("checkpoint manifest ", P("checkpoint"), " is missing; using ", P("ckpt-2"),
                             ", the newest checkpoint in ", dir_.path().string(), " that opens"));
  logs_.clear();
  EXPECT_EQ(*m.List(), (std::vector<std::string>{P("ckpt-1"), P("ckpt-2"), P("ckpt-30")}));
  EXPECT_EQ(logs_,
            (std::vector<std::string>{StrCat("checkpoint manifest ", P("checkpoint"),
                                             " is missing; listing the checkpoints found in ", dir_.path().string())}));
}

TEST_F(Manager, ManifestNamingABrokenBundleFallsBack) {
  CheckpointManager m(dir_.path().string(), 5);
  for (int64_t step : {5, 6}) ASSERT_TRUE(m.Save(step, TensorsFor(step), {}).ok());
  fs::remove(dir_ / "ckpt-6.data-00000-of-00001");
  EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-5")));
  ASSERT_EQ(logs_.size(), 2u);
  EXPECT_EQ(logs_[1], StrCat("checkpoint manifest ", P("checkpoint"),
                             " names ckpt-6 as the newest checkpoint, which does not open (checkpoint ", P("ckpt-6"),
                             " is incomplete: its data shard ", P("ckpt-6"), ".data-00000-of-00001 is missing); using ",
                             P("ckpt-5"), ", the newest checkpoint in ", dir_.path().string(), " that opens"));
}

TEST_F(Manager, UnreadableManifestFallsBack) {
  CheckpointManager m(dir_.path().string(), 5);
  ASSERT_TRUE(m.Save(9, TensorsFor(9), {}).ok());
  const std::pair<std::string, std::string> cases[] = {
      {"format 1\nlatest ckpt-9\nkept ckpt-9\nbogus 1\n", StrCat(P("checkpoint"), ":4: unknown key \"bogus\"")},
      {"format 2\n", StrCat(P("checkpoint"), ":1: format \"2\" is not one this weft reads (1)")},
      {"latest ckpt-9\nkept ckpt-9\n",
       StrCat(P("checkpoint"), " has no format line: it is not a weft checkpoint manifest")},
      {"format 1\nlatest ../../etc/passwd\n",
       StrCat(P("checkpoint"), ":2: \"../../etc/passwd\" is not a bundle name (ckpt-<step>)")},
      {"format 1\nkept ckpt-9\n", StrCat(P("checkpoint"), " names no latest bundle")},
      {"format 1\nlatest ckpt-9\nkept ckpt-8\n",
       StrCat(P("checkpoint"), ": the latest bundle ckpt-9 is not among the kept ones")},
  };
  for (const auto& [text, why] : cases) {
    WriteFile(dir_ / "checkpoint", text);
    logs_.clear();
    EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-9"))) << text;
    ASSERT_EQ(logs_.size(), 1u) << text;
    EXPECT_EQ(logs_[0], StrCat("checkpoint manifest ", P("checkpoint"), " is unreadable (", why, "); using ",
                               P("ckpt-9"), ", the newest checkpoint in ", dir_.path().string(), " that opens"));
  }
  // Nothing opens at all.
  fs::remove(dir_ / "ckpt-9.index");
  logs_.clear();
  EXPECT_EQ(*m.Latest(), std::nullopt);
  ASSERT_EQ(logs_.size(), 1u);
  EXPECT_TRUE(logs_[0].ends_with(StrCat(", and no checkpoint in ", dir_.path().string(), " opens"))) << logs_[0];
}

TEST_F(Manager, TemporaryFilesAreNeverBundlesAndStaleOnesAreRemoved) {
  CheckpointManager m(dir_.path().string(), 5);
  ASSERT_TRUE(m.Save(1, TensorsFor(1), {}).ok());
  fs::remove(dir_ / "checkpoint");
  // A complete-looking bundle under temporary names, as a writer killed
  // between its fsync and its rename would leave.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  const std::string tmp = StrCat(".tmp-", dead, "-0");
  fs::copy_file(dir_ / "ckpt-1.index", dir_ / StrCat("ckpt-99.index", tmp));
  fs::copy_file(dir_ / "ckpt-1.data-00000-of-00001", dir_ / StrCat("ckpt-99.data-00000-of-00001", tmp));
  WriteFile(dir_ / StrCat("checkpoint", tmp), "format 1\nlatest ckpt-99\nkept ckpt-99\n");
  // One of a live process (this one's parent) must survive a Save.
  const std::string live = StrCat("ckpt-98.index.tmp-", getppid(), "-3");
  WriteFile(dir_ / live, "partial");
  EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-1")));
  EXPECT_EQ(*m.List(), (std::vector<std::string>{P("ckpt-1")}));

  ASSERT_TRUE(m.Save(2, TensorsFor(2), {}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index",
                                               "ckpt-2.data-00000-of-00001", "ckpt-2.index", live}));
}

TEST_F(Manager, PrunesOrphanedDataOfUnfinishedSaves) {
  CheckpointManager m(dir_.path().string(), 1);
  ASSERT_TRUE(m.Save(1, TensorsFor(1), {}).ok());
  // Data renamed into place, index never written: a save killed midway.
  WriteFile(dir_ / "ckpt-2.data-00000-of-00001", "orphan");
  ASSERT_TRUE(m.Save(3, TensorsFor(3), {}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index"}));
}

TEST_F(Manager, ReportsEveryStage) {
  CheckpointManager m(dir_.path().string(), 1);
  std::vector<std::string> stages;
  WriteOptions options;
  options.observer = [&](WriteStage s) { stages.emplace_back(WriteStageName(s)); };
  m.set_write_options(options);
  ASSERT_TRUE(m.Save(1, TensorsFor(1), {}).ok());
  EXPECT_EQ(stages, (std::vector<std::string>{"tensor-written", "tensor-written", "shards-synced", "shards-renamed",
                                              "index-synced", "index-renamed", "manifest-synced", "manifest-renamed",
                                              "pruned"}));
}

TEST_F(Manager, RejectsBadStepsAndConflictingMetadata) {
  CheckpointManager m(dir_.path().string(), 1);
  EXPECT_EQ(m.Save(-1, TensorsFor(1), {}).status(),
            InvalidArgumentError("cannot save a checkpoint of step -1 in ", dir_.path().string(), ": steps are >= 0"));
  EXPECT_EQ(m.Save(5, TensorsFor(5), {{"step", "6"}}).status(),
            InvalidArgumentError("cannot save step 5 in ", dir_.path().string(), ": its metadata says step \"6\""));
  EXPECT_TRUE(m.Save(5, TensorsFor(5), {{"step", "5"}}).ok());
  EXPECT_EQ(
      m.Save(6, {{"a", Tensor()}}, {}).status(),
      InvalidArgumentError("cannot save checkpoint ", P("ckpt-6"), ": tensor \"a\" is an empty (invalid) tensor"));
  EXPECT_EQ(*m.Latest(), std::optional<std::string>(P("ckpt-5")));
}

TEST(CheckpointManagerStepOf, ParsesBundleNames) {
  EXPECT_EQ(CheckpointManager::StepOf("runs/a/ckpt-120"), 120);
  EXPECT_EQ(CheckpointManager::StepOf("ckpt-0"), 0);
  EXPECT_EQ(CheckpointManager::StepOf("runs/a/ckpt-"), std::nullopt);
  EXPECT_EQ(CheckpointManager::StepOf("runs/a/ckpt-12x"), std::nullopt);
  EXPECT_EQ(CheckpointManager::StepOf("runs/a/ckpt--3"), std::nullopt);
  EXPECT_EQ(CheckpointManager::StepOf("runs/a/model-3"), std::nullopt);
}

// --- SavePolicy ---------------------------------------------------------------------

using Clock = SavePolicy::Clock;
Clock::time_point At(double seconds) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

TEST(SavePolicy, EveryKSteps) {
  SavePolicy p(100, 0);
  EXPECT_FALSE(p.Due(99, At(0)));
  EXPECT_TRUE(p.Due(100, At(1e6)));
  p.Saved(100, At(0));
  EXPECT_FALSE(p.Due(100, At(0)));
  EXPECT_FALSE(p.Due(199, At(1e6)));
  EXPECT_TRUE(p.Due(200, At(0)));
  // After a resume from step 250, count from there.
  p.Saved(250, At(0));
  EXPECT_FALSE(p.Due(300, At(0)));
  EXPECT_TRUE(p.Due(350, At(0)));
}

TEST(SavePolicy, EveryTSeconds) {
  SavePolicy p(0, 60);
  EXPECT_FALSE(p.Due(1, At(10)));  // the clock starts at the first query
  EXPECT_FALSE(p.Due(2, At(69.9)));
  EXPECT_TRUE(p.Due(3, At(70)));
  p.Saved(3, At(75));
  EXPECT_FALSE(p.Due(3, At(1000)));  // that step is saved already
  EXPECT_FALSE(p.Due(4, At(134)));
  EXPECT_TRUE(p.Due(4, At(135)));
}

TEST(SavePolicy, WhicheverComesFirstAndNever) {
  SavePolicy both(10, 60);
  EXPECT_FALSE(both.Due(5, At(0)));
  EXPECT_TRUE(both.Due(6, At(60)));
  both.Saved(6, At(60));
  EXPECT_TRUE(both.Due(16, At(61)));
  SavePolicy never(0, 0);
  EXPECT_FALSE(never.Due(1000000, At(0)));
  EXPECT_FALSE(never.Due(2000000, At(1e9)));
}

}  // namespace
}  // namespace weft::checkpoint
