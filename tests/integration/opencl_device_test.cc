// The opencl device plugin on the machine's OpenCL implementation (PoCL in
// CI): its device table through the C ABI (buffers, copies, streams and
// events), the plugin answering UNAVAILABLE when nothing matches its
// section, the error of a kernel source that does not build, kernel paths
// the conformance cases are too small to reach, and a training step of a
// small MLP and CNN that must give the CPU's loss curve.
//
// Registered only when the plugin is built (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include "core/grad/gradients.h"
#include "core/plugin/host_services.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "core/tensor/npy.h"
#include "tests/support/runtime_env.h"
#include "tests/support/subprocess.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

constexpr const char* kDevice = "/device:OPENCL:0";
constexpr uint64_t k64MiB = uint64_t{64} << 20;

// Bytes of a pattern no two offsets (or seeds) share in a row.
std::vector<uint8_t> Pattern(uint64_t size, uint32_t seed) {
  std::vector<uint8_t> bytes(size);
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < size; ++i) {
    x = x * 1664525u + 1013904223u;  // Numerical Recipes' LCG
    bytes[i] = static_cast<uint8_t>(x >> 24);
  }
  return bytes;
}

// The opencl plugin alone, loaded with the section |toml|.
class OpenClDevice : public ::testing::Test {
 protected:
  void SetUp() override { Load(""); }
  void TearDown() override {
    device_.reset();
    host_.reset();
  }

  void Load(const std::string& toml) {
    device_.reset();
    auto config = config::ParseConfig(toml, "opencl.toml", "/");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config->plugins.paths = {WEFT_BUILT_PLUGIN_DIR "/weft_device_opencl.so"};
    plugin::PluginHostOptions options;
    options.use_environment = false;
    options.use_builtin_folder = false;
    host_ = std::make_unique<plugin::PluginHost>(*config, options);
    ASSERT_TRUE(host_->LoadAll().ok());
    plugin_ = host_->devices().Find("OPENCL");
    if (plugin_ == nullptr) return;
    auto device = plugin_->Open(0);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(*device);
  }

  const weft_device_plugin_t* t() const { return device_->table(); }
  weft_device_t d() const { return device_->handle(); }

  weft_stream_t NewStream() {
    weft_stream_t s = nullptr;
    EXPECT_TRUE(plugin::TakeStatus(t()->stream_create(d(), &s)).ok());
    return s;
  }
  weft_buffer_t NewBuffer(uint64_t size) {
    auto b = device_->Allocate(size);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? *b : nullptr;
  }
  Status Sync(weft_stream_t s) { return plugin::TakeStatus(t()->stream_synchronize(d(), s)); }

  std::unique_ptr<plugin::PluginHost> host_;
  const plugin::DevicePlugin* plugin_ = nullptr;
  std::unique_ptr<plugin::Device> device_;
};

TEST_F(OpenClDevice, DescribesItselfAsADeviceWithItsOwnMemory) {
  ASSERT_NE(plugin_, nullptr) << "the opencl plugin found no device; is pocl-opencl-icd installed?";
  EXPECT_EQ(device_->name(), kDevice);
  auto props = device_->Properties();
  ASSERT_TRUE(props.ok()) << props.status().ToString();
  EXPECT_FALSE(props->model.empty());
  EXPECT_FALSE(props->vendor.empty());
  EXPECT_NE(props->driver.find("OpenCL "), std::string::npos) << props->driver;
  EXPECT_FALSE(props->host_visible);
  EXPECT_GT(props->memory_bytes, 0u);
  EXPECT_GE(props->compute_units, 1);
  // CL_DEVICE_MEM_BASE_ADDR_ALIGN is in bits, and a power of two.
  EXPECT_GE(props->alignment, 1u);
  EXPECT_EQ(props->alignment & (props->alignment - 1), 0u) << props->alignment;
  std::map<std::string, std::string> extra(props->extra.begin(), props->extra.end());
  EXPECT_EQ(extra.count("platform"), 1u);
  EXPECT_EQ(extra.count("fp64"), 1u);
  weft_buffer_t buffer = NewBuffer(16);
  EXPECT_EQ(device_->HostPointer(buffer), nullptr);
  device_->Free(buffer);
}

