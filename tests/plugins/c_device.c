/* A device plugin written in plain C99 against the SDK headers: proof that
 * the ABI needs no C++ on the plugin side. One host-memory device of type
 * CDEV. */
#include <stdlib.h>
#include <string.h>

#include "weft/weft_plugin.h"

static const weft_host_t* g_host;

typedef struct {
  void* data;
  uint64_t size;
} c_buffer;

static weft_status_t count(int32_t* out) {
  *out = 1;
  return NULL;
}
static weft_status_t open_device(int32_t ordinal, weft_device_t* out) {
  if (ordinal != 0) return g_host->status_new(WEFT_NOT_FOUND, "only /device:CDEV:0 exists");
  *out = (weft_device_t)(void*)&g_host;
  return NULL;
}
static void close_device(weft_device_t device) { (void)device; }
static weft_status_t properties(weft_device_t device, weft_device_properties_t* out) {
  (void)device;
  out->model = "C99 test device";
  if (WEFT_STRUCT_HAS(out, weft_device_properties_t, alignment)) out->alignment = 16;
  if (WEFT_STRUCT_HAS(out, weft_device_properties_t, host_visible)) out->host_visible = 1;
  return NULL;
}
static weft_status_t alloc_buffer(weft_device_t device, uint64_t size, weft_buffer_t* out) {
  c_buffer* b = (c_buffer*)malloc(sizeof(c_buffer));
  (void)device;
  if (b == NULL) return g_host->status_new(WEFT_RESOURCE_EXHAUSTED, "out of memory");
  b->data = malloc(size == 0 ? 1 : (size_t)size);
  b->size = size;
  if (b->data == NULL) {
    free(b);
    return g_host->status_new(WEFT_RESOURCE_EXHAUSTED, "out of memory");
  }
  *out = (weft_buffer_t)(void*)b;
  return NULL;
}
static void free_buffer(weft_device_t device, weft_buffer_t buffer) {
  c_buffer* b = (c_buffer*)(void*)buffer;
  (void)device;
  if (b != NULL) {
    free(b->data);
    free(b);
  }
}
static void* host_pointer(weft_device_t device, weft_buffer_t buffer) {
  (void)device;
  return ((c_buffer*)(void*)buffer)->data;
}
static weft_status_t stream_create(weft_device_t d, weft_stream_t* out) {
  (void)d;
  *out = (weft_stream_t)(void*)&g_host;
  return NULL;
}
static void stream_destroy(weft_device_t d, weft_stream_t s) {
  (void)d;
  (void)s;
}
static weft_status_t stream_sync(weft_device_t d, weft_stream_t s) {
  (void)d;
  (void)s;
  return NULL;
}
static weft_status_t event_create(weft_device_t d, weft_event_t* out) {
  (void)d;
  *out = (weft_event_t)(void*)&g_host;
  return NULL;
}
static void event_destroy(weft_device_t d, weft_event_t e) {
  (void)d;
  (void)e;
}
static weft_status_t event_record(weft_device_t d, weft_event_t e, weft_stream_t s) {
  (void)d;
  (void)e;
  (void)s;
  return NULL;
}
static weft_status_t stream_wait(weft_device_t d, weft_stream_t s, weft_event_t e) {
  (void)d;
  (void)s;
  (void)e;
  return NULL;
}
static weft_status_t event_sync(weft_device_t d, weft_event_t e) {
  (void)d;
  (void)e;
  return NULL;
}
static weft_status_t event_on_ready(weft_device_t d, weft_event_t e, weft_done_fn done, void* user) {
  (void)d;
  (void)e;
  done(user, NULL);
  return NULL;
}
static weft_status_t h2d(weft_device_t d, weft_stream_t s, const void* src, weft_buffer_t dst, uint64_t off,
                         uint64_t size) {
  (void)d;
  (void)s;
  memcpy((char*)((c_buffer*)(void*)dst)->data + off, src, (size_t)size);
  return NULL;
}
static weft_status_t d2h(weft_device_t d, weft_stream_t s, weft_buffer_t src, uint64_t off, void* dst, uint64_t size) {
  (void)d;
  (void)s;
  memcpy(dst, (const char*)((c_buffer*)(void*)src)->data + off, (size_t)size);
  return NULL;
}
static weft_status_t d2d(weft_device_t d, weft_stream_t s, weft_buffer_t src, uint64_t soff, weft_buffer_t dst,
                         uint64_t doff, uint64_t size) {
  (void)d;
  (void)s;
  memmove((char*)((c_buffer*)(void*)dst)->data + doff, (const char*)((c_buffer*)(void*)src)->data + soff, (size_t)size);
  return NULL;
}

static weft_device_plugin_t g_device;
static weft_plugin_t g_plugin;

weft_status_t weft_plugin_init_v1(const weft_host_t* host, const weft_plugin_t** out_plugin) {
  g_host = host;
  memset(&g_device, 0, sizeof g_device);
  g_device.struct_size = sizeof g_device;
  g_device.device_type = "CDEV";
  g_device.device_count = count;
  g_device.device_open = open_device;
  g_device.device_close = close_device;
  g_device.device_properties = properties;
  g_device.buffer_alloc = alloc_buffer;
  g_device.buffer_free = free_buffer;
  g_device.buffer_host_pointer = host_pointer;
  g_device.stream_create = stream_create;
  g_device.stream_destroy = stream_destroy;
  g_device.stream_synchronize = stream_sync;
  g_device.event_create = event_create;
  g_device.event_destroy = event_destroy;
  g_device.event_record = event_record;
  g_device.stream_wait_event = stream_wait;
  g_device.event_synchronize = event_sync;
  g_device.event_on_ready = event_on_ready;
  g_device.copy_host_to_device = h2d;
  g_device.copy_device_to_host = d2h;
  g_device.copy_device_to_device = d2d;

  memset(&g_plugin, 0, sizeof g_plugin);
  g_plugin.struct_size = sizeof g_plugin;
  g_plugin.abi_major = WEFT_ABI_VERSION_MAJOR;
  g_plugin.abi_minor = WEFT_ABI_VERSION_MINOR;
  g_plugin.name = "cdev";
  g_plugin.version = "1.0.0";
  g_plugin.description = "a device plugin in C99";
  g_plugin.kind = WEFT_PLUGIN_DEVICE;
  g_plugin.device = &g_device;
  *out_plugin = &g_plugin;
  return NULL;
}
