// An OpenCL device behind the weft device table: its context, buffers
// (cl_mem), streams (in-order command queues), events (markers) and the
// programs its kernels are built from, compiled the first time a kernel
// needs them.
//
// Part of the opencl device plugin, which sees the Weft SDK only.
#ifndef WEFT_PLUGINS_DEVICES_OPENCL_OPENCL_DEVICE_H_
#define WEFT_PLUGINS_DEVICES_OPENCL_OPENCL_DEVICE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cl_util.h"
#include "weft/weft_plugin.h"

namespace weft::opencl {

// What the [devices.opencl] section selects.
struct Selection {
  std::string platform;                // a substring of the platform's name; empty: every platform
  std::string device_type = "all";     // all, gpu, cpu or accelerator
  std::string kernel_source_dir;       // <program>.cl files that replace the built-in sources
  std::string matmul_kernel = "auto";  // auto, tiled or blocked (see kernels/matmul.cl)
};

// One device the selection found.
struct Found {
  cl_platform_id platform;
  cl_device_id device;
  std::string platform_name;
};

// Every device of every platform |selection| admits, in platform order.
// Throws UNAVAILABLE with the reason and what to do when there is none.
std::vector<Found> FindDevices(const Selection& selection);

struct Buffer {
  cl_mem mem;
  uint64_t size;  // as requested (the cl_mem holds at least one byte)
};

struct Stream {
  cl_command_queue queue;
};

// An event is the marker of its last record; null when never recorded.
struct Event {
  std::mutex mutex;
  cl_event marker = nullptr;
};

// A built program and the kernels made from it. clSetKernelArg is not
// thread-safe on one cl_kernel, so every launch borrows a kernel object of
// its own from a pool (Take) and returns it once enqueued (Give).
class Program {
 public:
  Program(cl_program program, std::string name, std::string where);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  cl_kernel Take(const std::string& kernel);
  void Give(const std::string& kernel, cl_kernel object);
  const std::string& name() const { return name_; }

 private:
  cl_program program_;
  std::string name_;   // "elementwise (T=float)", for messages
  std::string where_;  // the device, for messages
  std::mutex mutex_;
  std::unordered_map<std::string, std::vector<cl_kernel>> free_;
};

class Device {
 public:
  // Opens /device:OPENCL:|ordinal| on |found|; throws with the OpenCL
  // error when the context cannot be created.
  Device(int ordinal, const Found& found, const Selection& selection);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int ordinal() const { return ordinal_; }
  cl_context context() const { return context_; }
  cl_device_id id() const { return device_; }
  // "pthread-skylake-avx512 (/device:OPENCL:0)", for messages.
  const std::string& where() const { return where_; }
  bool has_fp64() const { return fp64_; }
  // Whether MatMul uses matmul_blocked rather than the local-memory tiled
  // kernel: by default where local memory is ordinary global memory.
  bool blocked_matmul() const { return blocked_matmul_; }
  uint64_t base_align_bytes() const { return align_; }

  // Throws "<call> on <where>: <error>" unless |code| is CL_SUCCESS.
  void Check(cl_int code, const char* call) const { opencl::Check(code, call, where_); }

  void Properties(weft_device_properties_t* out) const;

  // Throws RESOURCE_EXHAUSTED when the device cannot hold |size| bytes.
  Buffer* Allocate(uint64_t size);
  void Free(Buffer* buffer);

  // The program of |name| (kernels/<name>.cl, or the file of that name in
  // the kernel_source_dir option) built with |defines| ("-DT=float ..."):
  // compiled on first use, then shared. A build failure throws INTERNAL
  // naming the program, its defines, the device and the compiler's log.
  Program& GetProgram(const std::string& name, const std::string& defines);

 private:
  std::string Source(const std::string& name) const;

  int ordinal_;
  cl_device_id device_;
  cl_context context_ = nullptr;
  std::string kernel_source_dir_;
  std::string where_;
  bool fp64_ = false;
  bool exact_divide_sqrt_ = false;  // CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
  bool blocked_matmul_ = false;
  uint64_t align_ = 128;
  uint64_t max_alloc_ = 0;

  // Device properties, kept as strings for the lent pointers.
  std::string model_, vendor_, driver_;
  uint64_t memory_bytes_ = 0;
  int32_t compute_units_ = 0;
  std::vector<std::pair<std::string, std::string>> extra_text_;
  std::vector<weft_property_t> extra_;

  std::mutex programs_mutex_;
  std::map<std::string, std::unique_ptr<Program>> programs_;  // by name + defines
};

}  // namespace weft::opencl

#endif  // WEFT_PLUGINS_DEVICES_OPENCL_OPENCL_DEVICE_H_