TEST_F(OpenClDevice, CopiesRoundTrip64MiBAndZeroBytes) {
  ASSERT_NE(device_, nullptr);
  weft_stream_t s = NewStream();
  const std::vector<uint8_t> data = Pattern(k64MiB, 1);
  weft_buffer_t a = NewBuffer(k64MiB), b = NewBuffer(k64MiB + 4096);
  // Host -> a, a -> b at an offset, b -> host.
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_host_to_device(d(), s, data.data(), a, 0, k64MiB)).ok());
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_device(d(), s, a, 0, b, 4096, k64MiB)).ok());
  std::vector<uint8_t> back(k64MiB, 0);
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_host(d(), s, b, 4096, back.data(), k64MiB)).ok());
  ASSERT_TRUE(Sync(s).ok());
  EXPECT_TRUE(back == data);

  // Overlapping copies inside one buffer behave as memmove.
  std::vector<uint8_t> small = Pattern(256, 2), want = small;
  std::memmove(want.data() + 64, want.data(), 128);
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_host_to_device(d(), s, small.data(), a, 0, 256)).ok());
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_device(d(), s, a, 0, a, 64, 128)).ok());
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_host(d(), s, a, 0, small.data(), 256)).ok());
  ASSERT_TRUE(Sync(s).ok());
  EXPECT_TRUE(small == want);

  // Empty buffers are real buffers, and empty copies do nothing.
  weft_buffer_t empty = NewBuffer(0);
  ASSERT_NE(empty, nullptr);
  uint8_t byte = 7;
  EXPECT_TRUE(plugin::TakeStatus(t()->copy_host_to_device(d(), s, &byte, empty, 0, 0)).ok());
  EXPECT_TRUE(plugin::TakeStatus(t()->copy_device_to_host(d(), s, empty, 0, &byte, 0)).ok());
  EXPECT_TRUE(plugin::TakeStatus(t()->copy_device_to_device(d(), s, empty, 0, a, 0, 0)).ok());
  EXPECT_TRUE(plugin::TakeStatus(t()->buffer_memset(d(), s, empty, 0, 1, 0)).ok());
  EXPECT_TRUE(Sync(s).ok());
  EXPECT_EQ(byte, 7);
  for (weft_buffer_t buffer : {a, b, empty}) device_->Free(buffer);
  t()->stream_destroy(d(), s);
}

TEST_F(OpenClDevice, MemsetAndRangeErrors) {
  ASSERT_NE(device_, nullptr);
  weft_stream_t s = NewStream();
  weft_buffer_t buffer = NewBuffer(100);
  std::vector<uint8_t> zeros(100, 0), back(100, 1);
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_host_to_device(d(), s, zeros.data(), buffer, 0, 100)).ok());
  ASSERT_TRUE(plugin::TakeStatus(t()->buffer_memset(d(), s, buffer, 10, 0xab, 7)).ok());
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_host(d(), s, buffer, 0, back.data(), 100)).ok());
  ASSERT_TRUE(Sync(s).ok());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(back[i], i >= 10 && i < 17 ? 0xab : 0) << i;

  Status beyond = plugin::TakeStatus(t()->copy_device_to_host(d(), s, buffer, 96, back.data(), 8));
  EXPECT_EQ(beyond.code(), Code::kOutOfRange);
  EXPECT_EQ(beyond.message(), "copy_device_to_host: bytes [96, 104) outside a buffer of 100 bytes");
  Status memset = plugin::TakeStatus(t()->buffer_memset(d(), s, buffer, 101, 0, 0));
  EXPECT_EQ(memset.message(), "buffer_memset: bytes [101, 101) outside a buffer of 100 bytes");

  auto huge = device_->Allocate(uint64_t{1} << 50);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("cannot allocate 1125899906842624 bytes on "), std::string::npos)
      << huge.status().message();
  EXPECT_NE(huge.status().message().find("(/device:OPENCL:0): more than the largest buffer it allows "
                                         "(CL_DEVICE_MAX_MEM_ALLOC_SIZE = "),
            std::string::npos)
      << huge.status().message();

  auto missing = plugin_->Open(99);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("no /device:OPENCL:99 ("), std::string::npos) << missing.status().message();
  device_->Free(buffer);
  t()->stream_destroy(d(), s);
}

struct Calls {
  std::atomic<int> count{0};
  std::promise<std::string> done;
};

void OnReady(void* user, weft_status_t status) {
  auto* calls = static_cast<Calls*>(user);
  Status s = plugin::TakeStatus(status);
  if (calls->count.fetch_add(1) == 0) calls->done.set_value(s.ok() ? "ok" : s.ToString());
}

