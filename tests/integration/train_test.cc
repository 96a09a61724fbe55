// `weft train` end to end, through the real binary: bad configurations give
// errors naming what is wrong; a run killed with SIGKILL after a checkpoint
// resumes to exactly (bitwise) the parameters of an uninterrupted run; a
// checkpoint of another model is refused naming what differs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "core/checkpoint/bundle.h"
#include "core/checkpoint/manager.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/output_text.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_dir.h"

extern char** environ;

namespace weft {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;

const std::string kModels = WEFT_SOURCE_DIR "/configs/models/";

class Train : public ::testing::Test {
 protected:
  // A training config for fashion_mlp on the real data; |extra| is
  // appended (later keys of a section must not repeat earlier ones).
  std::string Config(const std::string& name, const std::string& data, const std::string& training,
                     const std::string& rest) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << "[data]\n"
                        << data << "scale = 0.00392156862745098\n\n[training]\n"
                        << training << "\n"
                        << rest;
    return path.string();
  }
  static std::string RealData() { return testing::FashionMnistFiles(); }

  ProcessResult Weft(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {WEFT_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::Run(argv);
  }
  // `weft train` of |model| with |config|, which must stop before it trains
  // (exit code 1); what it said on stderr.
  std::string TrainError(const std::string& config, const std::string& model = "fashion_mlp.wgt") {
    ProcessResult r = Weft({"train", kModels + model, "--config", config});
    EXPECT_EQ(r.exit_code, 1);
    return r.err;
  }

  // Kept when the test failed, with the configs, logs and checkpoints.
  testing::TestDir dir_{"weft_train_test", true, testing::TestDir::Keep::kOnFailure};
};

bool DataPresent() { return testing::FashionMnistPresent(); }

TEST_F(Train, MissingDataFileIsNamedWithItsPosition) {
  const std::string config =
      Config("missing.toml", "train_images = \"nope/images.gz\"\ntrain_labels = \"nope/labels.gz\"\n", "steps = 1\n",
             "[optimizer]\nname = \"sgd\"\nlearning_rate = 0.1\n");
  EXPECT_EQ(TrainError(config), "weft: error: " + config + ":2:16: data.train_images: no such file: " +
                                    (dir_ / "nope/images.gz").string() + "\n");
}

TEST_F(Train, AnOptimizerThatIsNotLoadedGetsADidYouMean) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config =
      Config("opt.toml", RealData(), "steps = 1\n", "[optimizer]\nname = \"adamm\"\nlearning_rate = 0.1\n");
  EXPECT_TRUE(testing::Contains(TrainError(config),
                                config + ":12:8: optimizer.name: no optimizer plugin \"adamm\" is loaded; did you "
                                         "mean \"adam\"? (loaded: adagrad, adam, adamw, momentum, rmsprop, sgd;"));
}

TEST_F(Train, AnUnknownHyperparameterIsAnError) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config = Config("hyper.toml", RealData(), "steps = 1\n",
                                    "[optimizer]\nname = \"adam\"\nlearning_rate = 0.1\nbeta = 0.9\n");
  EXPECT_TRUE(
      testing::Contains(TrainError(config), config + ":14:1: optimizer.beta: unknown key; did you mean 'beta1'?"));
}

TEST_F(Train, ConfigCheckValidatesTheOptimizerSection) {
  const std::string good = Config("good.toml", RealData(), "steps = 1\n",
                                  "[optimizer]\nname = \"momentum\"\n"
                                  "learning_rate = 0.1\nnesterov = true\n");
  ProcessResult r = Weft({"config", "check", good});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "OK\n");
  const std::string bad =
      Config("bad.toml", RealData(), "steps = 1\n", "[optimizer]\nname = \"momentum\"\nlearning_rate = -1.0\n");
  r = Weft({"config", "check", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, bad + ":13:17: optimizer.learning_rate: expected a number >= 0, got -1\n");
  // Every configs/*.toml the repository ships passes.
  for (const char* shipped : {"fashion_mlp.toml", "fashion_cnn.toml"}) {
    r = Weft({"config", "check", std::string(WEFT_SOURCE_DIR "/configs/") + shipped});
    EXPECT_EQ(r.out, "OK\n") << shipped;
  }
}

