// C++ adapters over a device plugin's C table: DevicePlugin (the plugin)
// and Device (one open device, closed when destroyed).
//
//   const DevicePlugin* cpu = host.devices().Find("CPU");
//   WEFT_ASSIGN_OR_RETURN(int count, cpu->DeviceCount());
//   WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Device> dev, cpu->Open(0));
//   WEFT_ASSIGN_OR_RETURN(DeviceProperties props, dev->Properties());
//
// Every call converts the plugin's status and prefixes the device or
// plugin name, so an error reads "/device:CPU:0: buffer_alloc: ...".
#ifndef WEFT_CORE_PLUGIN_DEVICE_PLUGIN_H_
#define WEFT_CORE_PLUGIN_DEVICE_PLUGIN_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "weft/weft_device.h"

namespace weft::plugin {

struct DeviceProperties {
  std::string model;
  std::string vendor;
  std::string driver;
  uint64_t memory_bytes = 0;
  uint64_t alignment = 0;
  bool host_visible = false;
  int compute_units = 0;
  double host_to_device_gbps = 0;
  double device_to_host_gbps = 0;
  double device_to_device_gbps = 0;
  std::vector<std::pair<std::string, std::string>> extra;
};

class DevicePlugin;

// One open device. Not copyable; closes the device when destroyed. Safe to
// use from several threads as the plugin table allows.
class Device {
 public:
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // "/device:CPU:0"
  const std::string& name() const { return name_; }
  const std::string& type() const;
  int ordinal() const { return ordinal_; }
  const DevicePlugin& plugin() const { return *plugin_; }
  weft_device_t handle() const { return handle_; }
  const weft_device_plugin_t* table() const;

  Expected<DeviceProperties> Properties() const;

  // Device memory; see weft_device_plugin_t for the contracts.
  Expected<weft_buffer_t> Allocate(uint64_t size) const;
  void Free(weft_buffer_t buffer) const;
  // The host address of |buffer|, or nullptr when not host-visible.
  void* HostPointer(weft_buffer_t buffer) const;

 private:
  friend class DevicePlugin;
  Device(const DevicePlugin* plugin, int ordinal, weft_device_t handle);

  const DevicePlugin* plugin_;
  int ordinal_;
  weft_device_t handle_;
  std::string name_;
};

class DevicePlugin {
 public:
  DevicePlugin(std::string plugin_name, const weft_device_plugin_t* table)
      : plugin_name_(std::move(plugin_name)), table_(table), device_type_(table->device_type) {}

  const std::string& plugin_name() const { return plugin_name_; }
  const std::string& device_type() const { return device_type_; }
  const weft_device_plugin_t* table() const { return table_; }

  // The plugin's device count; UNAVAILABLE (with the plugin's reason) when
  // it cannot serve here. Asked once; later calls return the first answer.
  Expected<int> DeviceCount() const;
  Expected<std::unique_ptr<Device>> Open(int ordinal) const;

 private:
  std::string plugin_name_;
  const weft_device_plugin_t* table_;
  std::string device_type_;
  mutable std::once_flag counted_;
  mutable std::optional<Expected<int>> count_;
};

// Checks a device table against ABI 1.0: size, device type, required
// members, and the kernel list. The message says what is wrong.
Status ValidateDeviceTable(const weft_device_plugin_t* table);

}  // namespace weft::plugin

#endif  // WEFT_CORE_PLUGIN_DEVICE_PLUGIN_H_