TEST_F(OpenClDevice, EventsSignalOnceTheWorkBeforeThemIsDone) {
  ASSERT_NE(device_, nullptr);
  weft_stream_t writer = NewStream(), reader = NewStream();
  weft_event_t event = nullptr;
  ASSERT_TRUE(plugin::TakeStatus(t()->event_create(d(), &event)).ok());

  // Never recorded: ready at once, and the callback runs exactly once.
  Calls unrecorded;
  ASSERT_TRUE(plugin::TakeStatus(t()->event_on_ready(d(), event, OnReady, &unrecorded)).ok());
  EXPECT_EQ(unrecorded.count.load(), 1);
  EXPECT_TRUE(plugin::TakeStatus(t()->event_synchronize(d(), event)).ok());
  Status null_callback = plugin::TakeStatus(t()->event_on_ready(d(), event, nullptr, nullptr));
  EXPECT_EQ(null_callback.message(), "event_on_ready: NULL callback");

  const std::vector<uint8_t> data = Pattern(k64MiB, 3);
  weft_buffer_t buffer = NewBuffer(k64MiB);
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_host_to_device(d(), writer, data.data(), buffer, 0, k64MiB)).ok());
  ASSERT_TRUE(plugin::TakeStatus(t()->event_record(d(), event, writer)).ok());
  Calls calls;
  std::future<std::string> fired = calls.done.get_future();
  ASSERT_TRUE(plugin::TakeStatus(t()->event_on_ready(d(), event, OnReady, &calls)).ok());
  // A bound on a hang, not a timing assertion.
  ASSERT_EQ(fired.wait_for(std::chrono::minutes(2)), std::future_status::ready);
  EXPECT_EQ(fired.get(), "ok");
  // Once the event fired the copy before it is complete: another stream,
  // which waits for nothing, reads every byte of it.
  std::vector<uint8_t> back(k64MiB);
  ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_host(d(), reader, buffer, 0, back.data(), k64MiB)).ok());
  ASSERT_TRUE(Sync(reader).ok());
  EXPECT_TRUE(back == data);
  EXPECT_TRUE(plugin::TakeStatus(t()->event_synchronize(d(), event)).ok());
  EXPECT_EQ(calls.count.load(), 1);

  t()->event_destroy(d(), event);
  device_->Free(buffer);
  t()->stream_destroy(d(), writer);
  t()->stream_destroy(d(), reader);
}

TEST_F(OpenClDevice, StreamWaitEventOrdersWorkAcrossStreams) {
  ASSERT_NE(device_, nullptr);
  weft_stream_t first = NewStream(), second = NewStream();
  weft_event_t event = nullptr;
  ASSERT_TRUE(plugin::TakeStatus(t()->event_create(d(), &event)).ok());
  weft_buffer_t x = NewBuffer(k64MiB), y = NewBuffer(k64MiB);
  std::vector<uint8_t> back(k64MiB);
  for (uint32_t round = 0; round < 2; ++round) {
    const std::vector<uint8_t> data = Pattern(k64MiB, 10 + round);
    // The first stream fills x; the second copies x to y only after the
    // event, so it must see all of the first stream's write.
    ASSERT_TRUE(plugin::TakeStatus(t()->copy_host_to_device(d(), first, data.data(), x, 0, k64MiB)).ok());
    ASSERT_TRUE(plugin::TakeStatus(t()->event_record(d(), event, first)).ok());
    ASSERT_TRUE(plugin::TakeStatus(t()->stream_wait_event(d(), second, event)).ok());
    ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_device(d(), second, x, 0, y, 0, k64MiB)).ok());
    ASSERT_TRUE(plugin::TakeStatus(t()->copy_device_to_host(d(), second, y, 0, back.data(), k64MiB)).ok());
    ASSERT_TRUE(Sync(second).ok());
    EXPECT_TRUE(back == data) << "round " << round;
    ASSERT_TRUE(Sync(first).ok());
  }
  t()->event_destroy(d(), event);
  device_->Free(x);
  device_->Free(y);
  t()->stream_destroy(d(), first);
  t()->stream_destroy(d(), second);
}

TEST_F(OpenClDevice, NoMatchingPlatformMakesThePluginUnavailable) {
  Load("[devices.opencl]\nplatform = \"no-such-platform\"\n");
  EXPECT_EQ(plugin_, nullptr);
  bool listed = false;
  for (const plugin::PluginInfo& info : host_->plugins()) {
    if (info.name != "opencl") continue;
    listed = true;
    EXPECT_EQ(info.state, plugin::PluginState::kUnavailable);
    EXPECT_TRUE(
        info.reason.starts_with("no OpenCL platform matches devices.opencl.platform = \"no-such-platform\" "
                                "(the platforms are \""))
        << info.reason;
    EXPECT_TRUE(info.reason.ends_with("); set it to part of one of those names, or remove it")) << info.reason;
  }
  EXPECT_TRUE(listed);

  // `weft plugins` lists it as unavailable and succeeds.
  const fs::path config = fs::temp_directory_path() / StrCat("weft_opencl_test_", getpid(), ".toml");
  std::ofstream(config) << "[devices.opencl]\nplatform = \"no-such-platform\"\n";
  testing::ProcessResult r =
      testing::Run({WEFT_CLI, "--config", config.string(), "plugins"}, {{"WEFT_PLUGIN_PATH", ""}});
  fs::remove(config);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  bool row = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::vector<std::string> words{std::istream_iterator<std::string>(cells), std::istream_iterator<std::string>()};
    row = row || (words.size() >= 5 && words[0] == "opencl" && words[4] == "unavailable");
  }
  EXPECT_TRUE(row) << r.out;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

