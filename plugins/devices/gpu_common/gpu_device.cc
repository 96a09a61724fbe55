#include "gpu_device.h"

#include <memory>
#include <new>

#include "weft/sdk/guard.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"

namespace weft::gpu {

namespace {

bool IsOutOfMemory(gpuError_t err) {
#if defined(WEFT_GPU_CUDA)
  return err == cudaErrorMemoryAllocation;
#else
  return err == hipErrorOutOfMemory;
#endif
}

std::string VersionString(int version) {
  // Both runtimes encode 1000 * major + 10 * minor.
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

std::string ErrorText(gpuError_t err) {
  const std::string message = gpuGetErrorString(err);
  const std::string name = gpuGetErrorName(err);
  // ROCm's runtime gives the name as the message too; say it once.
  return message == name ? name : message + " (" + name + ")";
}

void Check(gpuError_t err, const char* call, const std::string& where) {
  if (err == gpuSuccess) return;
  // Clears the sticky last error so a later, unrelated query does not
  // report this one again.
  (void)gpuGetLastError();
  throw sdk::Error(IsOutOfMemory(err) ? WEFT_RESOURCE_EXHAUSTED : WEFT_INTERNAL,
                   std::string(call) + " on " + where + ": " + ErrorText(err));
}

std::string UnavailableReason(gpuError_t err) {
#if defined(WEFT_GPU_CUDA)
  const char* needs = "the CUDA plugin needs an NVIDIA GPU and driver";
#else
  const char* needs = "the HIP plugin needs an AMD GPU and the ROCm kernel driver (amdgpu/KFD)";
#endif
  return std::string("no usable " WEFT_GPU_TYPE " device: ") + ErrorText(err) + "; " + needs;
}

Device::Device(int ordinal, bool cache)
    : ordinal_(ordinal),
      cache_enabled_(cache),
      where_("/device:" WEFT_GPU_TYPE ":" + std::to_string(ordinal)) {
  Activate();
  gpuDeviceProp_t prop{};
  Check(gpuGetDeviceProperties(&prop, ordinal), "getting the device properties");
  model_ = prop.name;
  where_ += " (" + model_ + ")";
  memory_bytes_ = prop.totalGlobalMem;
  compute_units_ = prop.multiProcessorCount;
#if defined(WEFT_GPU_CUDA)
  vendor_ = "NVIDIA";
  extra_strings_ = {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)};
#else
  vendor_ = "AMD";
  extra_strings_ = {"arch", prop.gcnArchName};
#endif
  extra_strings_.push_back("pci_bus");
  extra_strings_.push_back(std::to_string(prop.pciBusID));
  int runtime = 0;
  int driver = 0;
  Check(gpuRuntimeGetVersion(&runtime), "getting the runtime version");
  Check(gpuDriverGetVersion(&driver), "getting the driver version");
  driver_ = WEFT_GPU_RUNTIME " runtime " + VersionString(runtime) + ", driver " + VersionString(driver);
  for (std::size_t i = 0; i + 1 < extra_strings_.size(); i += 2) {
    auto p = sdk::Make<weft_property_t>();
    p.key = extra_strings_[i].c_str();
    p.value = extra_strings_[i + 1].c_str();
    extra_.push_back(p);
  }
}

Device::~Device() {
  // Idle cached blocks go back to the runtime; blocks still lent were the
  // host's to free first (device_close's contract).
  ReleaseCache();
}

void Device::Activate() const { Check(gpuSetDevice(ordinal_), "selecting the device"); }

void Device::Properties(weft_device_properties_t* out) const {
  auto p = sdk::Make<weft_device_properties_t>();
  p.model = model_.c_str();
  p.vendor = vendor_.c_str();
  p.driver = driver_.c_str();
  p.memory_bytes = memory_bytes_;
  p.alignment = 256;
  p.host_visible = 0;
  p.compute_units = compute_units_;
  // Typical PCIe 4.0 x16 and on-board figures: placement only compares
  // them, so a rough order of magnitude is what matters.
  p.host_to_device_gbps = 25;
  p.device_to_host_gbps = 25;
  p.device_to_device_gbps = 500;
  p.extra = extra_.data();
  p.num_extra = extra_.size();
  sdk::FillOut(out, p);
}

uint64_t Device::Bucket(uint64_t size) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  if (size <= 256) return 256;
  if (size > kMiB) return (size + kMiB - 1) / kMiB * kMiB;
  uint64_t bucket = 256;
  while (bucket < size) bucket <<= 1;
  return bucket;
}

Buffer* Device::Allocate(uint64_t size) {
  const uint64_t bucket = Bucket(size);
  auto buffer = std::make_unique<Buffer>();
  buffer->size = size;
  buffer->capacity = bucket;
  if (cache_enabled_) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bucket);
    if (it != free_.end() && !it->second.empty()) {
      buffer->ptr = it->second.back();
      it->second.pop_back();
      return buffer.release();
    }
  }
  Activate();
  gpuError_t err = gpuMalloc(&buffer->ptr, bucket);
  if (IsOutOfMemory(err) && cache_enabled_) {
    // Idle blocks of other sizes may be what stands in the way.
    (void)gpuGetLastError();
    ReleaseCache();
    err = gpuMalloc(&buffer->ptr, bucket);
  }
  if (err != gpuSuccess) {
    Check(err, ("allocating " + std::to_string(size) + " bytes").c_str());
  }
  return buffer.release();
}

void Device::Free(Buffer* buffer) {
  if (buffer == nullptr) return;
  std::unique_ptr<Buffer> owned(buffer);
  if (cache_enabled_) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[buffer->capacity].push_back(buffer->ptr);
    return;
  }
  Activate();
  Check(gpuFree(buffer->ptr), "freeing a buffer");
}

void Device::ReleaseCache() {
  std::map<uint64_t, std::vector<void*>> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle.swap(free_);
  }
  if (idle.empty()) return;
  // Errors are ignored: this runs from the destructor, and a block the
  // runtime refuses to free is lost either way.
  (void)gpuSetDevice(ordinal_);
  for (auto& [bucket, blocks] : idle) {
    for (void* block : blocks) (void)gpuFree(block);
  }
  (void)gpuGetLastError();
}

}  // namespace weft::gpu
