#include "gpu/gpu_device.h"

#include <utility>

#include "weft/sdk/guard.h"
#include "weft/sdk/log.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"

namespace weft::gpu {
namespace {

// Every block the runtime returns is aligned to at least this (both
// runtimes give 256 bytes or more).
constexpr uint64_t kAlignment = 256;
constexpr uint64_t kMinClass = 512;

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

void ThrowRuntimeError(rt::Error error, const std::string& what) {
  const weft_code_t code = error == rt::kErrorOutOfMemory ? WEFT_RESOURCE_EXHAUSTED : WEFT_INTERNAL;
  throw sdk::Error(code, what + ": " + RuntimeErrorText(error));
}

// --- CachingAllocator --------------------------------------------------------------

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  TrimLocked();
}

uint64_t CachingAllocator::SizeClass(uint64_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  // The largest power of two below |bytes|, then quarter steps of it.
  uint64_t power = kMinClass;
  while (power <= (bytes - 1) / 2) power *= 2;
  const uint64_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::Allocate(uint64_t bytes, uint64_t* capacity) {
  const uint64_t size = SizeClass(bytes);
  if (size < bytes) {
    throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, "cannot allocate " + std::to_string(bytes) + " bytes");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (cache_) {
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      in_use_ += size;
      *capacity = size;
      return ptr;
    }
  }
  void* ptr = nullptr;
  rt::Error error = rt::Malloc(&ptr, size);
  if (error == rt::kErrorOutOfMemory && cached_ > 0) {
    // Blocks of other sizes may be what stands in the way.
    (void)rt::GetLastError();
    TrimLocked();
    error = rt::Malloc(&ptr, size);
  }
  if (error != rt::kSuccess) {
    (void)rt::GetLastError();
    const weft_code_t code = error == rt::kErrorOutOfMemory ? WEFT_RESOURCE_EXHAUSTED : WEFT_INTERNAL;
    throw sdk::Error(code, std::string(Vendor().call_prefix) + "Malloc of " + std::to_string(size) +
                               " bytes (for a buffer of " + std::to_string(bytes) +
                               ") failed: " + RuntimeErrorText(error) + "; " + Mib(in_use_) + " in use on device " +
                               std::to_string(ordinal_));
  }
  in_use_ += size;
  *capacity = size;
  return ptr;
}

void CachingAllocator::Release(void* ptr, uint64_t capacity) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ -= capacity;
  if (cache_) {
    free_[capacity].push_back(ptr);
    cached_ += capacity;
    return;
  }
  Check(rt::Free(ptr), "freeing device memory");
}

void CachingAllocator::Trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  TrimLocked();
}

void CachingAllocator::TrimLocked() {
  for (auto& [size, blocks] : free_) {
    for (void* block : blocks) {
      const rt::Error error = rt::Free(block);
      if (error != rt::kSuccess && sdk::host() != nullptr) {
        WEFT_SDK_LOG(WARNING) << "freeing a cached block of " << size << " bytes on device " << ordinal_ << ": "
                              << RuntimeErrorText(error);
      }
    }
  }
  free_.clear();
  cached_ = 0;
}

uint64_t CachingAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

uint64_t CachingAllocator::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

// --- Stream ------------------------------------------------------------------------

Stream::~Stream() {
  (void)rt::SetDevice(device->ordinal());
  if (libraries != nullptr) DestroyStreamLibraries(libraries);
  const rt::Error error = rt::StreamDestroy(stream);
  if (error != rt::kSuccess) {
    WEFT_SDK_LOG(WARNING) << "destroying a stream of " << device->name() << ": " << RuntimeErrorText(error);
  }
}

// --- Device ------------------------------------------------------------------------

Device::Device(int ordinal, const Options& options)
    : ordinal_(ordinal),
      name_(std::string("/device:") + Vendor().device_type + ":" + std::to_string(ordinal)),
      allocator_(ordinal, options.allocator_cache) {
  MakeCurrent();
  Check(rt::GetDeviceProperties(&prop_, ordinal), "reading the device's properties");
  driver_text_ = DriverText();
  extra_text_ = VendorProperties(prop_);
  extra_text_.emplace_back("allocator cache", options.allocator_cache ? "on" : "off");
  for (const auto& [key, value] : extra_text_) {
    extra_.push_back({sizeof(weft_property_t), key.c_str(), value.c_str()});
  }
  Check(rt::StreamCreate(&callback_stream_), "creating the event callback stream");
}