TEST_F(OpenClDevice, NoDeviceOfTheTypeMakesThePluginUnavailable) {
  // PoCL's platform has CPU devices only.
  Load("[devices.opencl]\nplatform = \"portable computing\"\ndevice_type = \"accelerator\"\n");
  const plugin::PluginInfo* info = host_->FindPlugin("opencl");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->state, plugin::PluginState::kUnavailable);
  if (info->reason.starts_with("no OpenCL platform matches")) GTEST_SKIP() << "PoCL is not installed: " << info->reason;
  EXPECT_EQ(info->reason,
            "no available OpenCL device of type accelerator on platform \"Portable Computing Language\" "
            "(devices.opencl.device_type = \"accelerator\"); choose another type, or \"all\"");
}

TEST(OpenClPlugin, NoPlatformAtAllIsUnavailableWithTheFix) {
  // ocl-icd (Debian's ICD loader) reads the installed platforms from
  // OCL_ICD_VENDORS: an empty folder means none.
  const fs::path empty = fs::temp_directory_path() / StrCat("weft_opencl_no_icd_", getpid());
  fs::create_directories(empty);
  testing::ProcessResult r =
      testing::Run({WEFT_CLI, "plugins", "--json"}, {{"WEFT_PLUGIN_PATH", ""}, {"OCL_ICD_VENDORS", empty.string()}});
  fs::remove_all(empty);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"name\":\"opencl\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"status\":\"unavailable\",\"reason\":\"no OpenCL platform found (clGetPlatformIDs: "
                       "CL_PLATFORM_NOT_FOUND_KHR (-1001)); install an ICD such as pocl-opencl-icd, or your GPU "
                       "vendor's OpenCL driver\""),
            std::string::npos)
      << r.out;
}

// --- Opening devices when placement needs them ---------------------------------------

TEST(OpenClPlugin, ALazyDeviceSetOpensATypeWhenAsked) {
  auto config = config::ParseConfig("", "lazy.toml", "/");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  config->plugins.paths = {WEFT_BUILT_PLUGIN_DIR "/weft_device_cpu.so", WEFT_BUILT_PLUGIN_DIR "/weft_device_opencl.so"};
  plugin::PluginHostOptions options;
  options.use_environment = false;
  options.use_builtin_folder = false;
  options.defer_device_count = true;
  plugin::PluginHost host(*config, options);
  ASSERT_TRUE(host.LoadAll().ok());
  auto devices = runtime::DeviceSet::Open(host, runtime::DeviceSet::Opening::kLazy);
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  EXPECT_EQ((*devices)->types(), (std::vector<std::string>{"CPU", "OPENCL"}));
  EXPECT_FALSE((*devices)->all_open());
  auto cpu = (*devices)->Devices({"CPU"});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_EQ(cpu->size(), 1u);
  EXPECT_EQ(cpu->front()->name(), "/device:CPU:0");
  EXPECT_FALSE((*devices)->all_open());
  // A type with no plugin is ignored; asking for everything opens the rest.
  auto same = (*devices)->Devices({"CPU", "TPU"});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->size(), 1u);
  const std::vector<const runtime::RuntimeDevice*>& all = (*devices)->devices();
  EXPECT_TRUE((*devices)->all_open());
  ASSERT_GE(all.size(), 1u);
  EXPECT_EQ(all.front(), cpu->front());  // plugin order, the same device
  if (all.size() == 1) GTEST_SKIP() << "no OpenCL platform here";
  EXPECT_EQ(all[1]->name(), kDevice);
}

