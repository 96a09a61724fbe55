#include "tools/conformance/abi_checks.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/base/strings.h"
#include "core/plugin/host_services.h"

namespace weft::conformance {
namespace {

// Bytes no two offsets share, so a copy to or from the wrong place shows.
std::vector<unsigned char> Pattern(std::size_t n, unsigned seed) {
  std::vector<unsigned char> bytes(n);
  uint32_t x = 2463534242u ^ seed;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    bytes[i] = static_cast<unsigned char>(x);
  }
  return bytes;
}

// The first byte where |got| differs from |want|, as a sentence.
Status Same(const unsigned char* got, const unsigned char* want, std::size_t n, const std::string& what) {
  for (std::size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      return DataLossError(what, ": byte ", i, " of ", n, " is ", int{got[i]}, ", expected ", int{want[i]});
    }
  }
  return Status();
}

// The device's table and handle, with what a check made, released at the
// end whatever happened.
class Session {
 public:
  explicit Session(const plugin::Device& device) : t_(device.table()), d_(device.handle()) {}
  ~Session() {
    for (weft_stream_t s : streams_) {
      if (s != nullptr) plugin::TakeStatus(t_->stream_synchronize(d_, s)).IgnoreError();
    }
    for (weft_event_t e : events_) t_->event_destroy(d_, e);
    for (weft_stream_t s : streams_) {
      if (s != nullptr) t_->stream_destroy(d_, s);
    }
    for (weft_buffer_t b : buffers_) t_->buffer_free(d_, b);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const weft_device_plugin_t* t() const { return t_; }
  weft_device_t d() const { return d_; }

  static Status Call(weft_status_t s, const char* what) {
    Status status = plugin::TakeStatus(s);
    if (!status.ok()) return status.WithContext(what);
    return status;
  }
  Expected<weft_buffer_t> Alloc(uint64_t size) {
    weft_buffer_t b = nullptr;
    WEFT_RETURN_IF_ERROR(Call(t_->buffer_alloc(d_, size, &b), "buffer_alloc"));
    buffers_.push_back(b);
    return b;
  }
  Expected<weft_stream_t> Stream() {
    weft_stream_t s = nullptr;
    WEFT_RETURN_IF_ERROR(Call(t_->stream_create(d_, &s), "stream_create"));
    if (s == nullptr) return InvalidArgumentError("stream_create returned OK and a NULL stream");
    streams_.push_back(s);
    return s;
  }
  // Destroys |s| now, without synchronizing it first.
  void DestroyStream(weft_stream_t s) {
    for (weft_stream_t& mine : streams_) {
      if (mine == s) mine = nullptr;
    }
    t_->stream_destroy(d_, s);
  }
  Expected<weft_event_t> Event() {
    weft_event_t e = nullptr;
    WEFT_RETURN_IF_ERROR(Call(t_->event_create(d_, &e), "event_create"));
    if (e == nullptr) return InvalidArgumentError("event_create returned OK and a NULL event");
    events_.push_back(e);
    return e;
  }
  Status ToDevice(weft_stream_t s, const std::vector<unsigned char>& src, weft_buffer_t dst, uint64_t at) {
    return Call(t_->copy_host_to_device(d_, s, src.data(), dst, at, src.size()), "copy_host_to_device");
  }
  // Copies |n| bytes at |at| of |src| back and waits for them.
  Expected<std::vector<unsigned char>> ToHost(weft_stream_t s, weft_buffer_t src, uint64_t at, std::size_t n) {
    std::vector<unsigned char> out(n, 0xAB);
    WEFT_RETURN_IF_ERROR(Call(t_->copy_device_to_host(d_, s, src, at, out.data(), n), "copy_device_to_host"));
    WEFT_RETURN_IF_ERROR(Call(t_->stream_synchronize(d_, s), "stream_synchronize"));
    return out;
  }

 private:
  const weft_device_plugin_t* t_;
  weft_device_t d_;
  std::vector<weft_buffer_t> buffers_;
  std::vector<weft_stream_t> streams_;
  std::vector<weft_event_t> events_;
};

Status CheckProperties(const plugin::Device& device) {
  WEFT_ASSIGN_OR_RETURN(plugin::DeviceProperties p, device.Properties());
  if (p.alignment < 8 || (p.alignment & (p.alignment - 1)) != 0) {
    return InvalidArgumentError("alignment is ", p.alignment, "; it must be a power of two of at least 8");
  }
  const bool has_pointer = device.table()->buffer_host_pointer != nullptr;
  if (p.host_visible != has_pointer) {
    return InvalidArgumentError("host_visible is ", p.host_visible ? "true" : "false", " but buffer_host_pointer is ",
                                has_pointer ? "set" : "NULL", "; they go together");
  }
  return Status();
}

Status CheckAllocation(const plugin::Device& device) {
  Session s(device);
  WEFT_ASSIGN_OR_RETURN(plugin::DeviceProperties p, device.Properties());
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{4096}, uint64_t{(1 << 20) + 3}}) {
    WEFT_ASSIGN_OR_RETURN(weft_buffer_t b, s.Alloc(size));
    if (size > 0 && b == nullptr) return InvalidArgumentError("buffer_alloc(", size, ") returned OK and NULL");
    if (size > 0 && p.host_visible) {
      void* host = s.t()->buffer_host_pointer(s.d(), b);
      if (host == nullptr) return InvalidArgumentError("buffer_host_pointer of a ", size, "-byte buffer is NULL");
      if (reinterpret_cast<uintptr_t>(host) % p.alignment != 0) {
        return InvalidArgumentError("a ", size, "-byte buffer is at ", host, ", not aligned to the stated ",
                                    p.alignment, " bytes");
      }
    }
  }
  s.t()->buffer_free(s.d(), nullptr);  // must be ignored
  return Status();
}

