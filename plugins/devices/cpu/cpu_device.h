// The CPU device: host memory, streams that run their work at once, and
// events that are ready when recorded.
//
// Part of the cpu device plugin, which sees the Weft SDK only.
#ifndef WEFT_PLUGINS_DEVICES_CPU_CPU_DEVICE_H_
#define WEFT_PLUGINS_DEVICES_CPU_CPU_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "weft/weft_plugin.h"

namespace weft::cpu {

// Every buffer is aligned for the widest vector loads (AVX-512) and cache
// lines.
inline constexpr uint64_t kAlignment = 64;

// What the machine is, read once per device from /proc and the scheduler.
struct MachineInfo {
  std::string model;
  std::string vendor;
  std::string isa;  // the vector extensions kernels care about
  uint64_t memory_bytes = 0;
  int cores = 1;
};

MachineInfo ReadMachineInfo();

struct CpuBuffer {
  void* data;
  uint64_t size;
};

class CpuDevice {
 public:
  explicit CpuDevice(int ordinal);
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  int ordinal() const { return ordinal_; }
  const MachineInfo& machine() const { return machine_; }
  // Fills the host's out-struct (see weft_device_properties_t).
  void Properties(weft_device_properties_t* out) const;

  // Throws weft::sdk::Error(RESOURCE_EXHAUSTED) when memory is out.
  CpuBuffer* Allocate(uint64_t size);
  void Free(CpuBuffer* buffer);
  uint64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }

 private:
  int ordinal_;
  MachineInfo machine_;
  std::string compute_units_text_;
  std::vector<weft_property_t> extra_;
  std::atomic<uint64_t> bytes_in_use_{0};
};

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_CPU_DEVICE_H_