TEST(OpenClPlugin, ARunOnTheCpuNeverOpensOpenClAndAPinToItDoes) {
  const fs::path dir = fs::temp_directory_path() / StrCat("weft_opencl_lazy_", getpid());
  fs::create_directories(dir);
  auto graph = [&](const std::string& device) {
    const std::string path = (dir / StrCat("neg", device.empty() ? "" : "_pinned", ".wgt")).string();
    std::ofstream(path) << "( nodes = [\n"
                           "  ( name = \"x\", op = \"Placeholder\", attrs = [\n"
                           "      (name = \"dtype\", value = (type = f32)),\n"
                           "      (name = \"shape\", value = (shape = (dims = []))) ] ),\n"
                           "  ( name = \"y\", op = \"Neg\", inputs = [\"x\"], device = \""
                        << device << "\", attrs = [ (name = \"T\", value = (type = f32)) ] ) ] )\n";
    return path;
  };
  ASSERT_TRUE(WriteNpy((dir / "x.npy").string(), Tensor::Scalar<float>(1.5f)).ok());
  auto run = [&](const std::string& path, std::map<std::string, std::string> env) {
    env["WEFT_PLUGIN_PATH"] = "";
    return testing::Run({WEFT_CLI, "--log-level", "debug", "run", path, "--feed", "x=" + (dir / "x.npy").string(),
                         "--fetch", "y", "--out", dir.string()},
                        env);
  };
  // Every plugin is installed; the Neg runs on the CPU, and nothing else
  // is counted, opened or loaded.
  testing::ProcessResult r = run(graph(""), {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("y: f32[] {-1.5}"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("opened 1 device of plugin 'cpu' in "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("of plugin 'opencl'"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("loaded transport plugin"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("collectives plugin"), std::string::npos) << r.err;

  // A node the graph puts on the OpenCL device opens it.
  const std::string pinned = graph(kDevice);
  r = run(pinned, {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("y: f32[] {-1.5}"), std::string::npos) << r.out;
  const bool pocl = r.err.find("opened 1 device of plugin 'opencl' in ") != std::string::npos;

  // With no OpenCL platform the plugin turns out to have no device when
  // counted: soft placement puts the node on the CPU, as when the plugin
  // was found unavailable at load.
  const fs::path empty = dir / "no_icd";
  fs::create_directories(empty);
  r = run(pinned, {{"OCL_ICD_VENDORS", empty.string()}});
  fs::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("y: f32[] {-1.5}"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("device plugin 'opencl' is unavailable: no OpenCL platform found"), std::string::npos) << r.err;
  if (!pocl) GTEST_SKIP() << "no OpenCL platform here";
}

// --- Kernels -------------------------------------------------------------------------

std::string Message(const Status& s) { return s.ok() ? "OK" : s.ToString(); }

TEST(OpenClKernels, ASourceThatDoesNotBuildNamesProgramDeviceAndCompilerLog) {
  const fs::path dir = fs::temp_directory_path() / StrCat("weft_opencl_kernels_", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "elementwise.cl") << "__kernel void relu(__global float* x) { x[0] = undefined_name; }\n";
  {
    testing::RuntimeEnv env(StrCat("[devices.opencl]\nkernel_source_dir = \"", dir.string(), "\"\n"));
    GraphBuilder b;
    {
      auto scope = b.DeviceScope(kDevice);
      b.Op("Relu", {b.Const(Tensor::FromVector<float>({-1, 2}))}, {}, "relu");
      // Programs the folder does not replace are the built-in ones.
      b.Op("Softmax", {b.Const(Tensor::FromVector<float>({0, 0}))}, {}, "softmax");
    }
    auto session = env.Session(b);
    ASSERT_NE(session, nullptr);
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({}, {"softmax"}, {}, &out).ok());
    EXPECT_FLOAT_EQ(out[0].data<float>()[0], 0.5f);

    Status s = session->Run({}, {"relu"}, {}, &out);
    ASSERT_FALSE(s.ok());
    const std::string m = s.message();
    EXPECT_EQ(s.code(), Code::kInternal) << m;
    EXPECT_TRUE(m.starts_with("node 'relu' (Relu) on /device:OPENCL:0: OpenCL program 'elementwise' (-DT=float ")) << m;
    EXPECT_NE(m.find(StrCat(") from ", dir.string(), "/elementwise.cl failed to build on ")), std::string::npos) << m;
    EXPECT_NE(m.find(" (/device:OPENCL:0): clBuildProgram: CL_BUILD_PROGRAM_FAILURE (-11); the compiler says:\n"),
              std::string::npos)
        << m;
    // The compiler's own words, naming what it could not compile.
    EXPECT_NE(m.find("undefined_name"), std::string::npos) << m;
  }
  fs::remove_all(dir);
}

// Values with no pattern a wrong index could reproduce by chance.
std::vector<float> Values(std::size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / static_cast<float>(1 << 24) - 0.5f;
  }
  return v;
}

TEST(OpenClKernels, LongSumsMatchAnExactReference) {
  testing::RuntimeEnv env;
  // Sums of 20000 small integers are exact in float and double, whatever
  // the order: the reference is integer arithmetic. Few outputs and a long
  // axis take the chunked path (reduction.cc).
  const int64_t rows = 20000;
  std::vector<float> x(static_cast<std::size_t>(rows * 3));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int64_t>(i % 7) - 3);
  std::vector<int64_t> want(3, 0);
  for (std::size_t i = 0; i < x.size(); ++i) want[i % 3] += static_cast<int64_t>(i % 7) - 3;
  GraphBuilder b;
  {
    auto scope = b.DeviceScope(kDevice);
    const Output input = b.Const(Tensor::FromVector<float>(x, Shape{rows, 3}));
    b.Op("Sum", {input}, {{"axis", AttrValue(std::vector<int64_t>{0})}}, "sum");
    b.Op("BiasAddGrad", {input}, {}, "bias_grad");
  }
  auto session = env.Session(b);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  Status s = session->Run({}, {"sum", "bias_grad"}, {}, &out);
  ASSERT_TRUE(s.ok()) << Message(s);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(out[0].data<float>()[j], static_cast<float>(want[static_cast<std::size_t>(j)])) << j;
    EXPECT_EQ(out[1].data<float>()[j], static_cast<float>(want[static_cast<std::size_t>(j)])) << j;
  }
}

// Both MatMul kernels (devices.opencl.matmul_kernel), with sizes that fill
// neither their tiles nor their vectors, every transposition, and a batch
// broadcast, against a double loop.
TEST(OpenClKernels, BothMatMulKernelsMatchAReference) {
  const int64_t m = 130, k = 70, n = 90;
  for (const char* kernel : {"tiled", "blocked"}) {
    testing::RuntimeEnv env(StrCat("[devices.opencl]\nmatmul_kernel = \"", kernel, "\"\n"));
    auto props = env.devices()->Find(kDevice)->device().Properties();
    ASSERT_TRUE(props.ok());
    bool reported = false;
    for (const auto& [key, value] : props->extra) reported = reported || (key == "matmul_kernel" && value == kernel);
    EXPECT_TRUE(reported) << kernel;
    for (int t = 0; t < 4; ++t) {
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      SCOPED_TRACE(StrCat(kernel, " transpose_a=", ta, " transpose_b=", tb));
      const std::vector<float> a = Values(static_cast<std::size_t>(m * k), 5 + t);
      const std::vector<float> bv = Values(static_cast<std::size_t>(k * n), 9 + t);
      // A(i, p) and B(p, j) as stored.
      auto at = [&](int64_t i, int64_t p) { return a[static_cast<std::size_t>(ta ? p * m + i : i * k + p)]; };
      auto bt = [&](int64_t p, int64_t j) { return bv[static_cast<std::size_t>(tb ? j * k + p : p * n + j)]; };
      GraphBuilder b;
      {
        auto scope = b.DeviceScope(kDevice);
        b.Op("MatMul",
             {b.Const(Tensor::FromVector<float>(a, ta ? Shape{k, m} : Shape{m, k})),
              b.Const(Tensor::FromVector<float>(bv, tb ? Shape{n, k} : Shape{k, n}))},
             {{"transpose_a", AttrValue(ta)}, {"transpose_b", AttrValue(tb)}}, "matmul");
        // Two batches of A against one B, broadcast.
        std::vector<float> two = a;
        two.insert(two.end(), a.begin(), a.end());
        b.Op("BatchMatMul",
             {b.Const(Tensor::FromVector<float>(two, ta ? Shape{2, k, m} : Shape{2, m, k})),
              b.Const(Tensor::FromVector<float>(bv, tb ? Shape{1, n, k} : Shape{1, k, n}))},
             {{"adj_x", AttrValue(ta)}, {"adj_y", AttrValue(tb)}}, "batched");
      }
      auto session = env.Session(b);
      ASSERT_NE(session, nullptr);
      std::vector<Tensor> out;
      Status s = session->Run({}, {"matmul", "batched"}, {}, &out);
      ASSERT_TRUE(s.ok()) << Message(s);
      ASSERT_EQ(out[0].shape(), (Shape{m, n}));
      ASSERT_EQ(out[1].shape(), (Shape{2, m, n}));
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          for (int64_t p = 0; p < k; ++p) ref += static_cast<double>(at(i, p)) * bt(p, j);
          ASSERT_NEAR(out[0].data<float>()[i * n + j], ref, 1e-5) << i << "," << j;
          ASSERT_NEAR(out[1].data<float>()[i * n + j], ref, 1e-5) << i << "," << j;
          ASSERT_NEAR(out[1].data<float>()[m * n + i * n + j], ref, 1e-5) << i << "," << j;
        }
      }
    }
  }
}

