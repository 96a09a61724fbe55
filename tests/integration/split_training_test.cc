// Training across devices, through the real `weft train` binary: the sample
// MLP with its dense layers pinned to a second device must follow the loss
// curve of a single-CPU run — exactly on a second CPU device (the same
// kernels run, only the tensors travel), and within float tolerance on the
// OpenCL device (other kernels, other summation orders).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/base/strings.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_dir.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

using testing::kFashionMnist;

class SplitTraining : public ::testing::Test {
 protected:
  // Trains fashion_mlp for 100 Adam steps with |extra| config appended;
  // returns the logged losses (every 10 steps) and the final test accuracy.
  std::vector<double> Train(const std::string& name, const std::string& extra, double* accuracy) {
    const fs::path config = dir_ / (name + ".toml");
    std::ofstream(config) << "[data]\n"
                          << testing::FashionMnistFiles() << "scale = 0.00392156862745098\n\n"
                          << "[training]\nbatch_size = 64\nsteps = 100\nlog_every = 10\nseed = 5\nmetrics = \"" << name
                          << ".jsonl\"\n\n[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n\n"
                          << extra;
    testing::ProcessResult r = testing::Run(
        {WEFT_CLI, "train", WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt", "--config", config.string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::vector<double> losses;
    std::ifstream metrics(dir_ / (name + ".jsonl"));
    std::string line;
    while (std::getline(metrics, line)) {
      long long step = 0;
      double loss = 0;
      if (std::sscanf(line.c_str(), "{\"step\":%lld,\"loss\":%lf", &step, &loss) == 2) losses.push_back(loss);
    }
    const std::size_t final_at = r.out.rfind("final: ");
    double final_loss = 0;
    long long step = 0;
    *accuracy = -1;
    if (final_at != std::string::npos) {
      std::sscanf(r.out.c_str() + final_at, "final: step=%lld loss=%lf test_accuracy=%lf", &step, &final_loss,
                  accuracy);
    }
    return losses;
  }

  // Two runs' losses and final test accuracies.
  struct Curves {
    std::vector<double> unpinned, pinned;
    double unpinned_accuracy = 0, pinned_accuracy = 0;
  };
  // Trains as run |unpinned|, then as run |pinned| with the config |pins|
  // appended.
  Curves TrainUnpinnedAndPinned(const std::string& unpinned, const std::string& pinned, const std::string& pins) {
    Curves c;
    c.unpinned = Train(unpinned, "", &c.unpinned_accuracy);
    c.pinned = Train(pinned, pins, &c.pinned_accuracy);
    return c;
  }

  // Kept when the test failed, with the configs and metrics it wrote.
  testing::TestDir dir_{"weft_split_training_test", true, testing::TestDir::Keep::kOnFailure};
};

bool DataPresent() { return testing::FashionMnistPresent(); }

TEST_F(SplitTraining, DenseLayersOnASecondCpuFollowTheSameCurveExactly) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const Curves c = TrainUnpinnedAndPinned("one", "two",
                                          "[devices.cpu]\ncount = 2\n\n[placement.pins]\n\"dense1/*\" = "
                                          "\"/device:CPU:1\"\n\"dense3/*\" = \"/device:CPU:1\"\n");
  ASSERT_EQ(c.unpinned.size(), 10u);
  EXPECT_EQ(c.unpinned, c.pinned);  // printed with 9 significant digits: the same computation
  EXPECT_EQ(c.unpinned_accuracy, c.pinned_accuracy);
  EXPECT_LT(c.unpinned.back(), c.unpinned.front());  // it learns
}

TEST_F(SplitTraining, APinToADeviceThatIsNotThereStopsTraining) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path config = dir_ / "bad.toml";
  std::ofstream(config) << "[data]\ntrain_images = \"" << kFashionMnist << "train-images-idx3-ubyte.gz\"\n"
                        << "train_labels = \"" << kFashionMnist << "train-labels-idx1-ubyte.gz\"\n\n"
                        << "[training]\nsteps = 1\n\n[optimizer]\nname = \"sgd\"\nlearning_rate = 0.1\n\n"
                        << "[placement.pins]\n\"dense1/*\" = \"/device:CPU:5\"\n";
  testing::ProcessResult r =
      testing::Run({WEFT_CLI, "train", WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt", "--config", config.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("placement.pins \"dense1/*\" = \"/device:CPU:5\" (" + config.string() +
                       ":13:1): this process has no such device (devices: /device:CPU:0"),
            std::string::npos)
      << r.err;
}

TEST_F(SplitTraining, DenseLayersOnOpenClFollowTheCpuCurve) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  testing::ProcessResult devices = testing::Run({WEFT_CLI, "devices", "--json"});
  if (devices.out.find("\"/device:OPENCL:0\"") == std::string::npos) {
    GTEST_SKIP() << "no OpenCL device (the opencl plugin is not built, or no ICD such as pocl-opencl-icd)";
  }
  const Curves c = TrainUnpinnedAndPinned("cpu", "ocl",
                                          "[placement.pins]\n\"dense1/*\" = \"/device:OPENCL:0\"\n\"dense2/*\" = "
                                          "\"/device:OPENCL:0\"\n\"dense3/*\" = \"/device:OPENCL:0\"\n");
  const std::vector<double>& cpu = c.unpinned;
  const std::vector<double>& ocl = c.pinned;
  const double acc_cpu = c.unpinned_accuracy, acc_ocl = c.pinned_accuracy;
  ASSERT_EQ(cpu.size(), 10u);
  ASSERT_EQ(ocl.size(), cpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_NEAR(ocl[i], cpu[i], 2e-3 * std::fabs(cpu[i]) + 1e-5) << "the loss logged at step " << (i + 1) * 10;
  }
  EXPECT_NEAR(acc_ocl, acc_cpu, 0.01);
}

}  // namespace
}  // namespace weft
