// The cuda and hip device plugins as built in this tree, through the real
// plugin host and the real `weft` binary.
//
// What the plugins must say is checked against the runtime itself: the
// test loads the CUDA (HIP) runtime library on its own, asks it for the
// device count, and expects the plugin's answer to carry the runtime's
// words. Without a GPU (every machine here) the plugin must be listed as
// unavailable, not refused, with that reason, and the CPU device must keep
// working; with one, it must be loaded and its devices must work. Each
// plugin's tests are compiled in only when the plugin is built.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/plugin/host_services.h"
#include "core/plugin/plugin_host.h"
#include "tests/support/output_text.h"
#include "tests/support/plugin_checks.h"
#include "tests/support/plugin_config.h"
#include "tests/support/test_dir.h"
#include "tests/support/weft_cli.h"
#include "weft/weft_plugin.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using plugin::PluginHost;
using plugin::PluginState;
using testing::HasRow;
using testing::Isolated;
using testing::MakeConfig;
using testing::ProcessResult;
using testing::RunWeft;

// One GPU plugin and the runtime library it is built on.
struct GpuPlugin {
  const char* name;         // "cuda"
  const char* device_type;  // "CUDA"
  const char* runtime;      // the runtime library's path
  const char* count_call;   // "cudaGetDeviceCount"
  const char* string_call;  // "cudaGetErrorString"
  const char* name_call;    // "cudaGetErrorName"

  bool has_front;  // cuda: the file the host loads is a front (gpu_front.cc)

  std::string file() const { return StrCat(WEFT_BUILT_PLUGIN_DIR, "/weft_device_", name, ".so"); }
  // The library with the device table and the kernels: the front loads it
  // once a device is found.
  std::string implementation() const {
    return has_front ? StrCat(WEFT_BUILT_PLUGIN_DIR, "/", name, "/weft_device_", name, "_impl.so") : file();
  }
};

std::ostream& operator<<(std::ostream& out, const GpuPlugin& p) { return out << p.name; }

std::vector<GpuPlugin> BuiltPlugins() {
  std::vector<GpuPlugin> plugins;
#ifdef WEFT_TEST_CUDA_RUNTIME
  plugins.push_back(
      {"cuda", "CUDA", WEFT_TEST_CUDA_RUNTIME, "cudaGetDeviceCount", "cudaGetErrorString", "cudaGetErrorName", true});
#endif
#ifdef WEFT_TEST_HIP_RUNTIME
  plugins.push_back(
      {"hip", "HIP", WEFT_TEST_HIP_RUNTIME, "hipGetDeviceCount", "hipGetErrorString", "hipGetErrorName", false});
#endif
  return plugins;
}

// What the runtime, asked directly, says about this machine.
struct Probe {
  int error = -1;
  int count = 0;
  std::string name;  // "cudaErrorInsufficientDriver"
  std::string text;  // "CUDA driver version is insufficient for CUDA runtime version"
  bool has_gpu() const { return error == 0 && count > 0; }
};