TEST(OpenClKernels, AssignAddAndAssignSubUpdateADeviceVariable) {
  testing::RuntimeEnv env;
  GraphBuilder b;
  {
    auto scope = b.DeviceScope(kDevice);
    for (DType dtype : {DType::kF32, DType::kI64}) {
      const std::string name = StrCat("v_", DTypeName(dtype));
      const Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(dtype)}, {"shape", AttrValue(Shape{3})}}, name);
      const Tensor init = dtype == DType::kF32 ? Tensor::FromVector<float>({1.5f, -2, 4})
                                               : Tensor::FromVector<int64_t>({INT64_MAX, -2, 4});
      const Tensor delta =
          dtype == DType::kF32 ? Tensor::FromVector<float>({0.25f, 1, -8}) : Tensor::FromVector<int64_t>({1, 10, -8});
      b.Op("Assign", {v, b.Const(init)}, {}, "init_" + name);
      b.Op("AssignAdd", {v, b.Const(delta)}, {}, "add_" + name);
      b.Op("AssignSub", {v, b.Const(delta)}, {}, "sub_" + name);
      b.Op("ReadVariable", {v}, {{"dtype", AttrValue(dtype)}}, "read_" + name);
    }
  }
  auto session = env.Session(b);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {}, {"init_v_f32", "init_v_i64"}, nullptr).ok());
  Status s = session->Run({}, {}, {"add_v_f32", "add_v_i64"}, nullptr);
  ASSERT_TRUE(s.ok()) << Message(s);
  ASSERT_TRUE(session->Run({}, {"read_v_f32", "read_v_i64"}, {}, &out).ok());
  EXPECT_EQ(out[0].data<float>()[0], 1.75f);
  EXPECT_EQ(out[0].data<float>()[1], -1.0f);
  EXPECT_EQ(out[0].data<float>()[2], -4.0f);
  EXPECT_EQ(out[1].data<int64_t>()[0], INT64_MIN);  // wraps, as the CPU's
  EXPECT_EQ(out[1].data<int64_t>()[1], 8);
  ASSERT_TRUE(session->Run({}, {}, {"sub_v_f32", "sub_v_i64"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"read_v_f32", "read_v_i64"}, {}, &out).ok());
  EXPECT_EQ(out[0].data<float>()[0], 1.5f);
  EXPECT_EQ(out[1].data<int64_t>()[0], INT64_MAX);
  EXPECT_EQ(out[1].data<int64_t>()[2], 4);
}

