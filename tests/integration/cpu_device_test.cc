// The CPU device plugin through its C table, as the runtime will use it.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/plugin/host_services.h"
#include "core/plugin/plugin_host.h"

namespace weft::plugin {
namespace {

class CpuDevice : public ::testing::Test {
 protected:
  void Load(const std::string& toml) {
    auto config = config::ParseConfig(toml, "cpu.toml", "/");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config->plugins.paths = {WEFT_BUILT_PLUGIN_DIR "/weft_device_cpu.so"};
    PluginHostOptions options;
    options.use_environment = false;
    options.use_builtin_folder = false;
    host_ = std::make_unique<PluginHost>(*config, options);
    ASSERT_TRUE(host_->LoadAll().ok());
    cpu_ = host_->devices().Find("CPU");
    ASSERT_NE(cpu_, nullptr);
  }
  void SetUp() override { Load(""); }
  void TearDown() override {
    cpu_ = nullptr;
    host_.reset();
  }

  std::unique_ptr<PluginHost> host_;
  const DevicePlugin* cpu_ = nullptr;
};

TEST_F(CpuDevice, ReportsOneDeviceWithProperties) {
  ASSERT_EQ(*cpu_->DeviceCount(), 1);
  auto device = cpu_->Open(0);
  ASSERT_TRUE(device.ok());
  EXPECT_EQ((*device)->name(), "/device:CPU:0");
  auto props = (*device)->Properties();
  ASSERT_TRUE(props.ok());
  EXPECT_FALSE(props->model.empty());
  EXPECT_GT(props->memory_bytes, uint64_t{1} << 28);
  EXPECT_EQ(props->alignment, 64u);
  EXPECT_TRUE(props->host_visible);
  EXPECT_GE(props->compute_units, 1);
  bool has_cores = false;
  for (const auto& [key, value] : props->extra) has_cores = has_cores || key == "cores";
  EXPECT_TRUE(has_cores);
}

TEST_F(CpuDevice, CountComesFromItsSection) {
  Load("[devices.cpu]\ncount = 2\n");
  ASSERT_EQ(*cpu_->DeviceCount(), 2);
  auto second = cpu_->Open(1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->name(), "/device:CPU:1");
  auto third = cpu_->Open(2);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), Code::kNotFound);
  EXPECT_EQ(third.status().message(), "opening /device:CPU:2: no /device:CPU:2 (2 configured by devices.cpu.count)");
}

TEST_F(CpuDevice, BuffersAreAlignedAndHostVisible) {
  auto device = *cpu_->Open(0);
  for (uint64_t size : {0, 1, 63, 64, 4097, 1 << 20}) {
    auto buffer = device->Allocate(size);
    ASSERT_TRUE(buffer.ok()) << size;
    void* data = device->HostPointer(*buffer);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 64, 0u) << size;
    device->Free(*buffer);
  }
}

TEST_F(CpuDevice, HugeAllocationIsResourceExhausted) {
  auto device = *cpu_->Open(0);
  auto buffer = device->Allocate(uint64_t{1} << 62);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(buffer.status().message(),
            "/device:CPU:0: allocating 4611686018427387904 bytes: cannot allocate "
            "4611686018427387904 bytes of host memory (0 MiB in use on /device:CPU:0)");
}

TEST_F(CpuDevice, CopiesStreamsAndEvents) {
  auto device = *cpu_->Open(0);
  const weft_device_plugin_t* t = device->table();
  weft_device_t d = device->handle();
  std::vector<float> input(1000);
  std::iota(input.begin(), input.end(), 0.5f);
  const uint64_t bytes = input.size() * sizeof(float);
  weft_buffer_t a = *device->Allocate(bytes);
  weft_buffer_t b = *device->Allocate(bytes + 16);
  weft_stream_t stream = nullptr;
  ASSERT_EQ(t->stream_create(d, &stream), nullptr);
  weft_event_t event = nullptr;
  ASSERT_EQ(t->event_create(d, &event), nullptr);

  ASSERT_EQ(t->copy_host_to_device(d, stream, input.data(), a, 0, bytes), nullptr);
  ASSERT_EQ(t->buffer_memset(d, stream, b, 0, 0xff, 16), nullptr);
  ASSERT_EQ(t->copy_device_to_device(d, stream, a, 0, b, 16, bytes), nullptr);
  std::vector<float> output(input.size());
  ASSERT_EQ(t->copy_device_to_host(d, stream, b, 16, output.data(), bytes), nullptr);
  ASSERT_EQ(t->event_record(d, event, stream), nullptr);
  bool fired = false;
  ASSERT_EQ(t->event_on_ready(
                d, event, [](void* user, weft_status_t s) { *static_cast<bool*>(user) = s == nullptr; }, &fired),
            nullptr);
  EXPECT_TRUE(fired);
  ASSERT_EQ(t->event_synchronize(d, event), nullptr);
  ASSERT_EQ(t->stream_synchronize(d, stream), nullptr);
  EXPECT_EQ(output, input);
  auto* head = static_cast<unsigned char*>(device->HostPointer(b));
  EXPECT_EQ(head[0], 0xff);
  EXPECT_EQ(head[15], 0xff);

  t->event_destroy(d, event);
  t->stream_destroy(d, stream);
  device->Free(a);
  device->Free(b);
}

TEST_F(CpuDevice, OutOfRangeCopyIsAnError) {
  auto device = *cpu_->Open(0);
  const weft_device_plugin_t* t = device->table();
  weft_buffer_t a = *device->Allocate(100);
  char scratch[200] = {};
  Status status = TakeStatus(t->copy_host_to_device(device->handle(), nullptr, scratch, a, 50, 51));
  EXPECT_EQ(status.code(), Code::kOutOfRange);
  EXPECT_EQ(status.message(), "copy_host_to_device: bytes [50, 101) outside a buffer of 100 bytes");
  status = TakeStatus(t->copy_device_to_host(device->handle(), nullptr, a, 101, scratch, 0));
  EXPECT_EQ(status.message(), "copy_device_to_host: bytes [101, 101) outside a buffer of 100 bytes");
  device->Free(a);
}

TEST_F(CpuDevice, PeerCopyBetweenTwoCpuDevices) {
  Load("[devices.cpu]\ncount = 2\n");
  auto d0 = *cpu_->Open(0);
  auto d1 = *cpu_->Open(1);
  const weft_device_plugin_t* t = d0->table();
  ASSERT_NE(t->copy_peer, nullptr);
  weft_buffer_t src = *d0->Allocate(8);
  weft_buffer_t dst = *d1->Allocate(8);
  std::memcpy(d0->HostPointer(src), "weftweft", 8);
  ASSERT_EQ(t->copy_peer(d0->handle(), nullptr, src, 0, d1->handle(), dst, 0, 8), nullptr);
  EXPECT_EQ(std::memcmp(d1->HostPointer(dst), "weftweft", 8), 0);
  d0->Free(src);
  d1->Free(dst);
}

}  // namespace
}  // namespace weft::plugin
