#include "core/plugin/device_plugin.h"

#include "core/plugin/host_services.h"
#include "weft/sdk/struct.h"

namespace weft::plugin {

Device::Device(const DevicePlugin* plugin, int ordinal, weft_device_t handle)
    : plugin_(plugin),
      ordinal_(ordinal),
      handle_(handle),
      name_(StrCat("/device:", plugin->device_type(), ":", ordinal)) {}

Device::~Device() { plugin_->table()->device_close(handle_); }

const std::string& Device::type() const { return plugin_->device_type(); }
const weft_device_plugin_t* Device::table() const { return plugin_->table(); }

Expected<DeviceProperties> Device::Properties() const {
  auto raw = sdk::Make<weft_device_properties_t>();
  WEFT_RETURN_IF_ERROR(
      TakeStatus(table()->device_properties(handle_, &raw)).WithContext(StrCat(name_, ": properties")));
  DeviceProperties props;
  auto text = [](const char* s) { return s != nullptr ? std::string(s) : std::string(); };
  props.model = text(raw.model);
  props.vendor = text(raw.vendor);
  props.driver = text(raw.driver);
  props.memory_bytes = raw.memory_bytes;
  props.alignment = raw.alignment;
  props.host_visible = raw.host_visible != 0;
  props.compute_units = raw.compute_units;
  props.host_to_device_gbps = raw.host_to_device_gbps;
  props.device_to_host_gbps = raw.device_to_host_gbps;
  props.device_to_device_gbps = raw.device_to_device_gbps;
  if (raw.extra != nullptr && raw.num_extra > 0) {
    if (raw.extra->struct_size < WEFT_PROPERTY_SIZE_V1_0) {
      return InternalError(name_, ": properties: weft_property_t.struct_size is ", raw.extra->struct_size,
                           " bytes, smaller than ABI 1.0 needs");
    }
    for (const weft_property_t& p : sdk::StructArray(raw.extra, raw.num_extra)) {
      props.extra.emplace_back(text(p.key), text(p.value));
    }
  }
  return props;
}

Expected<weft_buffer_t> Device::Allocate(uint64_t size) const {
  weft_buffer_t buffer = nullptr;
  WEFT_RETURN_IF_ERROR(TakeStatus(table()->buffer_alloc(handle_, size, &buffer))
                           .WithContext(StrCat(name_, ": allocating ", size, " bytes")));
  return buffer;
}

void Device::Free(weft_buffer_t buffer) const { table()->buffer_free(handle_, buffer); }

void* Device::HostPointer(weft_buffer_t buffer) const {
  if (table()->buffer_host_pointer == nullptr) return nullptr;
  return table()->buffer_host_pointer(handle_, buffer);
}

Expected<int> DevicePlugin::DeviceCount() const {
  std::call_once(counted_, [this] {
    int32_t count = 0;
    Status status = TakeStatus(table_->device_count(&count));
    if (!status.ok()) {
      count_.emplace(std::move(status));
    } else if (count < 0) {
      count_.emplace(InternalError("device plugin '", plugin_name_, "' reported ", count, " devices"));
    } else {
      count_.emplace(static_cast<int>(count));
    }
  });
  return *count_;
}

Expected<std::unique_ptr<Device>> DevicePlugin::Open(int ordinal) const {
  weft_device_t handle = nullptr;
  WEFT_RETURN_IF_ERROR(TakeStatus(table_->device_open(ordinal, &handle))
                           .WithContext(StrCat("opening /device:", device_type_, ":", ordinal)));
  if (handle == nullptr) {
    return InternalError("opening /device:", device_type_, ":", ordinal, ": plugin '", plugin_name_,
                         "' returned OK but no device");
  }
  return std::unique_ptr<Device>(new Device(this, ordinal, handle));
}

namespace {

bool IsDeviceType(const char* type) {
  if (type == nullptr || !(type[0] >= 'A' && type[0] <= 'Z')) return false;
  for (const char* c = type; *c != '\0'; ++c) {
    if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  }
  return true;
}

}  // namespace

Status ValidateDeviceTable(const weft_device_plugin_t* t) {
  if (t->struct_size < WEFT_DEVICE_PLUGIN_SIZE_V1_0) {
    return InvalidArgumentError("weft_device_plugin_t.struct_size is ", t->struct_size, " bytes, smaller than the ",
                                WEFT_DEVICE_PLUGIN_SIZE_V1_0,
                                " bytes of ABI 1.0; rebuild the plugin against the Weft SDK");
  }
  if (!IsDeviceType(t->device_type)) {
    return InvalidArgumentError("device_type ", Quote(t->device_type ? t->device_type : "(null)"),
                                " must be upper case letters, digits and '_' (\"CPU\", \"OPENCL\")");
  }
#define WEFT_REQUIRE_MEMBER(member)                                                          \
  if (t->member == nullptr) {                                                                \
    return InvalidArgumentError("required member weft_device_plugin_t." #member " is NULL"); \
  }
  WEFT_REQUIRE_MEMBER(device_count)
  WEFT_REQUIRE_MEMBER(device_open)
  WEFT_REQUIRE_MEMBER(device_close)
  WEFT_REQUIRE_MEMBER(device_properties)
  WEFT_REQUIRE_MEMBER(buffer_alloc)
  WEFT_REQUIRE_MEMBER(buffer_free)
  WEFT_REQUIRE_MEMBER(stream_create)
  WEFT_REQUIRE_MEMBER(stream_destroy)
  WEFT_REQUIRE_MEMBER(stream_synchronize)
  WEFT_REQUIRE_MEMBER(event_create)
  WEFT_REQUIRE_MEMBER(event_destroy)
  WEFT_REQUIRE_MEMBER(event_record)
  WEFT_REQUIRE_MEMBER(stream_wait_event)
  WEFT_REQUIRE_MEMBER(event_synchronize)
  WEFT_REQUIRE_MEMBER(event_on_ready)
  WEFT_REQUIRE_MEMBER(copy_host_to_device)
  WEFT_REQUIRE_MEMBER(copy_device_to_host)
  WEFT_REQUIRE_MEMBER(copy_device_to_device)
#undef WEFT_REQUIRE_MEMBER

  if (t->num_kernels == 0) return Status();
  if (t->kernels == nullptr) {
    return InvalidArgumentError("num_kernels is ", t->num_kernels, " but kernels is NULL");
  }
  const std::size_t stride = t->kernels->struct_size;
  if (stride < WEFT_KERNEL_DEF_SIZE_V1_0) {
    return InvalidArgumentError("weft_kernel_def_t.struct_size is ", stride, " bytes, smaller than the ",
                                WEFT_KERNEL_DEF_SIZE_V1_0,
                                " bytes of ABI 1.0; rebuild the plugin against the Weft SDK");
  }
  for (std::size_t i = 0; i < t->num_kernels; ++i) {
    const weft_kernel_def_t* k = WEFT_ARRAY_AT(weft_kernel_def_t, t->kernels, i);
    const std::string where = StrCat("kernel #", i, " (", k->op ? k->op : "no op", ")");
    if (k->struct_size != stride) {
      return InvalidArgumentError(where, ": struct_size ", k->struct_size, " differs from the first kernel's ", stride);
    }
    if (k->op == nullptr || k->op[0] == '\0') return InvalidArgumentError(where, ": op is empty");
    if (k->num_constraints > 0 && (k->constraint_attrs == nullptr || k->constraint_dtypes == nullptr)) {
      return InvalidArgumentError(where, ": num_constraints is ", k->num_constraints,
                                  " but the constraint arrays are NULL");
    }
    if (k->num_host_memory_args > 0 && k->host_memory_args == nullptr) {
      return InvalidArgumentError(where, ": host_memory_args is NULL");
    }
    const bool async = (k->flags & WEFT_KERNEL_ASYNC) != 0;
    if (async && k->compute_async == nullptr) {
      return InvalidArgumentError(where, ": WEFT_KERNEL_ASYNC is set but compute_async is NULL");
    }
    if (!async && k->compute == nullptr) {
      return InvalidArgumentError(where, ": compute is NULL");
    }
  }
  return Status();
}

}  // namespace weft::plugin
