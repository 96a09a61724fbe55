// `weft train` of the character-level LSTM language model
// (configs/models/char_lstm.wgt, a while loop over each line's length) on
// the text file configs/char_lstm.toml names: the loss falls clearly.
// Labelled slow: a hundred steps of an LSTM over 64-byte lines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

const std::string kText = "/usr/share/doc/git/RelNotes/2.20.0.txt";

// "step N/M  loss X" lines of a run's output.
std::vector<std::pair<long long, double>> Losses(const std::string& out) {
  std::vector<std::pair<long long, double>> result;
  std::size_t at = 0;
  while ((at = out.find("step ", at)) != std::string::npos) {
    long long step = 0, total = 0;
    double loss = 0;
    if (std::sscanf(out.c_str() + at, "step %lld/%lld  loss %lf", &step, &total, &loss) == 3) {
      result.emplace_back(step, loss);
    }
    at += 5;
  }
  return result;
}

TEST(CharLstm, TrainingLowersTheLoss) {
  if (!fs::exists(kText)) GTEST_SKIP() << kText << " is missing (Debian's git package)";
  const fs::path dir = fs::temp_directory_path() / ("weft_lm_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  // The shipped config, but 100 steps and no checkpoints or metrics.
  const fs::path config = dir / "lm.toml";
  std::ofstream(config) << "[model]\nloss = \"loss\"\nimages = \"chars\"\nlabels = \"lengths\"\naccuracy = \"\"\n"
                           "init = \"init\"\n\n[data]\nformat = \"text\"\ntrain_images = \""
                        << kText
                        << "\"\n\n[training]\nbatch_size = 32\nsteps = 100\nseed = 1\nlog_every = 20\n\n"
                           "[optimizer]\nname = \"adam\"\nlearning_rate = 0.005\n";
  testing::ProcessResult r =
      testing::Run({WEFT_CLI, "train", WEFT_SOURCE_DIR "/configs/models/char_lstm.wgt", "--config", config.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto losses = Losses(r.out);
  ASSERT_EQ(losses.size(), 5u) << r.out;
  // Starts near ln 256 = 5.55 (uniform over bytes) and well below it after
  // 20 steps; then keeps falling.
  EXPECT_LT(losses[0].second, std::log(256.0)) << r.out;
  EXPECT_LT(losses[4].second, losses[0].second - 0.5) << r.out;
  EXPECT_LT(losses[4].second, 3.3) << r.out;
  fs::remove_all(dir);
}

TEST(CharLstm, TheShippedConfigChecks) {
  testing::ProcessResult r = testing::Run({WEFT_CLI, "config", "check", WEFT_SOURCE_DIR "/configs/char_lstm.toml"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "OK\n");
}

}  // namespace
}  // namespace weft