Status CheckHugeAllocation(const plugin::Device& device) {
  Session s(device);
  weft_buffer_t b = nullptr;
  const uint64_t huge = uint64_t{1} << 62;
  Status status = plugin::TakeStatus(s.t()->buffer_alloc(s.d(), huge, &b));
  if (status.ok()) {
    s.t()->buffer_free(s.d(), b);
    return InvalidArgumentError("buffer_alloc of 4 EiB succeeded");
  }
  if (status.code() != Code::kResourceExhausted) {
    return InvalidArgumentError("buffer_alloc of 4 EiB gave ", CodeName(status.code()),
                                ", not RESOURCE_EXHAUSTED: ", status.message());
  }
  return Status();
}

Status CheckCopies(const plugin::Device& device) {
  Session s(device);
  WEFT_ASSIGN_OR_RETURN(plugin::DeviceProperties p, device.Properties());
  const std::size_t n = (1 << 20) + 13;
  const uint64_t at = p.alignment;
  const std::vector<unsigned char> data = Pattern(n, 1);
  WEFT_ASSIGN_OR_RETURN(weft_stream_t stream, s.Stream());
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t a, s.Alloc(n + at));
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t b, s.Alloc(n + at));
  WEFT_RETURN_IF_ERROR(s.ToDevice(stream, data, a, 0));
  WEFT_ASSIGN_OR_RETURN(auto back, s.ToHost(stream, a, 0, n));
  WEFT_RETURN_IF_ERROR(Same(back.data(), data.data(), n, "host -> device -> host of 1 MiB + 13 bytes"));

  // At an offset, a slice of it.
  const std::vector<unsigned char> slice = Pattern(100, 2);
  WEFT_RETURN_IF_ERROR(s.ToDevice(stream, slice, a, at));
  WEFT_ASSIGN_OR_RETURN(back, s.ToHost(stream, a, at, slice.size()));
  WEFT_RETURN_IF_ERROR(Same(back.data(), slice.data(), slice.size(), "a 100-byte copy at an offset"));
  WEFT_ASSIGN_OR_RETURN(back, s.ToHost(stream, a, 0, at));
  WEFT_RETURN_IF_ERROR(Same(back.data(), data.data(), at, "the bytes before a copy at an offset"));

  // Device to device, into another buffer at an offset.
  WEFT_RETURN_IF_ERROR(
      Session::Call(s.t()->copy_device_to_device(s.d(), stream, a, 0, b, at, n), "copy_device_to_device"));
  std::vector<unsigned char> want(data);
  std::memcpy(want.data() + at, slice.data(), slice.size());
  WEFT_ASSIGN_OR_RETURN(back, s.ToHost(stream, b, at, n));
  WEFT_RETURN_IF_ERROR(Same(back.data(), want.data(), n, "device -> device into another buffer at an offset"));

  // Copies of nothing.
  WEFT_RETURN_IF_ERROR(
      Session::Call(s.t()->copy_host_to_device(s.d(), stream, data.data(), a, 0, 0), "copy_host_to_device of 0 bytes"));
  unsigned char sink = 0;
  WEFT_RETURN_IF_ERROR(
      Session::Call(s.t()->copy_device_to_host(s.d(), stream, a, 0, &sink, 0), "copy_device_to_host of 0 bytes"));
  return Session::Call(s.t()->stream_synchronize(s.d(), stream), "stream_synchronize");
}