// --- Training ------------------------------------------------------------------------

Tensor Random(const Shape& shape, uint32_t seed, float scale) {
  std::vector<float> v = Values(static_cast<std::size_t>(shape.num_elements()), seed);
  for (float& f : v) f *= scale;
  return Tensor::FromVector<float>(v, shape);
}

// A model under training: its variables (handles), what initialises them,
// and its loss.
struct Model {
  GraphBuilder b;
  std::vector<Output> variables;
  std::vector<Output> inits;
  Output loss;

  // A variable starting at |initial|; |trained| ones are the model's.
  Output Variable(const Tensor& initial, std::string_view name, bool trained = true) {
    const Output v =
        b.Op("VarHandle", {}, {{"dtype", AttrValue(initial.dtype())}, {"shape", AttrValue(initial.shape())}}, name);
    inits.push_back(b.Op("Assign", {v, b.Const(initial)}, {}, StrCat("init_", name)));
    if (trained) variables.push_back(v);
    return v;
  }
  Output Read(Output v, DType dtype = DType::kF32) { return b.Op("ReadVariable", {v}, {{"dtype", AttrValue(dtype)}}); }
};

// A classifier of 16 examples into 4 classes, as the sample models are
// built: an MLP of 20 -> 32 -> 4, or a CNN (3x3 convolution to 4 channels,
// ReLU, 2x2 max pooling, dense to 4) on 8x8 images; constant data.
void BuildModel(Model& m, bool cnn) {
  GraphBuilder& b = m.b;
  std::vector<int64_t> labels(16);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>((i * 7) % 4);
  Output logits;
  if (!cnn) {
    const Output x = b.Const(Random(Shape{16, 20}, 1, 2));
    const Output w1 = m.Read(m.Variable(Random(Shape{20, 32}, 2, 0.5f), "w1"));
    const Output b1 = m.Read(m.Variable(Random(Shape{32}, 3, 0.1f), "b1"));
    const Output w2 = m.Read(m.Variable(Random(Shape{32, 4}, 4, 0.5f), "w2"));
    const Output b2 = m.Read(m.Variable(Random(Shape{4}, 5, 0.1f), "b2"));
    const Output h = b.Op("Relu", {b.Op("BiasAdd", {b.Op("MatMul", {x, w1}), b1})});
    logits = b.Op("BiasAdd", {b.Op("MatMul", {h, w2}), b2});
  } else {
    const Output x = b.Const(Random(Shape{16, 8, 8, 1}, 6, 2));
    const Output f = m.Read(m.Variable(Random(Shape{3, 3, 1, 4}, 7, 0.5f), "filter"));
    const Output bc = m.Read(m.Variable(Random(Shape{4}, 8, 0.1f), "conv_bias"));
    const Output w = m.Read(m.Variable(Random(Shape{64, 4}, 9, 0.5f), "w"));
    const Output conv = b.Op("Conv2D", {x, f}, {{"padding", AttrValue(std::string("SAME"))}});
    const Output pooled = b.Op("MaxPool", {b.Op("Relu", {b.Op("BiasAdd", {conv, bc})})},
                               {{"ksize", AttrValue(std::vector<int64_t>{1, 2, 2, 1})},
                                {"strides", AttrValue(std::vector<int64_t>{1, 2, 2, 1})},
                                {"padding", AttrValue(std::string("VALID"))}});
    const Output flat = b.Op("Reshape", {pooled, b.Const(Tensor::FromVector<int64_t>({16, 64}))});
    logits = b.Op("MatMul", {flat, w});
  }
  const Output xent =
      b.AddNode("SparseSoftmaxCrossEntropyWithLogits", {logits, b.Const(Tensor::FromVector<int64_t>(labels))})[0];
  m.loss = b.Op("Mean", {xent});
}

