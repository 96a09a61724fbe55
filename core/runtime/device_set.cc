#include "core/runtime/device_set.h"

#include <chrono>
#include <cstring>
#include <random>

#include "core/base/logging.h"
#include "core/plugin/host_services.h"
#include "core/tensor/size.h"
#include "weft/sdk/struct.h"

namespace weft::runtime {

KernelTable::KernelTable(const weft_device_plugin_t* table) {
  for (const weft_kernel_def_t& def : sdk::StructArray(table->kernels, table->num_kernels)) {
    by_op_[def.op].push_back(&def);
  }
}

const std::vector<const weft_kernel_def_t*>& KernelTable::ForOp(std::string_view op) const {
  static const std::vector<const weft_kernel_def_t*> kNone;
  auto it = by_op_.find(std::string(op));
  return it == by_op_.end() ? kNone : it->second;
}

std::vector<std::string> KernelTable::Ops() const {
  std::vector<std::string> ops;
  for (const auto& [op, defs] : by_op_) ops.push_back(op);
  return ops;
}

RuntimeDevice::RuntimeDevice(std::unique_ptr<plugin::Device> device, const KernelTable* kernels, weft_stream_t stream)
    : device_(std::move(device)), kernels_(kernels), stream_(stream), resources_(std::make_unique<ResourceMgr>()) {
  auto props = device_->Properties();
  host_visible_ = props.ok() && props->host_visible && device_->table()->buffer_host_pointer != nullptr;
  if (props.ok()) {
    h2d_gbps_ = props->host_to_device_gbps;
    d2h_gbps_ = props->device_to_host_gbps;
  }
  std::random_device entropy;
  incarnation_ = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  // Send/Recv attrs carry it as a (signed) int attr.
  incarnation_ &= 0x7fffffffffffffffull;
}

RuntimeDevice::~RuntimeDevice() {
  // Continuations of this device's events may still be pending: let the
  // stream finish so that its events fire, then wait for the work they set
  // off to let go of this device's buffers.
  if (stream_ != nullptr) {
    Status synced = plugin::TakeStatus(device_->table()->stream_synchronize(device_->handle(), stream_));
    if (!synced.ok()) {
      WEFT_LOG(WARNING) << name() << ": finishing the stream before closing: " << synced.message();
    }
  }
  {
    std::unique_lock<std::mutex> lock(holds_mutex_);
    constexpr auto kPatience = std::chrono::seconds(30);
    if (!holds_released_.wait_for(lock, kPatience, [this] { return holds_ == 0; })) {
      WEFT_LOG(WARNING) << name() << ": closing with " << holds_
                        << " event continuation(s) still pending after 30 s; the plugin did not report its "
                           "events as ready";
    }
  }
  // Variables hold device memory: release them before the device closes.
  resources_.reset();
  if (stream_ != nullptr) device_->table()->stream_destroy(device_->handle(), stream_);
}

void RuntimeDevice::Hold() const {
  std::lock_guard<std::mutex> lock(holds_mutex_);
  ++holds_;
}

void RuntimeDevice::Release() const {
  std::lock_guard<std::mutex> lock(holds_mutex_);
  if (--holds_ == 0) holds_released_.notify_all();
}

Expected<Tensor> RuntimeDevice::Allocate(DType dtype, const Shape& shape) const {
  if (dtype == DType::kString || dtype == DType::kResource) return Tensor::Allocate(dtype, shape);
  WEFT_ASSIGN_OR_RETURN(const uint64_t bytes, TensorBytes(dtype, shape));
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t handle, device_->Allocate(bytes));
  return Tensor(dtype, shape, std::make_shared<DeviceBuffer>(device_.get(), handle, bytes));
}

Expected<Tensor> RuntimeDevice::CopyFromHost(const Tensor& host) const {
  if (host.dtype() == DType::kString || host.dtype() == DType::kResource) return host;
  WEFT_ASSIGN_OR_RETURN(Tensor out, Allocate(host.dtype(), host.shape()));
  if (host.byte_size() == 0) return out;
  if (out.raw_data() != nullptr) {
    std::memcpy(out.raw_data(), host.raw_data(), host.byte_size());
    return out;
  }
  const weft_device_plugin_t* t = table();
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(t->copy_host_to_device(
      handle(), stream_, host.raw_data(), out.buffer()->device_buffer(), out.offset(), host.byte_size())));
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(t->stream_synchronize(handle(), stream_)));
  return out;
}

Expected<Tensor> RuntimeDevice::CopyToHost(const Tensor& tensor) const {
  if (tensor.host_visible()) return tensor;
  WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(tensor.dtype(), tensor.shape()));
  const weft_device_plugin_t* t = table();
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(t->copy_device_to_host(handle(), stream_, tensor.buffer()->device_buffer(),
                                                                 tensor.offset(), out.raw_data(), tensor.byte_size())));
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(t->stream_synchronize(handle(), stream_)));
  return out;
}

