/* Weft plugin ABI: the entry point and the host services.
 *
 * This is the one header a plugin needs; it includes the rest of the SDK.
 *
 * A plugin is a shared library that exports exactly one symbol,
 *
 *   weft_status_t weft_plugin_init_v1(const weft_host_t* host,
 *                                     const weft_plugin_t** out_plugin);
 *
 * whose name carries the ABI major version. The host loads the library
 * (RTLD_LOCAL | RTLD_NOW, never unloaded while the process lives), calls
 * the entry once, and reads the plugin's description from |*out_plugin|.
 *
 *  - The entry is called from one thread, once per process for each
 *    library (again only after the plugin's shutdown hook ran);
 *    `configure` once per host instance that uses the plugin, before any
 *    of its devices is opened.
 *  - |host| is the host's services table: statuses, logging, host memory,
 *    a parallel-for, option values, and the kernel and graph services. It
 *    stays valid for the life of the process; a plugin keeps the pointer.
 *  - |*out_plugin| points to the plugin's own description (usually static
 *    data) and must stay valid for the life of the process.
 *  - Returning a status with code WEFT_UNAVAILABLE means "I cannot serve
 *    on this machine" (no GPU, no driver): the host logs the message, lists
 *    the plugin as unavailable and goes on. Any other error refuses the
 *    plugin with that message.
 *
 * A C++ plugin should use the helpers in weft/sdk/, whose
 * WEFT_SDK_DEFINE_PLUGIN macro writes the entry point and runs it inside
 * the exception guard.
 *
 * The rules that keep the ABI stable, written once for every header of the
 * SDK:
 *
 *  1. Every struct that crosses the boundary starts with `size_t struct_size`
 *     and only ever grows at its end. Members are never removed, reordered
 *     or retyped. Each member added after 1.0 says "(since 1.N)".
 *  2. Whoever provides a struct sets `struct_size` to the `sizeof` it was
 *     compiled with. For a table a plugin provides (a device table, a kernel
 *     definition) that is the plugin; for an out-struct the host asks a
 *     plugin to fill in (device properties) it is the caller, and the callee
 *     writes only the members that fit.
 *  3. A reader checks that a member is present with WEFT_STRUCT_HAS before
 *     touching it, and never demands an exact size. A struct smaller than
 *     the 1.0 layout (its `*_SIZE_V1_0`) is refused.
 *  4. A function-pointer member that is NULL means "not supported"; each
 *     member says what the host does instead.
 *  5. Arrays of structs are walked with the stride of their first element's
 *     `struct_size`; every element of one array has the same `struct_size`,
 *     which is a multiple of the struct's alignment. WEFT_ARRAY_AT does
 *     this; check the count before using it (a NULL array has none).
 *  6. Ownership: what a `*_create`, `*_alloc`, `*_open` or `*_register`
 *     function returns is owned by the caller and released through the
 *     matching `*_destroy`, `*_free`, `*_close` or `*_unregister` of the
 *     same table. A handle a callback hands over as new (an accepted
 *     connection) is owned by the callback's receiver in the same way, and
 *     stays valid until that owner releases it. Everything else
 *     that is returned (strings, arrays, tables) is lent: it stays valid for
 *     as long as the object it was obtained from, and static data of a
 *     plugin stays valid for the life of the process (plugins are never
 *     unloaded).
 *  7. A `weft_status_t` returned by a function is owned by the caller, which
 *     frees it (weft_host_t.status_free). NULL means OK. A status passed to
 *     a callback is owned by the callback.
 *  8. No C++ exception, longjmp or signal ever crosses the boundary. C++
 *     plugins run every entry point inside weft::sdk::Guard (see
 *     weft/sdk/guard.h), which turns exceptions into statuses.
 *  9. Flag words only ever opt in: a reader ignores bits it does not know.
 *
 * The host checks, and refuses with a message naming the file:
 *  - a library without weft_plugin_init_v1 (and says which version it
 *    exports instead, if any);
 *  - abi_major different from the host's;
 *  - any table smaller than its 1.0 layout (*_SIZE_V1_0);
 *  - a name that is empty, not lower_snake_case, or already taken;
 *  - a kind whose table is missing, or a required member that is NULL.
 */