Status CheckStreamsAndEvents(const plugin::Device& device) {
  Session s(device);
  const std::size_t n = 4 << 20;
  const std::vector<unsigned char> data = Pattern(n, 3);
  WEFT_ASSIGN_OR_RETURN(weft_stream_t s1, s.Stream());
  WEFT_ASSIGN_OR_RETURN(weft_stream_t s2, s.Stream());
  WEFT_ASSIGN_OR_RETURN(weft_event_t e1, s.Event());
  WEFT_ASSIGN_OR_RETURN(weft_event_t e2, s.Event());
  WEFT_ASSIGN_OR_RETURN(weft_event_t never, s.Event());
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t a, s.Alloc(n));
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t b, s.Alloc(n));

  // Stream 2 copies a -> b only after stream 1 has filled a.
  WEFT_RETURN_IF_ERROR(s.ToDevice(s1, data, a, 0));
  WEFT_RETURN_IF_ERROR(Session::Call(s.t()->event_record(s.d(), e1, s1), "event_record"));
  WEFT_RETURN_IF_ERROR(Session::Call(s.t()->stream_wait_event(s.d(), s2, e1), "stream_wait_event"));
  WEFT_RETURN_IF_ERROR(Session::Call(s.t()->copy_device_to_device(s.d(), s2, a, 0, b, 0, n), "copy_device_to_device"));
  WEFT_RETURN_IF_ERROR(Session::Call(s.t()->event_record(s.d(), e2, s2), "event_record"));

  // event_on_ready calls back exactly once.
  struct Waiter {
    std::mutex mutex;
    std::condition_variable cv;
    int calls = 0;
    Status status;
  };
  auto waiter = std::make_shared<Waiter>();
  auto* holder = new std::shared_ptr<Waiter>(waiter);
  const weft_done_fn done = [](void* user, weft_status_t status) {
    auto* w = static_cast<std::shared_ptr<Waiter>*>(user);
    {
      std::lock_guard<std::mutex> lock((*w)->mutex);
      ++(*w)->calls;
      (*w)->status = plugin::TakeStatus(status);
    }
    (*w)->cv.notify_all();
    delete w;
  };
  Status on_ready = Session::Call(s.t()->event_on_ready(s.d(), e2, done, holder), "event_on_ready");
  if (!on_ready.ok()) {
    delete holder;
    return on_ready;
  }
  {
    std::unique_lock<std::mutex> lock(waiter->mutex);
    if (!waiter->cv.wait_for(lock, std::chrono::seconds(30), [&] { return waiter->calls > 0; })) {
      return Status(Code::kDeadlineExceeded, "event_on_ready did not call back within 30 s of the event's work");
    }
    if (!waiter->status.ok()) return waiter->status.WithContext("event_on_ready's callback");
  }
  WEFT_RETURN_IF_ERROR(Session::Call(s.t()->event_synchronize(s.d(), e2), "event_synchronize"));
  WEFT_ASSIGN_OR_RETURN(auto back, s.ToHost(s2, b, 0, n));
  WEFT_RETURN_IF_ERROR(Same(back.data(), data.data(), n, "a copy on stream 2 ordered after stream 1 by an event"));

  // An event never recorded is ready.
  WEFT_RETURN_IF_ERROR(
      Session::Call(s.t()->event_synchronize(s.d(), never), "event_synchronize of an unrecorded event"));
  std::atomic<int> calls{0};
  const weft_done_fn count = [](void* user, weft_status_t status) {
    plugin::TakeStatus(status).IgnoreError();
    static_cast<std::atomic<int>*>(user)->fetch_add(1);
  };
  WEFT_RETURN_IF_ERROR(
      Session::Call(s.t()->event_on_ready(s.d(), never, count, &calls), "event_on_ready of an unrecorded event"));
  for (int i = 0; i < 3000 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (calls.load() != 1) {
    return InvalidArgumentError("event_on_ready of an event never recorded called back ", calls.load(),
                                " times in 30 s; an unrecorded event is ready");
  }
  {
    std::lock_guard<std::mutex> lock(waiter->mutex);
    if (waiter->calls != 1) return InvalidArgumentError("event_on_ready called back ", waiter->calls, " times");
  }
  return Status();
}

