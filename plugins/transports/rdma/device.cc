// The rdma transport's verbs device (device.h) and the device probe of
// the plugin's init (ProbeDevices, rdma_transport.h).
//
// NOT RUN ON REAL HARDWARE: everything in this file past ProbeDevices()
// and ErrnoText() is compiled but has never executed.
#include "rdma/device.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "rdma/rdma_transport.h"
#include "weft/sdk/status.h"

namespace weft::rdma {
namespace {

constexpr const char* kAdvice =
    "install rdma-core and a provider (Debian: ibverbs-providers), load the RDMA kernel modules for the "
    "NIC (or set up rxe/siw over Ethernet), or use the tcp transport";

}  // namespace

std::string ErrnoText(int error) { return "errno " + std::to_string(error) + ": " + std::strerror(error); }

[[noreturn]] void ThrowVerbs(const std::string& what, int error) {
  throw sdk::Error(WEFT_UNAVAILABLE, "rdma: " + what + " failed (" + ErrnoText(error) + ")");
}

std::unique_ptr<DeviceContext> OpenDevice(const std::string& wanted, uint32_t gid_index) {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr) ThrowVerbs("ibv_get_device_list", errno);
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> owned(list, ibv_free_device_list);
  ibv_device* chosen = nullptr;
  std::string names;
  for (int i = 0; i < count; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    names += (names.empty() ? "" : ", ") + name;
    if (chosen == nullptr && (wanted.empty() || wanted == name)) chosen = list[i];
  }
  if (chosen == nullptr) {
    throw sdk::Error(count == 0 ? WEFT_UNAVAILABLE : WEFT_NOT_FOUND,
                     count == 0 ? std::string("rdma: no RDMA device found")
                                : "rdma: no RDMA device '" + wanted + "' (found: " + names + ")");
  }
  auto device = std::make_unique<DeviceContext>();
  device->name = ibv_get_device_name(chosen);
  errno = 0;
  device->context = ibv_open_device(chosen);
  if (device->context == nullptr) ThrowVerbs("ibv_open_device(" + device->name + ")", errno);
  device->pd = ibv_alloc_pd(device->context);
  if (device->pd == nullptr) ThrowVerbs("ibv_alloc_pd(" + device->name + ")", errno);
  ibv_device_attr attr{};
  if (const int rc = ibv_query_device(device->context, &attr); rc != 0) ThrowVerbs("ibv_query_device", rc);
  device->max_sge = std::clamp(attr.max_sge, 1, kMaxSge);
  bool found = false;
  for (uint8_t port = 1; port <= attr.phys_port_cnt && !found; ++port) {
    ibv_port_attr pattr{};
    if (ibv_query_port(device->context, port, &pattr) == 0 && pattr.state == IBV_PORT_ACTIVE) {
      device->port = port;
      device->port_attr = pattr;
      found = true;
    }
  }
  if (!found) {
    throw sdk::Error(WEFT_UNAVAILABLE, "rdma: device " + device->name + " has no active port (" +
                                           std::to_string(attr.phys_port_cnt) + " port(s), none ACTIVE)");
  }
  device->gid_index = gid_index;
  if (const int rc = ibv_query_gid(device->context, device->port, static_cast<int>(gid_index), &device->gid); rc != 0) {
    ThrowVerbs("ibv_query_gid(index " + std::to_string(gid_index) + ")", rc);
  }
  // Completion channel and async fds are polled by the progress thread.
  const int flags = fcntl(device->context->async_fd, F_GETFL);
  fcntl(device->context->async_fd, F_SETFL, flags | O_NONBLOCK);
  return device;
}

void MemoryBlock::Allocate(ibv_pd* pd, std::size_t bytes, int access, const char* what) {
  const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
  data = static_cast<uint8_t*>(std::aligned_alloc(4096, rounded));
  if (data == nullptr) throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, std::string("rdma: cannot allocate the ") + what);
  size = rounded;
  errno = 0;
  mr = ibv_reg_mr(pd, data, size, access);
  if (mr == nullptr)
    ThrowVerbs(std::string("ibv_reg_mr for the ") + what + " (" + std::to_string(size) + " bytes)", errno);
}

void MemoryBlock::Reset() {
  if (mr != nullptr) ibv_dereg_mr(mr);
  std::free(data);
  mr = nullptr;
  data = nullptr;
}

void ProbeDevices() {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  const int error = errno;
  if (list == nullptr) {
    std::string reason = "no RDMA device found (ibv_get_device_list failed with " + ErrnoText(error);
    if (error == ENOSYS) {
      reason +=
          "; the kernel offers no RDMA verbs interface: /sys/class/infiniband_verbs is missing, is ib_uverbs loaded?";
    }
    throw sdk::Error(WEFT_UNAVAILABLE, reason + "); " + kAdvice);
  }
  std::unique_ptr<ibv_device*, void (*)(ibv_device**)> owned(list, ibv_free_device_list);
  if (count <= 0) {
    std::string reason = "no RDMA device found (ibv_get_device_list returned 0 devices";
    if (error != 0) reason += "; " + ErrnoText(error);
    throw sdk::Error(WEFT_UNAVAILABLE, reason + "); " + kAdvice);
  }
  errno = 0;
  ibv_context* context = ibv_open_device(list[0]);
  if (context == nullptr) {
    const int open_error = errno;
    throw sdk::Error(WEFT_UNAVAILABLE, std::string("RDMA device ") + ibv_get_device_name(list[0]) +
                                           " found but ibv_open_device failed (" + ErrnoText(open_error) +
                                           "); check the permissions of /dev/infiniband/uverbs* and the "
                                           "memlock limit, or use the tcp transport");
  }
  ibv_close_device(context);
}

}  // namespace weft::rdma