#ifndef WEFT_PLUGIN_H_
#define WEFT_PLUGIN_H_

#include "weft/weft_abi.h"
#include "weft/weft_collectives.h"
#include "weft/weft_device.h"
#include "weft/weft_kernel.h"
#include "weft/weft_optimizer.h"
#include "weft/weft_options.h"
#include "weft/weft_status.h"
#include "weft/weft_tensor.h"
#include "weft/weft_transport.h"

WEFT_EXTERN_C_BEGIN

typedef int32_t weft_plugin_kind_t;
/* WEFT_PLUGIN_COLLECTIVES since 1.2; a 1.1 host refuses kind 4 as unknown. */
enum { WEFT_PLUGIN_DEVICE = 1, WEFT_PLUGIN_TRANSPORT = 2, WEFT_PLUGIN_OPTIMIZER = 3, WEFT_PLUGIN_COLLECTIVES = 4 };

typedef int32_t weft_log_level_t;
enum { WEFT_LOG_TRACE = 0, WEFT_LOG_DEBUG = 1, WEFT_LOG_INFO = 2, WEFT_LOG_WARNING = 3, WEFT_LOG_ERROR = 4 };

/* The services the host offers every plugin. Provided by the host, valid
 * for the life of the process, safe to call from any thread. Every member
 * of the 1.0 layout is non-NULL except `kernel` and `graph`, as noted
 * there. */
typedef struct weft_host_t {
  size_t struct_size;
  /* The host's ABI version and its own release ("0.1.0"). */
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* version;

  /* --- Statuses (weft/weft_status.h) ---------------------------------- */

  /* A new status with |code| and a copy of |message| (NULL is read as "").
   * Returns NULL, meaning OK, when |code| is WEFT_OK. The caller owns it. */
  weft_status_t (*status_new)(weft_code_t code, const char* message);
  /* The code of |status|; WEFT_OK for NULL. */
  weft_code_t (*status_code)(weft_status_t status);
  /* The message of |status|, lent until it is freed; "" for NULL. */
  const char* (*status_message)(weft_status_t status);
  /* Frees |status|; NULL is ignored. */
  void (*status_free)(weft_status_t status);

  /* --- Logging -------------------------------------------------------- */

  /* Logs |message| at |level|, attributed to |plugin| (its name) and the
   * source position |file|:|line| (NULL and 0 when not known). */
  void (*log)(weft_log_level_t level, const char* plugin, const char* file, int32_t line, const char* message);
  /* Whether a message at |level| would be written; lets a plugin skip
   * building it. */
  weft_bool_t (*log_enabled)(weft_log_level_t level);

  /* --- Host memory ---------------------------------------------------- */

  /* |size| bytes aligned to |alignment| (a power of two, at least
   * sizeof(void*)), or NULL when memory is out. */
  void* (*host_alloc)(uint64_t size, uint64_t alignment);
  /* Frees memory from host_alloc; NULL is ignored. */
  void (*host_free)(void* ptr);

  /* --- Threads -------------------------------------------------------- */

  /* Runs |fn|(|user|, begin, end) over disjoint ranges covering
   * [0, |count|), on the intra-op threads, and returns when all are done.
   * |cost_per_unit_ns| estimates the work per index so small loops are not
   * split. |fn| must not throw or block on other parallel_for calls. */
  void (*parallel_for)(int64_t count, int64_t cost_per_unit_ns, void (*fn)(void* user, int64_t begin, int64_t end),
                       void* user);
  /* How many threads parallel_for may use (>= 1). A plugin with its own
   * thread pool (oneDNN's OpenMP) sizes it to this so that cores are not
   * oversubscribed. Both answer for the calling thread: in a kernel, the
   * setting of the session running it (sessions in one process may differ),
   * so ask in each compute rather than once. */
  int32_t (*intra_op_threads)(void);

  /* --- Option values (weft/weft_options.h) ----------------------------- */

  /* The value of |key| in |options|, or its declared default. NOT_FOUND
   * when neither exists, INVALID_ARGUMENT when the key holds another
   * type. Strings are lent for the life of |options| and NUL-terminated. */
  weft_status_t (*option_get_bool)(const weft_options_t* options, const char* key, weft_bool_t* out_value);
  weft_status_t (*option_get_int)(const weft_options_t* options, const char* key, int64_t* out_value);
  weft_status_t (*option_get_float)(const weft_options_t* options, const char* key, double* out_value);
  weft_status_t (*option_get_string)(const weft_options_t* options, const char* key, const char** out_value);

  /* --- Services for kernels and optimizers ---------------------------- */

  /* Kernel context accessors (weft/weft_kernel.h). NULL in a host that
   * never runs kernels (a tool that only lists plugins); such a host never
   * calls a kernel's create or compute either. */
  const weft_kernel_api_t* kernel;
  /* Graph building for optimizers (weft/weft_optimizer.h). NULL in a host
   * that never builds training graphs; such a host never calls
   * build_update. */
  const weft_graph_api_t* graph;
} weft_host_t;