Expected<Tensor> RuntimeDevice::Duplicate(const Tensor& tensor) const {
  if (tensor.dtype() == DType::kString) return tensor.DeepCopy();
  WEFT_ASSIGN_OR_RETURN(Tensor out, Allocate(tensor.dtype(), tensor.shape()));
  if (tensor.byte_size() == 0) return out;
  if (out.raw_data() != nullptr && tensor.raw_data() != nullptr) {
    std::memcpy(out.raw_data(), tensor.raw_data(), tensor.byte_size());
    return out;
  }
  const weft_device_plugin_t* t = table();
  WEFT_RETURN_IF_ERROR(
      plugin::TakeStatus(t->copy_device_to_device(handle(), stream_, tensor.buffer()->device_buffer(), tensor.offset(),
                                                  out.buffer()->device_buffer(), out.offset(), tensor.byte_size())));
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(t->stream_synchronize(handle(), stream_)));
  return out;
}

Expected<std::unique_ptr<DeviceSet>> DeviceSet::Open(const plugin::PluginHost& host, Opening opening) {
  auto set = std::make_unique<DeviceSet>();
  for (const plugin::DevicePlugin* device_plugin : host.devices().All()) {
    set->tables_[device_plugin->device_type()] = std::make_unique<KernelTable>(device_plugin->table());
    set->types_.push_back(device_plugin->device_type());
    PluginDevices p;
    p.plugin = device_plugin;
    set->plugins_.push_back(std::move(p));
  }
  if (set->plugins_.empty()) {
    return FailedPreconditionError("no devices: no device plugin is loaded (see `weft plugins`)");
  }
  if (opening == Opening::kEager) {
    std::lock_guard<std::mutex> lock(set->mutex_);
    for (PluginDevices& p : set->plugins_) WEFT_RETURN_IF_ERROR(set->OpenPlugin(p));
    set->Flatten();
    if (set->all_.empty()) {
      return FailedPreconditionError("no devices: no device plugin is loaded (see `weft plugins`)");
    }
  }
  return set;
}

Status DeviceSet::OpenPlugin(PluginDevices& p) const {
  if (p.opened) return Status();
  p.opened = true;
  auto count = p.plugin->DeviceCount();
  if (count.status().code() == Code::kUnavailable) {
    WEFT_LOG(DEBUG) << "device plugin '" << p.plugin->plugin_name() << "' is unavailable: " << count.status().message();
    return Status();
  }
  if (!count.ok()) {
    return count.status().WithContext(StrCat("device plugin '", p.plugin->plugin_name(), "': device_count"));
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < *count; ++i) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<plugin::Device> device, p.plugin->Open(i));
    weft_stream_t stream = nullptr;
    WEFT_RETURN_IF_ERROR(plugin::TakeStatus(device->table()->stream_create(device->handle(), &stream))
                             .WithContext(StrCat(device->name(), ": creating a stream")));
    const KernelTable* table = tables_.at(p.plugin->device_type()).get();
    p.devices.push_back(std::make_unique<RuntimeDevice>(std::move(device), table, stream));
  }
  WEFT_LOG(DEBUG) << "opened " << *count << " device" << (*count == 1 ? "" : "s") << " of plugin '"
                  << p.plugin->plugin_name() << "' in "
                  << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
                  << " ms";
  return Status();
}

void DeviceSet::Flatten() const {
  all_.clear();
  all_open_ = true;
  for (const PluginDevices& p : plugins_) {
    all_open_ = all_open_ && p.opened;
    for (const auto& d : p.devices) all_.push_back(d.get());
  }
}

const std::vector<const RuntimeDevice*>& DeviceSet::devices() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!all_open_) {
    for (PluginDevices& p : plugins_) {
      if (Status s = OpenPlugin(p); !s.ok()) {
        WEFT_LOG(WARNING) << s.ToString() << "; its devices are left out";
      }
    }
    Flatten();
  }
  return all_;
}

Expected<std::vector<const RuntimeDevice*>> DeviceSet::Devices(const std::set<std::string>& types) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!all_open_) {
    for (PluginDevices& p : plugins_) {
      if (types.contains(p.plugin->device_type())) WEFT_RETURN_IF_ERROR(OpenPlugin(p));
    }
    Flatten();
  }
  return all_;
}

bool DeviceSet::all_open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return all_open_;
}

const RuntimeDevice* DeviceSet::Find(std::string_view name) const {
  for (const RuntimeDevice* d : devices()) {
    if (d->name() == name) return d;
  }
  return nullptr;
}

const RuntimeDevice* DeviceSet::default_device() const {
  auto cpu = Devices({"CPU"});
  const std::vector<const RuntimeDevice*>& open = cpu.ok() ? *cpu : devices();
  for (const RuntimeDevice* d : open) {
    if (d->type() == "CPU") return d;
  }
  const std::vector<const RuntimeDevice*>& all = devices();
  return all.empty() ? nullptr : all.front();
}

std::vector<std::string> DeviceSet::Names() const {
  std::vector<std::string> names;
  for (const RuntimeDevice* d : devices()) names.push_back(d->name());
  return names;
}

}  // namespace weft::runtime