Status CheckErrorPaths(const plugin::Device& device) {
  const weft_device_plugin_t* t = device.table();
  int32_t count = 0;
  WEFT_RETURN_IF_ERROR(Session::Call(t->device_count(&count), "device_count"));
  for (int32_t ordinal : {count, int32_t{-1}}) {
    weft_device_t handle = nullptr;
    Status status = plugin::TakeStatus(t->device_open(ordinal, &handle));
    if (status.ok()) {
      t->device_close(handle);
      return InvalidArgumentError("device_open(", ordinal, ") succeeded with ", count, " devices");
    }
  }
  return Status();
}

// Destroying a stream does not cancel what was enqueued on it.
Status CheckWorkInFlight(const plugin::Device& device) {
  Session s(device);
  const std::size_t n = 8 << 20;
  const std::vector<unsigned char> data = Pattern(n, 4);
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t a, s.Alloc(n));
  WEFT_ASSIGN_OR_RETURN(weft_buffer_t b, s.Alloc(n));
  WEFT_ASSIGN_OR_RETURN(weft_stream_t doomed, s.Stream());
  WEFT_RETURN_IF_ERROR(s.ToDevice(doomed, data, a, 0));
  WEFT_RETURN_IF_ERROR(
      Session::Call(s.t()->copy_device_to_device(s.d(), doomed, a, 0, b, 0, n), "copy_device_to_device"));
  s.DestroyStream(doomed);
  WEFT_ASSIGN_OR_RETURN(weft_stream_t later, s.Stream());
  // Another stream cannot wait for a destroyed one; the device as a whole
  // must have finished the work by the time a later blocking read of the
  // same buffer on a new stream returns, or within the loop's retries.
  std::vector<unsigned char> back;
  for (int attempt = 0; attempt < 50; ++attempt) {
    WEFT_ASSIGN_OR_RETURN(back, s.ToHost(later, b, 0, n));
    if (std::memcmp(back.data(), data.data(), n) == 0) return Status();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Same(back.data(), data.data(), n, "copies enqueued on a stream destroyed before they were waited for");
}

}  // namespace

std::vector<AbiResult> RunAbiChecks(const plugin::Device& device) {
  struct Check {
    const char* name;
    const char* what;
    std::function<Status(const plugin::Device&)> run;
  };
  const std::vector<Check> checks = {
      {"properties", "alignment a power of two >= 8; host_visible iff buffer_host_pointer", CheckProperties},
      {"allocation", "buffers of 0, 1, 7, 4096 and 1 MiB + 3 bytes, aligned as stated; free(NULL)", CheckAllocation},
      {"allocation too large", "4 EiB gives RESOURCE_EXHAUSTED", CheckHugeAllocation},
      {"copies", "host <-> device round trips, at offsets, device -> device, 0 bytes", CheckCopies},
      {"streams and events", "a copy ordered across streams by an event; on_ready once; unrecorded events ready",
       CheckStreamsAndEvents},
      {"error paths", "device_open of a missing ordinal fails", CheckErrorPaths},
      {"work in flight", "a stream destroyed with copies pending still completes them", CheckWorkInFlight},
  };
  std::vector<AbiResult> results;
  for (const Check& check : checks) {
    Status status = check.run(device);
    results.push_back({device.name(), check.name, check.what, status.ok() ? "" : status.ToString()});
  }
  return results;
}

}  // namespace weft::conformance
