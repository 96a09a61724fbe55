// Crash safety with real processes: tests/integration/ckpt_writer saves
// checkpoints through CheckpointManager and is killed with SIGKILL at every
// stage of a save (paused there deterministically) and at arbitrary
// moments. Whatever the moment, Latest() must give a bundle that verifies
// and holds exactly what the writer saved for that step, never a temporary
// file, and the writer must resume from it. Damaged bundles (a truncated
// index, a flipped data byte) must be named as such.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/checkpoint/manager.h"
#include "tests/integration/ckpt_writer_data.h"
#include "tests/support/status_printer.h"
#include "tests/support/test_dir.h"
#include "tests/support/weft_cli.h"

namespace weft {

namespace {

namespace fs = std::filesystem;
using checkpoint::BundleReader;
using checkpoint::CheckpointManager;

constexpr int kKeep = 2;
// A guard against a hung child, not a timing expectation: a save of a few
// MiB takes milliseconds.
constexpr int kLineTimeoutMs = 120000;

// A child process whose stdout is read line by line.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      for (const auto& [key, value] : env) setenv(key.c_str(), value.c_str(), 1);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) Kill();
    if (fd_ >= 0) close(fd_);
  }

  // The next line of output (without the newline), or "" at the end of the
  // output or after kLineTimeoutMs.
  std::string ReadLine() {
    while (true) {
      const auto newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, kLineTimeoutMs) <= 0) return "";
      char chunk[256];
      const ssize_t n = read(fd_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // Reads lines until one starts with |prefix|; returns it ("" if none).
  std::string WaitFor(const std::string& prefix) {
    for (std::string line = ReadLine(); !line.empty(); line = ReadLine()) {
      if (line.starts_with(prefix)) return line;
    }
    return "";
  }

  void Kill() {
    ::kill(pid_, SIGKILL);
    Wait();
  }
  // The exit status (as from waitpid).
  int Wait() {
    int status = 0;
    if (pid_ > 0) waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
};

class CheckpointFault : public ::testing::Test {
 protected:
  Child Writer(int saves = -1, const std::string& pause = "") {
    std::vector<std::string> argv = {WEFT_CKPT_WRITER, dir_.path().string(), StrCat(kKeep)};
    if (saves >= 0) argv.push_back(StrCat(saves));
    std::map<std::string, std::string> env;
    if (!pause.empty()) env["WEFT_CKPT_WRITER_PAUSE"] = pause;
    return Child(argv, env);
  }

  std::vector<std::string> TempFiles() const {
    std::vector<std::string> temps;
    for (const auto& e : fs::directory_iterator(dir_.path())) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp-") != std::string::npos) temps.push_back(name);
    }
    return temps;
  }

  // Latest() must be a bundle that verifies and holds exactly what the
  // writer saved for its step; returns that step (-1 on failure).
  int64_t CheckLatest() {
    CheckpointManager manager(dir_.path().string(), kKeep);
    auto latest = manager.Latest();
    EXPECT_TRUE(latest.ok()) << latest.status().ToString();
    if (!latest.ok() || !*latest) {
      ADD_FAILURE() << "no checkpoint in " << dir_.path();
      return -1;
    }
    EXPECT_EQ((*latest)->find(".tmp-"), std::string::npos) << **latest;
    const std::optional<int64_t> step = CheckpointManager::StepOf(**latest);
    EXPECT_TRUE(step.has_value()) << **latest;
    auto reader = BundleReader::Open(**latest);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok() || !step) return -1;
    Status verified = (*reader)->VerifyAll();
    EXPECT_TRUE(verified.ok()) << verified.ToString();
    const auto expected = testing::WriterTensors(*step);
    EXPECT_EQ((*reader)->entries().size(), expected.size());
    for (const auto& [name, tensor] : expected) {
      auto read = (*reader)->Read(name);
      EXPECT_TRUE(read.ok()) << read.status().ToString();
      if (read.ok()) {
        EXPECT_TRUE(read->BitwiseEquals(tensor)) << name << " of step " << *step;
      }
    }
    EXPECT_EQ((*reader)->metadata().at("step"), StrCat(*step));
    // The manifest never lists a temporary file, nor more than `keep`.
    auto listed = manager.List();
    EXPECT_TRUE(listed.ok());
    if (listed.ok()) {
      EXPECT_LE(listed->size(), static_cast<std::size_t>(kKeep));
      for (const std::string& p : *listed) EXPECT_EQ(p.find(".tmp-"), std::string::npos) << p;
    }
    return *step;
  }

  // The writer makes the directory.
  testing::TestDir dir_{"weft_ckpt_fault_test", /*create=*/false};
};