// The loss at each of |steps| steps of gradient descent or Adam (lr 0.01)
// with the whole graph on |device|: the model, its gradients
// (grad::AddGradients, as the trainer builds them) and the fused updates.
std::vector<float> LossCurve(testing::RuntimeEnv& env, bool cnn, bool adam, const std::string& device, int steps) {
  Model m;
  auto scope = m.b.DeviceScope(device);
  // Variables live as long as the process, by name: each model has its own.
  auto names = m.b.NameScope(StrCat(cnn ? "cnn" : "mlp", adam ? "_adam" : "_sgd"));
  BuildModel(m, cnn);
  GraphBuilder& b = m.b;
  auto grads = grad::AddGradients(b, {m.loss}, m.variables);
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  if (!grads.ok()) return {};
  const Output lr = b.Scalar<float>(0.01f, "lr");
  const Output step_var = m.Variable(Tensor::Scalar<int64_t>(0), "step", false);
  const Output step = b.Op("Add", {m.Read(step_var, DType::kI64), b.Scalar<int64_t>(1)});
  // Adam's slots, zero at first.
  std::vector<std::pair<Output, Output>> slots;
  for (std::size_t i = 0; adam && i < m.variables.size(); ++i) {
    const Shape& shape = (*grads)[i].shape();
    const Tensor zeros =
        Tensor::FromVector<float>(std::vector<float>(static_cast<std::size_t>(shape.num_elements()), 0.0f), shape);
    slots.emplace_back(m.Variable(zeros, StrCat("m", i), false), m.Variable(zeros, StrCat("v", i), false));
  }
  std::vector<Output> updates;
  {
    // The loss is read before any variable changes.
    auto after = b.ControlDependencies({m.loss});
    for (std::size_t i = 0; i < m.variables.size(); ++i) {
      const Output v = m.variables[i], g = (*grads)[i];
      if (!adam) {
        updates.push_back(b.Op("ResourceApplyGradientDescent", {v, lr, g}));
      } else {
        updates.push_back(b.Op("ResourceApplyAdam", {v, slots[i].first, slots[i].second, lr, b.Scalar<float>(0.9f),
                                                     b.Scalar<float>(0.999f), b.Scalar<float>(1e-8f), step, g}));
      }
    }
  }
  std::string train, init;
  {
    auto after = b.ControlDependencies(updates);
    train = b.Op("Assign", {step_var, step}, {}, "train").node_name();
  }
  {
    auto after = b.ControlDependencies(m.inits);
    init = b.Op("NoOp", {}, {}, "init").node_name();
  }
  auto session = env.Session(b);
  if (session == nullptr) return {};
  Status s = session->Run({}, {}, {init}, nullptr);
  EXPECT_TRUE(s.ok()) << Message(s);
  std::vector<float> losses;
  for (int i = 0; i < steps && s.ok(); ++i) {
    std::vector<Tensor> out;
    s = session->Run({}, {m.loss.name()}, {train}, &out);
    EXPECT_TRUE(s.ok()) << device << " step " << i << ": " << Message(s);
    if (s.ok()) losses.push_back(out[0].data<float>()[0]);
  }
  return losses;
}

TEST(OpenClTraining, MlpAndCnnFollowTheCpuLossCurve) {
  testing::RuntimeEnv env;
  for (bool cnn : {false, true}) {
    for (bool adam : {false, true}) {
      SCOPED_TRACE(StrCat(cnn ? "CNN" : "MLP", " with ", adam ? "Adam" : "gradient descent"));
      const std::vector<float> cpu = LossCurve(env, cnn, adam, "/device:CPU:0", 5);
      const std::vector<float> opencl = LossCurve(env, cnn, adam, kDevice, 5);
      ASSERT_EQ(cpu.size(), 5u);
      ASSERT_EQ(opencl.size(), 5u);
      EXPECT_LT(cpu.back(), cpu.front());  // it learns
      for (std::size_t i = 0; i < cpu.size(); ++i) {
        EXPECT_NEAR(opencl[i], cpu[i], 1e-5 * std::fabs(cpu[i])) << "step " << i;
      }
    }
  }
}

}  // namespace
}  // namespace weft