TEST_F(Train, AModelWithoutALossIsRefused) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config =
      Config("noloss.toml", RealData(), "steps = 1\n", "[optimizer]\nname = \"sgd\"\nlearning_rate = 0.1\n");
  // mnist_mlp is an inference graph: no labels, no loss.
  EXPECT_TRUE(testing::Contains(TrainError(config, "mnist_mlp.wgt"),
                                "the model has no Placeholder \"labels\" to feed the labels into"));

  const std::string config2 = Config("noloss2.toml", RealData(), "steps = 1\n",
                                     "[model]\nloss = \"los\"\n\n[optimizer]\nname = \"sgd\"\nlearning_rate = 0.1\n");
  const std::string err = TrainError(config2);
  EXPECT_NE(err.find("the loss (set by [model] loss = \"los\")"), std::string::npos) << err;
  EXPECT_NE(err.find("the graph has no node \"los\"; did you mean \"loss\"?"), std::string::npos) << err;
}

TEST_F(Train, TrainsAndPrintsTheFinalLine) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config = Config("short.toml", RealData(),
                                    "batch_size = 128\nsteps = 60\nlog_every = 20\nseed = 3\nmetrics = \"m.jsonl\"\n",
                                    "[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n");
  ProcessResult r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", config});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Not a terminal: one plain line per report.
  EXPECT_NE(r.out.find("step 20/60  loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 60/60  loss "), std::string::npos) << r.out;
  // The last line is the final one. (Parsed by hand: GCC 12 warns falsely
  // inside std::regex under ASan.)
  const std::size_t final_at = r.out.rfind("\nfinal: ");
  ASSERT_NE(final_at, std::string::npos) << r.out;
  double loss = -1, accuracy = -1, examples_per_sec = -1;
  long long step = -1;
  char end = 0;
  ASSERT_EQ(
      std::sscanf(r.out.c_str() + final_at, "\nfinal: step=%lld loss=%lf test_accuracy=%lf examples_per_sec=%lf%c",
                  &step, &loss, &accuracy, &examples_per_sec, &end),
      5)
      << r.out;
  EXPECT_EQ(step, 60);
  EXPECT_EQ(end, '\n');
  EXPECT_EQ(r.out.find('\n', final_at + 1), r.out.size() - 1) << "the final line is not the last";
  EXPECT_GT(examples_per_sec, 0);
  // 60 Adam steps on Fashion-MNIST: well above chance (0.1), and the loss
  // below ln(10) = 2.30 of a uniform guess.
  EXPECT_GT(accuracy, 0.6) << r.out;
  EXPECT_LT(loss, 1.5) << r.out;
  std::ifstream metrics(dir_ / "m.jsonl");
  std::string line, last;
  int lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    last = line;
  }
  EXPECT_EQ(lines, 5);  // 3 reports, 1 evaluation, 1 final
  EXPECT_EQ(last.rfind("{\"final\":true,\"step\":60,", 0), 0u) << last;
}