TEST_F(CheckpointFault, KilledAtEveryStageOfASave) {
  // The stage at which the writer is killed while saving step 3, whether
  // it leaves a temporary file behind, and which step Latest() must give.
  struct Case {
    const char* stage;
    bool leaves_temporary;
    int64_t latest;
  };
  const Case cases[] = {
      {"tensor-written", true, 2},     // mid-write of the data shard
      {"shards-synced", true, 2},      // data complete, not yet renamed
      {"shards-renamed", false, 2},    // data in place, no index yet
      {"index-synced", true, 2},       // index complete, not yet renamed
      {"index-renamed", false, 2},     // bundle complete; the manifest names step 2
      {"manifest-synced", true, 2},    // new manifest complete, not yet renamed
      {"manifest-renamed", false, 3},  // manifest names step 3; step 1 not yet pruned
      {"pruned", false, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stage);
    fs::remove_all(dir_.path());
    {
      Child writer = Writer(-1, StrCat(c.stage, ":3"));
      ASSERT_EQ(writer.ReadLine(), "resumed 0");
      ASSERT_EQ(writer.ReadLine(), "saved 1");
      ASSERT_EQ(writer.ReadLine(), "saved 2");
      ASSERT_EQ(writer.ReadLine(), StrCat("paused ", c.stage, " 3"));
      writer.Kill();
    }
    EXPECT_EQ(!TempFiles().empty(), c.leaves_temporary) << StrJoin(TempFiles(), ", ");
    EXPECT_EQ(CheckLatest(), c.latest);

    // A restarted writer resumes from there, and its first save clears the
    // dead writer's temporary files and the bundles beyond `keep`.
    {
      Child writer = Writer(1);
      ASSERT_EQ(writer.ReadLine(), StrCat("resumed ", c.latest));
      ASSERT_EQ(writer.ReadLine(), StrCat("saved ", c.latest + 1));
      const int status = writer.Wait();
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    EXPECT_TRUE(TempFiles().empty()) << StrJoin(TempFiles(), ", ");
    EXPECT_EQ(CheckLatest(), c.latest + 1);
    std::vector<std::string> indexes;
    for (const auto& e : fs::directory_iterator(dir_.path())) {
      if (e.path().extension() == ".index") indexes.push_back(e.path().filename().string());
    }
    std::sort(indexes.begin(), indexes.end());
    EXPECT_EQ(indexes,
              (std::vector<std::string>{StrCat("ckpt-", c.latest, ".index"), StrCat("ckpt-", c.latest + 1, ".index")}));
  }
}

TEST_F(CheckpointFault, KilledAtArbitraryMoments) {
  // Kills after a random number of completed saves plus a random delay, so
  // that over the rounds the signal lands in every part of a save. The
  // seed is fixed so a failure can be replayed.
  std::mt19937 random(20240611);
  int64_t latest = 0;
  for (int round = 0; round < 12; ++round) {
    SCOPED_TRACE(StrCat("round ", round));
    Child writer = Writer();
    ASSERT_EQ(writer.ReadLine(), StrCat("resumed ", latest));
    int64_t last_saved = latest;
    const int saves = 1 + static_cast<int>(random() % 3);
    for (int i = 0; i < saves; ++i) {
      const std::string line = writer.ReadLine();
      ASSERT_TRUE(line.starts_with("saved ")) << line;
      last_saved = std::stoll(line.substr(6));
    }
    usleep(static_cast<useconds_t>(random() % 20000));
    writer.Kill();
    // What the writer printed before it died, read or not.
    for (std::string line = writer.ReadLine(); !line.empty(); line = writer.ReadLine()) {
      ASSERT_TRUE(line.starts_with("saved ")) << line;
      last_saved = std::stoll(line.substr(6));
    }
    // "saved N" is printed after Save returned, when the manifest already
    // named step N: the latest is N, or N + 1 if the kill came after the
    // manifest of N + 1 was renamed.
    latest = CheckLatest();
    ASSERT_GE(latest, 0);
    EXPECT_GE(latest, last_saved);
    EXPECT_LE(latest, last_saved + 1);
  }
}

TEST_F(CheckpointFault, DamagedLatestBundleIsNamedAndSkipped) {
  {
    Child writer = Writer(3);
    ASSERT_EQ(writer.WaitFor("saved 3"), "saved 3");
    writer.Wait();
  }
  const std::string p3 = (dir_ / "ckpt-3").string();
  const std::string p2 = (dir_ / "ckpt-2").string();
  // A flipped byte in the data: Open succeeds, the tensor fails its CRC.
  const std::string shard = p3 + ".data-00000-of-00001";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(4096);
    const char c = static_cast<char>(f.get());
    f.seekp(4096);
    f.put(static_cast<char>(c ^ 1));
  }
  auto reader = BundleReader::Open(p3);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  // dense/bias (f64[65536], 524288 bytes) sorts first and holds byte 4096.
  const Status corrupt = (*reader)->VerifyAll();
  EXPECT_EQ(corrupt.code(), Code::kDataLoss);
  EXPECT_TRUE(corrupt.message().starts_with(StrCat("checkpoint ", p3,
                                                   ": tensor \"dense/bias\" is corrupt: its 524288 "
                                                   "bytes at offset 0 of ",
                                                   shard, " have CRC32C 0x")))
      << corrupt.ToString();
  EXPECT_EQ((*reader)->Read("dense/bias").status(), corrupt);
  EXPECT_TRUE((*reader)->Read("dense/kernel").ok());

  // The CLI says the same and exits 1.
  testing::ProcessResult r = testing::RunWeft({"ckpt", "inspect", p3});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("CORRUPT"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, StrCat("weft: error: ", corrupt.message(), "\n"));

  // A truncated index: the bundle does not open, Latest() falls back.
  const std::string index = p3 + ".index";
  fs::resize_file(index, fs::file_size(index) - 10);
  const Status truncated = BundleReader::Open(p3).status();
  EXPECT_EQ(truncated.code(), Code::kDataLoss);
  EXPECT_TRUE(truncated.message().starts_with(StrCat("checkpoint ", index, " is truncated: its header promises ")))
      << truncated.ToString();
  EXPECT_EQ(*CheckpointManager(dir_.path().string(), kKeep).Latest(), std::optional<std::string>(p2));
  r = testing::RunWeft({"ckpt", "inspect", p3});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, StrCat("weft: error: ", truncated.message(), "\n"));
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace weft