Device::~Device() {
  (void)rt::SetDevice(ordinal_);
  // Every callback the runtime owes has been queued once the callback
  // stream is idle; the loop runs what is queued before it stops.
  if (callback_stream_ != nullptr) {
    (void)rt::StreamSynchronize(callback_stream_);
    (void)rt::StreamDestroy(callback_stream_);
  }
  {
    std::lock_guard<std::mutex> lock(callback_mutex_);
    stopping_ = true;
  }
  callback_cv_.notify_all();
  if (callback_thread_.joinable()) callback_thread_.join();
  allocator_.Trim();
}

void Device::MakeCurrent() const {
  const rt::Error error = rt::SetDevice(ordinal_);
  if (error != rt::kSuccess) ThrowRuntimeError(error, "making " + name_ + " current");
}

void Device::Properties(weft_device_properties_t* out) const {
  auto props = sdk::Make<weft_device_properties_t>();
  props.model = prop_.name;
  props.vendor = Vendor().hardware_vendor;
  props.driver = driver_text_.c_str();
  props.memory_bytes = prop_.totalGlobalMem;
  props.alignment = kAlignment;
  props.host_visible = 0;
  props.compute_units = prop_.multiProcessorCount;
  props.extra = extra_.data();
  props.num_extra = extra_.size();
  sdk::FillOut(out, props);
}

Buffer* Device::Allocate(uint64_t size) {
  MakeCurrent();
  uint64_t capacity = 0;
  void* ptr = allocator_.Allocate(size, &capacity);
  return new Buffer{ptr, size, capacity};
}

void Device::Free(Buffer* buffer) {
  if (buffer == nullptr) return;
  MakeCurrent();
  std::unique_ptr<Buffer> owned(buffer);
  allocator_.Release(buffer->ptr, buffer->capacity);
}

void Device::OnReady(Event* event, weft_done_fn done, void* user) {
  if (!event->recorded.load(std::memory_order_acquire)) {
    done(user, nullptr);
    return;
  }
  MakeCurrent();
  {
    std::lock_guard<std::mutex> lock(callback_mutex_);
    if (!callback_thread_.joinable()) callback_thread_ = std::thread([this] { CallbackLoop(); });
  }
  Check(rt::StreamWaitEvent(callback_stream_, event->event), "event_on_ready: waiting for the event");
  auto pending = std::make_unique<Pending>(Pending{this, done, user});
  Check(rt::StreamAddCallback(callback_stream_, &Device::RuntimeCallback, pending.get()),
        "event_on_ready: adding the callback");
  pending.release();
}

void Device::RuntimeCallback(rt::Stream, rt::Error status, void* user) {
  auto* pending = static_cast<Pending*>(user);
  pending->status = status;
  Device* device = pending->device;
  {
    std::lock_guard<std::mutex> lock(device->callback_mutex_);
    device->callbacks_.push_back(pending);
  }
  device->callback_cv_.notify_one();
}

void Device::CallbackLoop() {
  // The callbacks may call back into the plugin, which needs its device.
  (void)rt::SetDevice(ordinal_);
  std::unique_lock<std::mutex> lock(callback_mutex_);
  while (true) {
    callback_cv_.wait(lock, [this] { return stopping_ || !callbacks_.empty(); });
    if (callbacks_.empty()) return;
    std::unique_ptr<Pending> pending(callbacks_.front());
    callbacks_.pop_front();
    lock.unlock();
    weft_status_t status = nullptr;
    if (pending->status != rt::kSuccess) {
      status = sdk::MakeStatus(
          WEFT_INTERNAL,
          ("work before the event failed on " + name_ + ": " + RuntimeErrorText(pending->status)).c_str());
    }
    pending->done(pending->user, status);
    lock.lock();
  }
}

}  // namespace weft::gpu