#define WEFT_HOST_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_host_t, graph)

/* What a plugin is. Provided by the plugin through |*out_plugin|; must stay
 * valid for the life of the process. */
typedef struct weft_plugin_t {
  size_t struct_size;
  /* The ABI the plugin was compiled against: set these to
   * WEFT_ABI_VERSION_MAJOR and WEFT_ABI_VERSION_MINOR. */
  uint32_t abi_major;
  uint32_t abi_minor;
  /* Unique among all loaded plugins, lower_snake_case ("cpu", "tcp",
   * "adam"). Required. */
  const char* name;
  /* The plugin's own version ("1.4.2"). Required. */
  const char* version;
  /* One line for `weft plugins`. Optional: NULL shows nothing. */
  const char* description;
  weft_plugin_kind_t kind;
  /* The table for |kind|; the others are NULL (collectives, below, came
   * later). */
  const weft_device_plugin_t* device;
  const weft_transport_plugin_t* transport;
  const weft_optimizer_plugin_t* optimizer;
  /* The keys of the plugin's TOML section: [devices.<name>],
   * [transports.<name>], [optimizers.<name>] or [collectives.<name>].
   * NULL when num_options is 0: the section must then be empty. */
  const weft_option_def_t* options;
  size_t num_options;
  /* Called after init and before any other call, with the plugin's
   * validated section; the handle is valid only during the call, so the
   * plugin copies what it needs. Optional: NULL means the plugin reads no
   * options (any it declares are still validated). An error (or
   * UNAVAILABLE) here is treated like one from init. */
  weft_status_t (*configure)(const weft_options_t* options);
  /* Called once when the host shuts down, after every device, endpoint and
   * optimizer instance of the plugin was released. Optional. */
  void (*shutdown)(void);
  /* The table for kind WEFT_PLUGIN_COLLECTIVES (since 1.2); NULL for the
   * other kinds. */
  const weft_collectives_plugin_t* collectives;
} weft_plugin_t;

#define WEFT_PLUGIN_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_plugin_t, shutdown)

/* The entry point's type and name. */
typedef weft_status_t (*weft_plugin_init_fn)(const weft_host_t* host, const weft_plugin_t** out_plugin);
#define WEFT_PLUGIN_ENTRY_SYMBOL "weft_plugin_init_v1"

WEFT_PLUGIN_EXPORT weft_status_t weft_plugin_init_v1(const weft_host_t* host, const weft_plugin_t** out_plugin);

WEFT_EXTERN_C_END

#endif /* WEFT_PLUGIN_H_ */
