// Training across devices, through the real `weft train` binary: the sample
// MLP with its dense layers pinned to a second device must follow the loss
// curve of a single-CPU run — exactly on a second CPU device (the same
// kernels run, only the tensors travel), and within float tolerance on the
// OpenCL device (other kernels, other summation orders).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/base/strings.h"
#include "tests/integration/subprocess.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

const std::string kFashion = "/usr/share/datasets/fashion-mnist/";

class SplitTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / StrCat("weft_split_training_test_", getpid(), "_",
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Trains fashion_mlp for 100 Adam steps with |extra| config appended;
  // returns the logged losses (every 10 steps) and the final test accuracy.
  std::vector<double> Train(const std::string& name, const std::string& extra, double* accuracy) {
    const fs::path config = dir_ / (name + ".toml");
    std::ofstream(config) << "[data]\ntrain_images = \"" << kFashion << "train-images-idx3-ubyte.gz\"\n"
                          << "train_labels = \"" << kFashion << "train-labels-idx1-ubyte.gz\"\n"
                          << "test_images = \"" << kFashion << "t10k-images-idx3-ubyte.gz\"\n"
                          << "test_labels = \"" << kFashion << "t10k-labels-idx1-ubyte.gz\"\n"
                          << "scale = 0.00392156862745098\n\n"
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

  fs::path dir_;
};

bool DataPresent() { return fs::exists(kFashion + "train-images-idx3-ubyte.gz"); }

TEST_F(SplitTraining, DenseLayersOnASecondCpuFollowTheSameCurveExactly) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  double acc_one = 0, acc_two = 0;
  const std::vector<double> one = Train("one", "", &acc_one);
  const std::vector<double> two =
      Train("two",
            "[devices.cpu]\ncount = 2\n\n[placement.pins]\n\"dense1/*\" = \"/device:CPU:1\"\n"
            "\"dense3/*\" = \"/device:CPU:1\"\n",
            &acc_two);
  ASSERT_EQ(one.size(), 10u);
  EXPECT_EQ(one, two);  // printed with 9 significant digits: the same computation
  EXPECT_EQ(acc_one, acc_two);
  EXPECT_LT(one.back(), one.front());  // it learns
}

TEST_F(SplitTraining, APinToADeviceThatIsNotThereStopsTraining) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path config = dir_ / "bad.toml";
  std::ofstream(config) << "[data]\ntrain_images = \"" << kFashion << "train-images-idx3-ubyte.gz\"\n"
                        << "train_labels = \"" << kFashion << "train-labels-idx1-ubyte.gz\"\n\n"
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
  double acc_cpu = 0, acc_ocl = 0;
  const std::vector<double> cpu = Train("cpu", "", &acc_cpu);
  const std::vector<double> ocl =
      Train("ocl",
            "[placement.pins]\n\"dense1/*\" = \"/device:OPENCL:0\"\n\"dense2/*\" = \"/device:OPENCL:0\"\n"
            "\"dense3/*\" = \"/device:OPENCL:0\"\n",
            &acc_ocl);
  ASSERT_EQ(cpu.size(), 10u);
  ASSERT_EQ(ocl.size(), cpu.size());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_NEAR(ocl[i], cpu[i], 2e-3 * std::fabs(cpu[i]) + 1e-5) << "the loss logged at step " << (i + 1) * 10;
  }
  EXPECT_NEAR(acc_ocl, acc_cpu, 0.01);
}

}  // namespace
}  // namespace weft
