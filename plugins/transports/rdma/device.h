// The rdma transport's verbs device: one opened device with its protection
// domain and active port, the registered buffers of a connection's rings,
// and the error helpers every verbs call of the plugin uses.
//
// NOT RUN ON REAL HARDWARE (see rdma_transport.h): compiled, never executed.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_DEVICE_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_DEVICE_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace weft::rdma {

// The most scatter/gather entries a send uses (the device may allow fewer).
inline constexpr int kMaxSge = 4;

// "errno N: text".
std::string ErrnoText(int error);
// Throws weft::sdk::Error(WEFT_UNAVAILABLE) naming the verbs call |what|
// that failed with |error|.
[[noreturn]] void ThrowVerbs(const std::string& what, int error);

// One opened device with its protection domain and the port used.
struct DeviceContext {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  uint8_t port = 1;
  ibv_port_attr port_attr{};
  ibv_gid gid{};
  uint32_t gid_index = 0;
  int max_sge = 1;
  std::string name;

  DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ~DeviceContext() {
    if (pd != nullptr) ibv_dealloc_pd(pd);
    if (context != nullptr) ibv_close_device(context);
  }
};

// Opens device |wanted| ("": the first) and its first ACTIVE port, with
// GID |gid_index|. Throws UNAVAILABLE without a device or active port,
// NOT_FOUND when |wanted| is not among the devices (the message lists
// them). The async event fd is made non-blocking.
std::unique_ptr<DeviceContext> OpenDevice(const std::string& wanted, uint32_t gid_index);

// A page-aligned buffer registered with a protection domain; freed and
// deregistered by Reset or the destructor.
struct MemoryBlock {
  uint8_t* data = nullptr;
  std::size_t size = 0;
  ibv_mr* mr = nullptr;

  MemoryBlock() = default;
  MemoryBlock(const MemoryBlock&) = delete;
  MemoryBlock& operator=(const MemoryBlock&) = delete;
  ~MemoryBlock() { Reset(); }
  // |bytes| rounded up to pages, registered with |access|; throws
  // RESOURCE_EXHAUSTED or the verbs error, naming |what|.
  void Allocate(ibv_pd* pd, std::size_t bytes, int access, const char* what);
  void Reset();
};

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_DEVICE_H_
