// The cuda and hip device plugins as the `weft` binary sees them. On a
// machine without the GPU (the usual CI machine) the plugin must load, say
// UNAVAILABLE with the runtime's own reason, and leave the CPU device
// working; where the GPU exists, its first device must be listed instead.
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/subprocess.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using testing::ProcessResult;

ProcessResult Weft(std::vector<std::string> args) {
  args.insert(args.begin(), WEFT_CLI);
  // Only the plugins built with the tree, whatever the caller's path says.
  return testing::Run(args, {{"WEFT_PLUGIN_PATH", ""}});
}

// The cells of the row of `weft plugins` whose first cell is |name|; empty
// when there is none.
std::vector<std::string> Row(const std::string& out, const std::string& name) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) row.push_back(cell);
    if (!row.empty() && row[0] == name) return row;
  }
  return {};
}

struct Gpu {
  const char* plugin;       // "cuda"
  const char* type;         // "CUDA"
  const char* error_prefix; // how the runtime's error names begin
  const char* needs;        // the plugin's advice, after the runtime's reason
};

const Gpu kCuda{"cuda", "CUDA", "cudaError", "the CUDA plugin needs an NVIDIA GPU and driver"};
const Gpu kHip{"hip", "HIP", "hipError",
               "the HIP plugin needs an AMD GPU and the ROCm kernel driver (amdgpu/KFD)"};

// gtest names the parameter by this, not by its bytes.
void PrintTo(const Gpu& gpu, std::ostream* os) { *os << gpu.plugin; }

bool Built(const Gpu& gpu) {
  return fs::exists(fs::path(WEFT_BUILT_PLUGIN_DIR) /
                    (std::string("weft_device_") + gpu.plugin + ".so"));
}

class GpuPlugins : public ::testing::TestWithParam<Gpu> {};

TEST_P(GpuPlugins, ListedAsLoadedOrUnavailableWithTheRuntimesReason) {
  const Gpu& gpu = GetParam();
  if (!Built(gpu)) GTEST_SKIP() << "the " << gpu.plugin << " plugin is not built here";
  ProcessResult r = Weft({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> row = Row(r.out, gpu.plugin);
  ASSERT_GE(row.size(), 6u) << r.out;
  EXPECT_EQ(row[1], "device");
  EXPECT_EQ(row[2], "1.0");
  EXPECT_EQ(row[5], std::string(WEFT_BUILT_PLUGIN_DIR) + "/weft_device_" + gpu.plugin + ".so");
  if (row[4] == "loaded") return;  // a GPU is present: see DevicesListTheGpuOrOnlyTheCpu
  ASSERT_EQ(row[4], "unavailable") << r.out;
  // "<plugin>: unavailable: no usable <TYPE> device: <runtime error>; <advice>"
  const std::string head = std::string(gpu.plugin) + ": unavailable: no usable " + gpu.type +
                           " device: ";
  const std::size_t at = r.out.find(head);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find(gpu.error_prefix), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - std::string(gpu.needs).size()), gpu.needs) << line;
  EXPECT_EQ(line.find("(null)"), std::string::npos) << line;
  // The CPU plugin is unaffected.
  EXPECT_EQ(Row(r.out, "cpu").at(4), "loaded") << r.out;
}

TEST_P(GpuPlugins, DevicesListTheGpuOrOnlyTheCpu) {
  const Gpu& gpu = GetParam();
  if (!Built(gpu)) GTEST_SKIP() << "the " << gpu.plugin << " plugin is not built here";
  const ProcessResult plugins = Weft({"plugins"});
  ASSERT_EQ(plugins.exit_code, 0) << plugins.err;
  const std::vector<std::string> row = Row(plugins.out, gpu.plugin);
  ASSERT_GE(row.size(), 5u) << plugins.out;
  const bool present = row[4] == "loaded";

  ProcessResult r = Weft({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/device:CPU:0  (plugin cpu)\n"), std::string::npos) << r.out;
  const std::string device = std::string("/device:") + gpu.type + ":0";
  if (present) {
    EXPECT_NE(r.out.find(device + "  (plugin " + gpu.plugin + ")\n"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.out.find("/device:" + std::string(gpu.type) + ":"), std::string::npos) << r.out;
    // Quietly: `weft plugins` says why; the host logs it at debug level
    // only, so every command on a machine without the GPU stays clean.
    EXPECT_EQ(r.err.find(std::string("plugin '") + gpu.plugin + "'"), std::string::npos) << r.err;
    ProcessResult verbose = Weft({"--log-level", "debug", "devices"});
    EXPECT_NE(verbose.err.find(std::string("plugin '") + gpu.plugin + "'"), std::string::npos) << verbose.err;
  }
}

TEST_P(GpuPlugins, DeclaresTheAllocatorCacheOption) {
  const Gpu& gpu = GetParam();
  if (!Built(gpu)) GTEST_SKIP() << "the " << gpu.plugin << " plugin is not built here";
  ProcessResult r = Weft({"plugins", "--options"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string section = std::string("[devices.") + gpu.plugin + "]\n";
  const std::size_t at = r.out.find(section);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::size_t end = r.out.find("\n[", at + section.size());
  const std::string body = r.out.substr(at, end == std::string::npos ? std::string::npos : end - at);
  EXPECT_NE(body.find("allocator_cache"), std::string::npos) << body;
  EXPECT_NE(body.find("true"), std::string::npos) << body;
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuPlugins, ::testing::Values(kCuda, kHip),
                         [](const ::testing::TestParamInfo<Gpu>& param) {
                           return std::string(param.param.plugin);
                         });

}  // namespace
}  // namespace weft
