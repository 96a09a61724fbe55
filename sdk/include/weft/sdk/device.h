// Weft SDK for C++ plugins: helpers for device tables.
//
// A device whose copies and kernels have finished when their call returns
// (a simulator, a device driven through a blocking API, a first version of
// a plugin) needs no real streams or events: every stream is already
// drained and every event already reached. SetInlineStreams fills in the
// nine required stream and event members of a weft_device_plugin_t with
// exactly that, so such a plugin writes only memory, copies and kernels:
//
//   const weft_device_plugin_t kDevice = [] {
//     auto t = weft::sdk::Make<weft_device_plugin_t>();
//     t.device_type = "ADD";
//     ...                              // count, open, memory
//     weft::sdk::SetInlineStreams(t);  // copies and kernels finish before returning
//     ...                              // copies, kernels
//     return t;
//   }();
//
// (tests/sdk/add_device/add_device.cc, whole.)
//
// A device that queues work (a GPU) implements the members itself: the host
// relies on them to order work across streams (weft/weft_device.h).
#ifndef WEFT_SDK_DEVICE_H_
#define WEFT_SDK_DEVICE_H_

#include "weft/weft_device.h"

namespace weft::sdk {
namespace internal {

// Streams and events of an inline device carry no state: one non-null tag
// stands for all of them.
inline char g_inline_tag = 0;

inline weft_status_t InlineStreamCreate(weft_device_t, weft_stream_t* out) {
  *out = reinterpret_cast<weft_stream_t>(&g_inline_tag);
  return nullptr;
}
inline void InlineStreamDestroy(weft_device_t, weft_stream_t) {}
inline weft_status_t InlineStreamSynchronize(weft_device_t, weft_stream_t) { return nullptr; }
inline weft_status_t InlineEventCreate(weft_device_t, weft_event_t* out) {
  *out = reinterpret_cast<weft_event_t>(&g_inline_tag);
  return nullptr;
}
inline void InlineEventDestroy(weft_device_t, weft_event_t) {}
inline weft_status_t InlineEventRecord(weft_device_t, weft_event_t, weft_stream_t) { return nullptr; }
inline weft_status_t InlineStreamWaitEvent(weft_device_t, weft_stream_t, weft_event_t) { return nullptr; }
inline weft_status_t InlineEventSynchronize(weft_device_t, weft_event_t) { return nullptr; }
inline weft_status_t InlineEventOnReady(weft_device_t, weft_event_t, weft_done_fn done, void* user) {
  done(user, nullptr);  // already reached: call back at once, on this thread
  return nullptr;
}

}  // namespace internal

// Sets |table|'s stream and event members for a device whose every
// operation has completed when it returns.
inline void SetInlineStreams(weft_device_plugin_t& table) {
  table.stream_create = internal::InlineStreamCreate;
  table.stream_destroy = internal::InlineStreamDestroy;
  table.stream_synchronize = internal::InlineStreamSynchronize;
  table.event_create = internal::InlineEventCreate;
  table.event_destroy = internal::InlineEventDestroy;
  table.event_record = internal::InlineEventRecord;
  table.stream_wait_event = internal::InlineStreamWaitEvent;
  table.event_synchronize = internal::InlineEventSynchronize;
  table.event_on_ready = internal::InlineEventOnReady;
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_DEVICE_H_