// The graph optimizer changes no training (docs/optimizer.md): the sample
// CNN trained 50 steps at --optimize 0 and at the highest level reports
// the same losses (within 1e-3) at every progress line and at the end.
// Level 3's Winograd convolutions round differently from direct ones, and
// how much depends on the instruction set oneDNN picks: on an AMD EPYC
// without AVX-512 the losses after 50 steps of Adam differ by 3.0e-4
// (0.655377 against 0.655675); on the machines the test was written on,
// by less than 1e-4.
TEST_F(Train, TheOptimizerChangesNoLossOfTheCnn) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  std::map<std::string, std::vector<double>> losses;
  for (const std::string level : {"0", "3"}) {
    const std::string config =
        Config("cnn" + level + ".toml", RealData(),
               "batch_size = 64\nsteps = 50\nlog_every = 10\nseed = 5\nmetrics = \"m" + level + ".jsonl\"\n",
               "[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n");
    ProcessResult r = Weft({"train", kModels + "fashion_cnn.wgt", "--config", config, "--optimize", level});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream metrics(dir_ / ("m" + level + ".jsonl"));
    std::string line;
    while (std::getline(metrics, line)) {
      const std::size_t at = line.find("\"loss\":");
      if (at == std::string::npos) continue;
      losses[level].push_back(std::strtod(line.c_str() + at + 7, nullptr));
    }
  }
  ASSERT_EQ(losses["0"].size(), losses["3"].size());
  ASSERT_GE(losses["0"].size(), 6u);  // 5 progress lines and the final one
  for (std::size_t i = 0; i < losses["0"].size(); ++i) {
    EXPECT_NEAR(losses["3"][i], losses["0"][i], 1e-3) << "report " << i;
  }
  std::cout << "losses at level 0: " << losses["0"].front() << " ... " << losses["0"].back()
            << "; at level 3: " << losses["3"].front() << " ... " << losses["3"].back() << std::endl;
}

// Starts |argv| in the background.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, (log + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

TEST_F(Train, AKilledRunResumesToTheSameParametersBitForBit) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  auto config = [&](const std::string& name, const std::string& ckpt) {
    return Config(name, RealData(), "batch_size = 64\nsteps = 200\nlog_every = 10\nseed = 7\n",
                  "[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n\n[schedule]\nkind = \"cosine\"\n"
                  "warmup_steps = 20\n\n[checkpoint]\ndir = \"" +
                      ckpt +
                      "\"\nevery_steps = 25\nkeep = 20\n"
                      "\n[runtime]\nintra_op_threads = 2\n");
  };
  const std::string whole = config("whole.toml", "whole");
  ProcessResult r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", whole});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The same run, killed once a checkpoint at step >= 100 exists.
  const std::string split = config("split.toml", "split");
  const pid_t pid =
      Spawn({WEFT_CLI, "train", kModels + "fashion_mlp.wgt", "--config", split}, (dir_ / "split.log").string());
  ASSERT_GT(pid, 0);
  checkpoint::CheckpointManager split_dir((dir_ / "split").string(), 20);
  int64_t killed_after = -1;
  for (int i = 0; i < 6000 && killed_after < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto latest = split_dir.Latest();
    if (latest.ok() && latest->has_value()) {
      auto reader = checkpoint::BundleReader::Open(**latest);
      if (reader.ok() && std::stoll((*reader)->metadata().at("step")) >= 100) {
        killed_after = std::stoll((*reader)->metadata().at("step"));
      }
    }
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GE(killed_after, 100) << "no checkpoint at step >= 100 appeared";
  if (WIFEXITED(status)) GTEST_SKIP() << "the run finished before it could be killed";
  EXPECT_TRUE(WIFSIGNALED(status));

  r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", split, "--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from "), std::string::npos) << r.out;

  auto a = checkpoint::BundleReader::Open((dir_ / "whole" / "ckpt-200").string());
  auto b = checkpoint::BundleReader::Open((dir_ / "split" / "ckpt-200").string());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ((*a)->entries().size(), (*b)->entries().size());
  int compared = 0;
  for (const checkpoint::TensorEntry& entry : (*a)->entries()) {
    auto x = (*a)->Read(entry.name);
    auto y = (*b)->Read(entry.name);
    ASSERT_TRUE(x.ok() && y.ok()) << entry.name;
    EXPECT_TRUE(x->BitwiseEquals(*y)) << entry.name;
    ++compared;
  }
  // 3 dense layers x (kernel, bias) x (variable, m, v) + the global step.
  EXPECT_EQ(compared, 19);
}

