// The devices a process runs on: every device of every loaded device
// plugin, opened once, each with its stream, its resource manager and the
// kernels its plugin offers. Opened all at once, or lazily, a device type
// when placement first needs it (a one-op graph on the CPU never starts
// PoCL's compiler; docs/architecture.md).
//
//   WEFT_ASSIGN_OR_RETURN(auto devices, DeviceSet::Open(plugin_host));
//   const RuntimeDevice* cpu = devices->Find("/device:CPU:0");
#ifndef WEFT_CORE_RUNTIME_DEVICE_SET_H_
#define WEFT_CORE_RUNTIME_DEVICE_SET_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/plugin/device_plugin.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/resource_mgr.h"
#include "core/tensor/tensor.h"

namespace weft::runtime {

// Device memory owned by a Tensor: freed through the device's plugin when
// the last tensor using it goes.
class DeviceBuffer : public Buffer {
 public:
  DeviceBuffer(const plugin::Device* device, weft_buffer_t handle, uint64_t size)
      : Buffer(device->HostPointer(handle), size, handle, device), device_(device) {}
  ~DeviceBuffer() override { device_->Free(device_buffer()); }

 private:
  const plugin::Device* device_;
};

// The kernels one device type offers, by op.
class KernelTable {
 public:
  explicit KernelTable(const weft_device_plugin_t* table);
  // The kernels registered for |op| (empty when none).
  const std::vector<const weft_kernel_def_t*>& ForOp(std::string_view op) const;
  std::vector<std::string> Ops() const;

 private:
  std::unordered_map<std::string, std::vector<const weft_kernel_def_t*>> by_op_;
};

class RuntimeDevice {
 public:
  RuntimeDevice(std::unique_ptr<plugin::Device> device, const KernelTable* kernels, weft_stream_t stream);
  ~RuntimeDevice();
  RuntimeDevice(const RuntimeDevice&) = delete;
  RuntimeDevice& operator=(const RuntimeDevice&) = delete;

  const std::string& name() const { return device_->name(); }
  const std::string& type() const { return device_->type(); }
  const plugin::Device& device() const { return *device_; }
  weft_device_t handle() const { return device_->handle(); }
  const weft_device_plugin_t* table() const { return device_->table(); }
  weft_stream_t stream() const { return stream_; }
  const KernelTable& kernels() const { return *kernels_; }
  ResourceMgr& resources() const { return *resources_; }
  bool host_visible() const { return host_visible_; }
  // A random number fixed when the device was opened: Send/Recv keys carry
  // it so that a tensor from a device's earlier life never matches.
  uint64_t incarnation() const { return incarnation_; }
  // Copy bandwidths the plugin reports (GB/s; 0 when unknown).
  double host_to_device_gbps() const { return h2d_gbps_; }
  double device_to_host_gbps() const { return d2h_gbps_; }

  // A tensor of |dtype| and |shape| in this device's memory.
  Expected<Tensor> Allocate(DType dtype, const Shape& shape) const;
  // A copy of host tensor |host| in this device's memory.
  Expected<Tensor> CopyFromHost(const Tensor& host) const;
  // A host copy of |tensor| (already host-visible tensors are shared).
  Expected<Tensor> CopyToHost(const Tensor& tensor) const;
  // A copy of |tensor| (on this device) in a buffer of its own.
  Expected<Tensor> Duplicate(const Tensor& tensor) const;

  // Work that runs after this device's events fire (a transfer's
  // continuation) may still hold its buffers when the step that started it
  // has ended. Such work holds the device from before it is set up until
  // everything it captured is gone, and the device does not close before
  // the last hold is released.
  void Hold() const;
  void Release() const;

 private:
  std::unique_ptr<plugin::Device> device_;
  const KernelTable* kernels_;
  weft_stream_t stream_;
  std::unique_ptr<ResourceMgr> resources_;
  bool host_visible_ = false;
  uint64_t incarnation_ = 0;
  double h2d_gbps_ = 0;
  double d2h_gbps_ = 0;
  mutable std::mutex holds_mutex_;
  mutable std::condition_variable holds_released_;
  mutable int holds_ = 0;
};

class DeviceSet {
 public:
  // When each plugin's devices are counted and opened.
  enum class Opening {
    kEager,  // all at once, in Open: a device that fails to open fails Open
    kLazy,   // a type when it is first needed (Devices(types)), all of them
             // when devices() is asked for
  };

  // The devices of every device plugin |host| loaded; fails when there is
  // no device plugin (eagerly: no device) or a device fails to open.
  static Expected<std::unique_ptr<DeviceSet>> Open(const plugin::PluginHost& host, Opening opening = Opening::kEager);

  // Every device, opened now if it was not. Lazily, a plugin that fails to
  // count or open its devices is logged and left out.
  const std::vector<const RuntimeDevice*>& devices() const;
  // Opens the devices of |types| (the others stay as they are) and returns
  // every open device, in plugin order and by ordinal: what placement
  // chooses among. A type with no plugin is ignored.
  Expected<std::vector<const RuntimeDevice*>> Devices(const std::set<std::string>& types) const;
  // Whether every plugin's devices are open (nothing more can appear).
  bool all_open() const;

  // The device named exactly |name| ("/device:CPU:0"), or nullptr.
  const RuntimeDevice* Find(std::string_view name) const;
  // The device nodes go to unless they ask for another: the first CPU.
  const RuntimeDevice* default_device() const;
  std::vector<std::string> Names() const;
  // Kernel tables by device type, for every plugin, open or not.
  const std::unordered_map<std::string, std::unique_ptr<KernelTable>>& kernel_tables() const { return tables_; }
  // Device types in plugin order.
  const std::vector<std::string>& types() const { return types_; }

 private:
  struct PluginDevices {
    const plugin::DevicePlugin* plugin = nullptr;
    bool opened = false;
    std::vector<std::unique_ptr<RuntimeDevice>> devices;
  };
  // Opens plugin |p|'s devices; mutex_ held.
  Status OpenPlugin(PluginDevices& p) const;
  // Rebuilds all_ from plugins_; mutex_ held.
  void Flatten() const;

  std::unordered_map<std::string, std::unique_ptr<KernelTable>> tables_;
  std::vector<std::string> types_;
  mutable std::mutex mutex_;
  mutable std::vector<PluginDevices> plugins_;
  // The open devices in order; final once every plugin is open.
  mutable std::vector<const RuntimeDevice*> all_;
  mutable bool all_open_ = false;
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_DEVICE_SET_H_
