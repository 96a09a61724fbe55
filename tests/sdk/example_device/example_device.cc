// An example device plugin for Weft, built out of tree against the SDK.
//
// The EXAMPLE device keeps its memory to itself: its buffers are not
// host-visible, so the host moves data with the copy functions, exactly as
// it would for a GPU. Its "stream" is a queue of work run in order by the
// thread that enqueues it, which is the simplest correct stream.
//
// Everything a real device plugin needs is here; copy this file to start
// one. It sees nothing of Weft but the SDK (weft/...).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "weft/sdk/plugin.h"

namespace {

struct Buffer {
  std::vector<unsigned char> bytes;
};

Buffer* AsBuffer(weft_buffer_t b) { return reinterpret_cast<Buffer*>(b); }

void CheckRange(const Buffer* b, uint64_t offset, uint64_t size) {
  if (b == nullptr || offset > b->bytes.size() || size > b->bytes.size() - offset) {
    throw weft::sdk::Error(WEFT_OUT_OF_RANGE, "copy outside the buffer");
  }
}

weft_status_t Count(int32_t* out) { return weft::sdk::Guard([&] { *out = 1; }); }

weft_status_t Open(int32_t ordinal, weft_device_t* out) {
  return weft::sdk::Guard([&] {
    if (ordinal != 0) throw weft::sdk::Error(WEFT_NOT_FOUND, "only /device:EXAMPLE:0 exists");
    static int device_tag = 0;
    *out = reinterpret_cast<weft_device_t>(&device_tag);
  });
}

void Close(weft_device_t) {}

weft_status_t Properties(weft_device_t, weft_device_properties_t* out) {
  return weft::sdk::Guard([&] {
    auto props = weft::sdk::Make<weft_device_properties_t>();
    props.model = "Example device";
    props.vendor = "Weft SDK example";
    props.memory_bytes = uint64_t{1} << 30;
    props.alignment = 64;
    props.host_visible = 0;
    props.compute_units = 1;
    weft::sdk::FillOut(out, props);
  });
}

weft_status_t Alloc(weft_device_t, uint64_t size, weft_buffer_t* out) {
  return weft::sdk::Guard([&] {
    *out = reinterpret_cast<weft_buffer_t>(new Buffer{std::vector<unsigned char>(size)});
  });
}

void Free(weft_device_t, weft_buffer_t buffer) { delete AsBuffer(buffer); }

weft_status_t StreamCreate(weft_device_t, weft_stream_t* out) {
  static int stream_tag = 0;
  *out = reinterpret_cast<weft_stream_t>(&stream_tag);
  return nullptr;
}
void StreamDestroy(weft_device_t, weft_stream_t) {}
weft_status_t StreamSync(weft_device_t, weft_stream_t) { return nullptr; }
weft_status_t EventCreate(weft_device_t, weft_event_t* out) {
  static int event_tag = 0;
  *out = reinterpret_cast<weft_event_t>(&event_tag);
  return nullptr;
}
void EventDestroy(weft_device_t, weft_event_t) {}
weft_status_t EventRecord(weft_device_t, weft_event_t, weft_stream_t) { return nullptr; }
weft_status_t StreamWait(weft_device_t, weft_stream_t, weft_event_t) { return nullptr; }
weft_status_t EventSync(weft_device_t, weft_event_t) { return nullptr; }
weft_status_t OnReady(weft_device_t, weft_event_t, weft_done_fn done, void* user) {
  done(user, nullptr);
  return nullptr;
}

weft_status_t H2D(weft_device_t, weft_stream_t, const void* src, weft_buffer_t dst, uint64_t off,
                  uint64_t size) {
  return weft::sdk::Guard([&] {
    CheckRange(AsBuffer(dst), off, size);
    if (size > 0) std::memcpy(AsBuffer(dst)->bytes.data() + off, src, size);
  });
}

weft_status_t D2H(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t off, void* dst,
                  uint64_t size) {
  return weft::sdk::Guard([&] {
    CheckRange(AsBuffer(src), off, size);
    if (size > 0) std::memcpy(dst, AsBuffer(src)->bytes.data() + off, size);
  });
}

weft_status_t D2D(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t soff, weft_buffer_t dst,
                  uint64_t doff, uint64_t size) {
  return weft::sdk::Guard([&] {
    CheckRange(AsBuffer(src), soff, size);
    CheckRange(AsBuffer(dst), doff, size);
    if (size > 0) std::memmove(AsBuffer(dst)->bytes.data() + doff, AsBuffer(src)->bytes.data() + soff, size);
  });
}

const weft_device_plugin_t kDevice = [] {
  auto t = weft::sdk::Make<weft_device_plugin_t>();
  t.device_type = "EXAMPLE";
  t.device_count = Count;
  t.device_open = Open;
  t.device_close = Close;
  t.device_properties = Properties;
  t.buffer_alloc = Alloc;
  t.buffer_free = Free;
  t.stream_create = StreamCreate;
  t.stream_destroy = StreamDestroy;
  t.stream_synchronize = StreamSync;
  t.event_create = EventCreate;
  t.event_destroy = EventDestroy;
  t.event_record = EventRecord;
  t.stream_wait_event = StreamWait;
  t.event_synchronize = EventSync;
  t.event_on_ready = OnReady;
  t.copy_host_to_device = H2D;
  t.copy_device_to_host = D2H;
  t.copy_device_to_device = D2D;
  return t;
}();

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    auto p = weft::sdk::Make<weft_plugin_t>();
    p.abi_major = WEFT_ABI_VERSION_MAJOR;
    p.abi_minor = WEFT_ABI_VERSION_MINOR;
    p.name = "example";
    p.version = "1.0.0";
    p.description = "An example device with its own memory";
    p.kind = WEFT_PLUGIN_DEVICE;
    p.device = &kDevice;
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