// --resume over a directory whose checkpoints all fail to open stops with
// exit 1, naming each checkpoint and why, and changes no file (a fresh start
// would rotate the damaged checkpoints away: that is the user's choice).
TEST_F(Train, ResumeWithOnlyDamagedCheckpointsNamesEachAndTouchesNothing) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config = Config("damaged.toml", RealData(), "batch_size = 32\nsteps = 3\n",
                                    "[optimizer]\nname = \"sgd\"\nlearning_rate = 0.01\n\n[checkpoint]\n"
                                    "dir = \"ckpt\"\nevery_steps = 1\nkeep = 2\n");
  ProcessResult r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", config});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path ckpt = dir_ / "ckpt";
  ASSERT_TRUE(fs::exists(ckpt / "ckpt-2.index") && fs::exists(ckpt / "ckpt-3.index"));
  // ckpt-3: its index overwritten with garbage; ckpt-2: its data file gone.
  std::ofstream(ckpt / "ckpt-3.index", std::ios::trunc) << "not an index";
  fs::path data2;
  for (const auto& entry : fs::directory_iterator(ckpt)) {
    if (entry.path().filename().string().rfind("ckpt-2.data", 0) == 0) data2 = entry.path();
  }
  ASSERT_FALSE(data2.empty());
  fs::remove(data2);
  std::map<std::string, std::string> before;
  for (const auto& entry : fs::directory_iterator(ckpt)) {
    std::ifstream in(entry.path(), std::ios::binary);
    before[entry.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }

  r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", config, "--resume"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("--resume: no checkpoint in " + ckpt.string() +
                       " opens, so nothing was loaded and nothing "
                       "was changed"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find((ckpt / "ckpt-3").string() + ": checkpoint " + (ckpt / "ckpt-3.index").string() +
                       " is not a weft checkpoint index"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find((ckpt / "ckpt-2").string() + ": checkpoint " + (ckpt / "ckpt-2").string() + " is incomplete"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(data2.string()), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << "it trained: " << r.out;
  std::map<std::string, std::string> after;
  for (const auto& entry : fs::directory_iterator(ckpt)) {
    std::ifstream in(entry.path(), std::ios::binary);
    after[entry.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  // weft.lock, the directory's writer lock, names the process holding it;
  // every checkpoint file and the manifest must be as they were.
  before.erase("weft.lock");
  after.erase("weft.lock");
  for (const auto& [name, bytes] : before) {
    EXPECT_TRUE(after.count(name) == 1 && after[name] == bytes) << name << " was changed or removed";
  }
  for (const auto& [name, bytes] : after) EXPECT_EQ(before.count(name), 1u) << name << " was created";
}

TEST_F(Train, ACheckpointOfAnotherModelIsRefusedNamingTheDifference) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config =
      Config("other.toml", RealData(), "batch_size = 32\nsteps = 2\n",
             "[optimizer]\nname = \"sgd\"\nlearning_rate = 0.01\n\n[checkpoint]\ndir = \"ckpt\"\n");
  ProcessResult r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", config});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A fresh run into a directory that has checkpoints says so.
  r = Weft({"train", kModels + "fashion_mlp.wgt", "--config", config});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("already holds " + (dir_ / "ckpt" / "ckpt-2").string() +
                       "; this run starts from step 0 (--resume continues from it)\n"),
            std::string::npos)
      << r.out;
  // The CNN has other variables: resuming it from the MLP's checkpoint fails.
  const std::string cnn = Config("cnn.toml", RealData(), "batch_size = 32\nsteps = 4\n",
                                 "[optimizer]\nname = \"sgd\"\nlearning_rate = 0.01\n\n[checkpoint]\ndir = \"ckpt\"\n");
  r = Weft({"train", kModels + "fashion_cnn.wgt", "--config", cnn, "--resume"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("was not written for this model (or optimizer): the model's variable \"conv1/bias\" "
                       "(f32[32]) is not in the checkpoint"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("variable \"dense1/kernel\" is f32[784,512] in the checkpoint but f32[3136,512] in the model"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace weft
