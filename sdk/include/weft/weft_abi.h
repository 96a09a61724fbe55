/* Weft plugin ABI: common definitions.
 *
 * Every header of the Weft SDK is plain C99 with no dependency beyond the C
 * standard library, so that a plugin can be written in any language that can
 * call C and built against these headers alone.
 *
 * It holds the macros and opaque handle types every other header uses. The
 * rules that keep the ABI stable (struct_size, NULL members, ownership) are
 * written once, in weft/weft_plugin.h.
 */
#ifndef WEFT_ABI_H_
#define WEFT_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define WEFT_EXTERN_C_BEGIN extern "C" {
#define WEFT_EXTERN_C_END }
#else
#define WEFT_EXTERN_C_BEGIN
#define WEFT_EXTERN_C_END
#endif

/* The version of the ABI these headers describe. A host refuses a plugin
 * whose major version differs from its own; a different minor version is
 * fine in either direction, thanks to rules 1-3 above. */
#define WEFT_ABI_VERSION_MAJOR 1
#define WEFT_ABI_VERSION_MINOR 3

/* Marks the one symbol a plugin exports: its entry point. */
#if defined(_WIN32)
#define WEFT_PLUGIN_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define WEFT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_PLUGIN_EXPORT
#endif

/* The number of bytes a struct of |type| needs to hold |member| and every
 * member before it. */
#ifdef __cplusplus
#define WEFT_STRUCT_SIZE_THROUGH(type, member) (offsetof(type, member) + sizeof(type::member))
#else
#define WEFT_STRUCT_SIZE_THROUGH(type, member) (offsetof(type, member) + sizeof(((type*)0)->member))
#endif

/* Whether the struct at |ptr| (of |type|) is large enough to contain
 * |member|. |ptr| must not be NULL. */
#define WEFT_STRUCT_HAS(ptr, type, member) ((ptr)->struct_size >= WEFT_STRUCT_SIZE_THROUGH(type, member))

/* The |index|th element of an array of ABI structs of |type| starting at
 * |base|, using the first element's struct_size as the stride (rule 5). */
#define WEFT_ARRAY_AT(type, base, index) \
  ((const type*)(const void*)((const char*)(const void*)(base) + (size_t)(index) * (base)->struct_size))

WEFT_EXTERN_C_BEGIN

/* Booleans cross the boundary as int32_t: 0 is false, anything else true. */
typedef int32_t weft_bool_t;

/* Opaque handles. Each is defined by whoever creates it: statuses, options
 * and kernel contexts by the host; devices, buffers, streams, events,
 * endpoints and connections by the plugin that returned them. */
typedef struct weft_status_s* weft_status_t;
typedef struct weft_options_s weft_options_t;
typedef struct weft_device_s* weft_device_t;
typedef struct weft_buffer_s* weft_buffer_t;
typedef struct weft_stream_s* weft_stream_t;
typedef struct weft_event_s* weft_event_t;

/* A completion callback. |status| (NULL for OK) is owned by the callback. */
typedef void (*weft_done_fn)(void* user, weft_status_t status);

WEFT_EXTERN_C_END

#endif /* WEFT_ABI_H_ */