Probe AskRuntime(const GpuPlugin& p) {
  Probe probe;
  void* lib = dlopen(p.runtime, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << p.runtime << ": " << dlerror();
  if (lib == nullptr) return probe;
  // Both runtimes return their error enum, an int, and take int*.
  using CountFn = int (*)(int*);
  using TextFn = const char* (*)(int);
  auto count = reinterpret_cast<CountFn>(dlsym(lib, p.count_call));
  auto text = reinterpret_cast<TextFn>(dlsym(lib, p.string_call));
  auto name = reinterpret_cast<TextFn>(dlsym(lib, p.name_call));
  EXPECT_TRUE(count != nullptr && text != nullptr && name != nullptr) << p.runtime;
  if (count == nullptr || text == nullptr || name == nullptr) return probe;
  probe.error = count(&probe.count);
  probe.name = name(probe.error);
  probe.text = text(probe.error);
  // The library stays loaded: the plugin uses the same one.
  return probe;
}

class GpuPluginTest : public ::testing::TestWithParam<GpuPlugin> {
 protected:
  void SetUp() override { probe_ = AskRuntime(GetParam()); }

  // The parts of the plugin's UNAVAILABLE message that come from the
  // runtime and from the plugin's advice.
  void ExpectTheRuntimesReason(const std::string& reason) {
    const GpuPlugin& p = GetParam();
    EXPECT_TRUE(reason.starts_with(StrCat("no usable ", p.device_type, " device: ", p.count_call))) << reason;
    EXPECT_NE(reason.find(probe_.name), std::string::npos) << reason;
    EXPECT_NE(reason.find(probe_.text), std::string::npos) << reason;
    EXPECT_NE(reason.find(StrCat("or disable the plugin with [plugins] disable = [\"", p.name, "\"]")),
              std::string::npos)
        << reason;
  }

  Probe probe_;
  testing::TestDir dir_{StrCat("weft_gpu_test_", GetParam().name)};
};

TEST_P(GpuPluginTest, IsUnavailableWithTheRuntimesReasonOrLoadedWithItsDevices) {
  const GpuPlugin& p = GetParam();
  PluginHost host(MakeConfig(), Isolated());
  ASSERT_TRUE(host.Load(p.file()).ok());
  ASSERT_EQ(host.plugins().size(), 1u);
  const plugin::PluginInfo& info = host.plugins()[0];
  EXPECT_EQ(info.name, p.name);
  EXPECT_EQ(info.kind, plugin::PluginKind::kDevice);
  EXPECT_EQ(info.version, "0.1.0");
  EXPECT_EQ(info.abi_major, 1u);
  if (probe_.has_gpu()) {
    EXPECT_EQ(info.state, PluginState::kLoaded) << info.reason;
    const plugin::DevicePlugin* gpu = host.devices().Find(p.device_type);
    ASSERT_NE(gpu, nullptr);
    auto count = gpu->DeviceCount();
    ASSERT_TRUE(count.ok()) << count.status().ToString();
    EXPECT_EQ(*count, probe_.count);
    auto device = gpu->Open(0);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    auto props = (*device)->Properties();
    ASSERT_TRUE(props.ok()) << props.status().ToString();
    EXPECT_FALSE(props->model.empty());
    EXPECT_FALSE(props->host_visible);
    EXPECT_GT(props->memory_bytes, 0u);
    return;
  }
  EXPECT_EQ(info.state, PluginState::kUnavailable);
  ExpectTheRuntimesReason(info.reason);
  EXPECT_EQ(host.devices().Find(p.device_type), nullptr);
  // Without a device, nothing heavy is loaded: not the implementation,
  // not its vendor libraries (the front links the runtime only). The
  // dynamic loader lists every library a `weft devices` process opens.
  ProcessResult r = RunWeft({"devices"}, {{"LD_DEBUG", "files"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_NE(r.err.find(StrCat("weft_device_", p.name, ".so")), std::string::npos) << "LD_DEBUG lists no plugin";
  for (const char* library : {"_impl.so", "libcublas", "libcudnn"}) {
    EXPECT_EQ(r.err.find(library), std::string::npos) << library << " is loaded without a device";
  }
}

TEST_P(GpuPluginTest, StrictModeNeverRefusesAnUnavailablePlugin) {
  if (probe_.has_gpu()) GTEST_SKIP() << "a GPU is present: the plugin is loaded";
  testing::ExpectStrictModeLeavesItUnavailable(GetParam().file());
}

TEST_P(GpuPluginTest, DeclaresItsOptionAndTheHostChecksIt) {
  const GpuPlugin& p = GetParam();
  {
    PluginHost host(MakeConfig(), Isolated());
    ASSERT_TRUE(host.Load(p.file()).ok());
    ASSERT_EQ(host.plugins()[0].options.size(), 1u);
    EXPECT_EQ(host.plugins()[0].options[0].key, "allocator_cache");
  }
  {
    config::Config config = MakeConfig(StrCat("[devices.", p.name, "]\nallocator_cache = false\n"));
    config.plugins.paths = {p.file()};
    PluginHost host(config, Isolated());
    Status loaded = host.LoadAll();
    EXPECT_TRUE(loaded.ok()) << loaded.ToString();
  }
  config::Config config = MakeConfig(StrCat("[devices.", p.name, "]\nallocator_cache = 3\n"));
  config.plugins.paths = {p.file()};
  PluginHost host(config, Isolated());
  Status loaded = host.LoadAll();
  EXPECT_FALSE(loaded.ok());
  EXPECT_NE(
      loaded.message().find(StrCat("test.toml:2:19: devices.", p.name, ".allocator_cache: expected a boolean, got 3")),
      std::string::npos)
      << loaded.ToString();
}

// The device table itself, through the plugin's entry point: without a
// GPU, device_count and device_open both answer UNAVAILABLE with the
// reason; with one, memory, copies, streams and events work.
// Both files of a plugin with a front: the front (without a device, its
// own table answering UNAVAILABLE; with one, the implementation's) and the
// implementation itself.
TEST_P(GpuPluginTest, FrontAndImplementationAnswerAlike) {
  const GpuPlugin& p = GetParam();
  if (!p.has_front) GTEST_SKIP() << p.name << " has no front";
  std::vector<std::string> reasons;
  for (const std::string& file : {p.file(), p.implementation()}) {
    void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib, nullptr) << dlerror();
    auto init = reinterpret_cast<weft_plugin_init_fn>(dlsym(lib, WEFT_PLUGIN_ENTRY_SYMBOL));
    ASSERT_NE(init, nullptr) << file;
    const weft_plugin_t* description = nullptr;
    ASSERT_EQ(plugin::TakeStatus(init(plugin::HostTable(), &description)).ToString(), "OK") << file;
    EXPECT_STREQ(description->name, p.name) << file;
    EXPECT_STREQ(description->version, "0.1.0") << file;
    ASSERT_EQ(description->num_options, 1u) << file;
    EXPECT_STREQ(description->options[0].key, "allocator_cache") << file;
    EXPECT_STREQ(description->device->device_type, p.device_type) << file;
    int32_t count = -1;
    Status counted = plugin::TakeStatus(description->device->device_count(&count));
    if (probe_.has_gpu()) {
      EXPECT_TRUE(counted.ok()) << file << ": " << counted.ToString();
    } else {
      EXPECT_EQ(counted.code(), Code::kUnavailable) << file;
      reasons.push_back(counted.message());
    }
  }
  if (!reasons.empty()) {
    ASSERT_EQ(reasons.size(), 2u);
    EXPECT_EQ(reasons[0], reasons[1]);
  }
}

TEST_P(GpuPluginTest, DeviceTableAnswersForItself) {
  const GpuPlugin& p = GetParam();
  void* lib = dlopen(p.implementation().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto init = reinterpret_cast<weft_plugin_init_fn>(dlsym(lib, WEFT_PLUGIN_ENTRY_SYMBOL));
  ASSERT_NE(init, nullptr);
  const weft_plugin_t* description = nullptr;
  // The plugin's description is static: initialising it again (the host
  // of another test may have) gives the same one.
  ASSERT_EQ(plugin::TakeStatus(init(plugin::HostTable(), &description)).ToString(), "OK");
  ASSERT_NE(description, nullptr);
  ASSERT_NE(description->device, nullptr);
  const weft_device_plugin_t* table = description->device;
  EXPECT_STREQ(table->device_type, p.device_type);
  EXPECT_GT(table->num_kernels, 50u);
  EXPECT_EQ(table->buffer_host_pointer, nullptr);  // device memory is not host-addressable

  int32_t count = -1;
  Status counted = plugin::TakeStatus(table->device_count(&count));
  weft_device_t device = nullptr;
  if (!probe_.has_gpu()) {
    EXPECT_EQ(counted.code(), Code::kUnavailable);
    ExpectTheRuntimesReason(counted.message());
    Status opened = plugin::TakeStatus(table->device_open(0, &device));
    EXPECT_EQ(opened.code(), Code::kUnavailable);
    EXPECT_EQ(opened.message(), counted.message());
    EXPECT_EQ(device, nullptr);
    return;
  }

  ASSERT_TRUE(counted.ok()) << counted.ToString();
  ASSERT_EQ(count, probe_.count);
  Status missing = plugin::TakeStatus(table->device_open(count, &device));
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(missing.message(),
            StrCat("no /device:", p.device_type, ":", count, " (", count, " ", p.device_type, " device(s) found)"));
  ASSERT_TRUE(plugin::TakeStatus(table->device_open(0, &device)).ok());
  weft_stream_t stream = nullptr;
  ASSERT_TRUE(plugin::TakeStatus(table->stream_create(device, &stream)).ok());
  weft_buffer_t a = nullptr, b = nullptr;
  ASSERT_TRUE(plugin::TakeStatus(table->buffer_alloc(device, 4096, &a)).ok());
  ASSERT_TRUE(plugin::TakeStatus(table->buffer_alloc(device, 4096, &b)).ok());
  // Host -> a, a -> b (device to device), memset the tail of b, b -> host.
  std::vector<uint8_t> in(4096), out(4096, 0xAA);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(plugin::TakeStatus(table->copy_host_to_device(device, stream, in.data(), a, 0, 4096)).ok());
  ASSERT_TRUE(plugin::TakeStatus(table->copy_device_to_device(device, stream, a, 0, b, 0, 4096)).ok());
  ASSERT_TRUE(plugin::TakeStatus(table->buffer_memset(device, stream, b, 4000, 0x5C, 96)).ok());
  ASSERT_TRUE(plugin::TakeStatus(table->copy_device_to_host(device, stream, b, 0, out.data(), 4096)).ok());
  weft_event_t event = nullptr;
  ASSERT_TRUE(plugin::TakeStatus(table->event_create(device, &event)).ok());
  ASSERT_TRUE(plugin::TakeStatus(table->event_record(device, event, stream)).ok());
  testing::Done done;
  ASSERT_TRUE(plugin::TakeStatus(table->event_on_ready(device, event, testing::Done::Call, &done)).ok());
  EXPECT_EQ(done.Wait(), "OK");
  ASSERT_TRUE(plugin::TakeStatus(table->stream_synchronize(device, stream)).ok());
  for (std::size_t i = 0; i < 4000; ++i) ASSERT_EQ(out[i], static_cast<uint8_t>(i * 7)) << i;
  for (std::size_t i = 4000; i < 4096; ++i) ASSERT_EQ(out[i], 0x5C) << i;
  // A copy past a buffer's end is refused before anything is enqueued.
  Status past = plugin::TakeStatus(table->copy_device_to_host(device, stream, b, 4000, out.data(), 200));
  EXPECT_EQ(past.code(), Code::kOutOfRange);
  EXPECT_EQ(past.message(), "copy_device_to_host: bytes [4000, 4200) outside a buffer of 4096 bytes");
  table->event_destroy(device, event);
  table->buffer_free(device, a);
  table->buffer_free(device, b);
  table->stream_destroy(device, stream);
  table->device_close(device);
}

TEST_P(GpuPluginTest, WeftPluginsListsItWithTheReason) {
  const GpuPlugin& p = GetParam();
  ProcessResult r = RunWeft({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string state = probe_.has_gpu() ? "loaded" : "unavailable";
  EXPECT_TRUE(HasRow(r.out, {p.name, "device", "1.3", "0.1.0", state, p.file()})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"cpu", "device", "1.3", "0.1.0", "loaded"})) << r.out;
  if (probe_.has_gpu()) return;
  // Below the table, one line per plugin that is not loaded: its reason.
  const std::optional<std::string> reason = testing::RestOfLine(r.out, StrCat("\n", p.name, ": unavailable: "));
  ASSERT_TRUE(reason.has_value()) << r.out;
  ExpectTheRuntimesReason(*reason);

  r = RunWeft({"plugins", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(StrCat("{\"name\":\"", p.name, "\",\"kind\":\"device\"")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(StrCat("\"path\":\"", p.file(), "\",\"status\":\"unavailable\",\"reason\":\"no usable ")),
            std::string::npos)
      << r.out;
}

TEST_P(GpuPluginTest, WeftDevicesStillListsTheCpu) {
  const GpuPlugin& p = GetParam();
  ProcessResult r = RunWeft({"devices"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("/device:CPU:0  (plugin cpu)\n")) << r.out;
  const std::string gpu = StrCat("/device:", p.device_type, ":0  (plugin ", p.name, ")\n");
  if (probe_.has_gpu()) {
    EXPECT_NE(r.out.find(gpu), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("  host visible   no\n"), std::string::npos) << r.out;
  } else {
    EXPECT_EQ(r.out.find(StrCat("/device:", p.device_type, ":")), std::string::npos) << r.out;
    // The host notes an unavailable plugin at debug level only.
    EXPECT_EQ(r.err.find(StrCat("plugin '", p.name, "'")), std::string::npos) << r.err;
    ProcessResult verbose = RunWeft({"--log-level", "debug", "devices"});
    ASSERT_EQ(verbose.exit_code, 0) << verbose.err;
    EXPECT_NE(verbose.err.find(StrCat("plugin '", p.name, "' (", p.file(), ") is unavailable: no usable ")),
              std::string::npos)
        << verbose.err;
  }
}

TEST_P(GpuPluginTest, TheDisableHintWorks) {
  const GpuPlugin& p = GetParam();
  const std::string config = dir_.Write("off.toml", StrCat("[plugins]\ndisable = [\"", p.name, "\"]\n"));
  ProcessResult r = RunWeft({"--config", config, "plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(HasRow(r.out, {p.name, "device", "-", "-", "disabled", p.file()})) << r.out;
  EXPECT_NE(r.out.find(StrCat(p.name, ": disabled: disabled by plugins.disable in ", config)), std::string::npos)
      << r.out;
}

// The plugins see the SDK only: nothing but the entry point is exported,
// and libweft is not linked (tests/sdk/layering_test.sh checks every plugin
// the same way).
TEST_P(GpuPluginTest, ExportsOnlyItsEntryPoint) {
  const std::string dynamic =
      testing::ExpectOnlyTheEntryPointExported(WEFT_TEST_NM, WEFT_TEST_READELF, GetParam().file());
  // The file the host loads needs the runtime only; the vendor's heavy
  // libraries are the implementation's, loaded once a device is found.
  EXPECT_EQ(dynamic.find("libcublas"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libcudnn"), std::string::npos) << dynamic;
}

INSTANTIATE_TEST_SUITE_P(Built, GpuPluginTest, ::testing::ValuesIn(BuiltPlugins()),
                         [](const ::testing::TestParamInfo<GpuPlugin>& param) {
                           return std::string(param.param.name);
                         });

#ifdef WEFT_TEST_CUDA_RUNTIME
// The nccl collectives plugin (plugins/collectives/nccl), built where NCCL
// is found next to the CUDA toolkit: a front that links the CUDA runtime
// only, and an implementation, loaded once a device is found, that links
// NCCL. Skipped when the plugin was not built.
struct NcclPlugin {
  static std::string file() { return StrCat(WEFT_BUILT_PLUGIN_DIR, "/weft_collectives_nccl.so"); }
  static std::string implementation() { return StrCat(WEFT_BUILT_PLUGIN_DIR, "/nccl/weft_collectives_nccl_impl.so"); }
  static bool built() { return fs::exists(file()); }
};

const GpuPlugin kCudaRuntime{
    "cuda", "CUDA", WEFT_TEST_CUDA_RUNTIME, "cudaGetDeviceCount", "cudaGetErrorString", "cudaGetErrorName", true};

TEST(NcclPluginTest, WeftPluginsListsItWithTheRuntimesReason) {
  if (!NcclPlugin::built()) GTEST_SKIP() << NcclPlugin::file() << " was not built";
  const Probe probe = AskRuntime(kCudaRuntime);
  ProcessResult r = RunWeft({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string state = probe.has_gpu() ? "loaded" : "unavailable";
  EXPECT_TRUE(HasRow(r.out, {"nccl", "collectives", "1.3", "0.1.0", state, NcclPlugin::file()})) << r.out;
  if (probe.has_gpu()) return;
  // Below the table: the reason, in the CUDA runtime's words.
  const std::string reason = probe.error != 0 ? StrCat("no CUDA device: cudaGetDeviceCount: ", probe.text)
                                              : std::string("no CUDA device: cudaGetDeviceCount found 0");
  EXPECT_NE(r.out.find(StrCat("\nnccl: unavailable: ", reason, "\n")), std::string::npos) << r.out;
}

// The implementation needs NCCL; the file the host loads does not: the
// 218 MB libnccl.so.2 is mapped only once a device is found.
TEST(NcclPluginTest, TheImplementationNeedsNccl) {
  if (!NcclPlugin::built()) GTEST_SKIP() << NcclPlugin::file() << " was not built";
  const std::string dynamic = testing::DynamicSection(WEFT_TEST_READELF, NcclPlugin::implementation());
  EXPECT_NE(dynamic.find("Shared library: [libnccl.so.2]"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libweft"), std::string::npos) << dynamic;
}

TEST(NcclPluginTest, TheFrontDoesNotNeedNccl) {
  if (!NcclPlugin::built()) GTEST_SKIP() << NcclPlugin::file() << " was not built";
  const std::string dynamic = testing::DynamicSection(WEFT_TEST_READELF, NcclPlugin::file());
  EXPECT_NE(dynamic.find("libcudart"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libnccl"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find("libweft"), std::string::npos) << dynamic;
}
#endif  // WEFT_TEST_CUDA_RUNTIME

}  // namespace
}  // namespace weft
