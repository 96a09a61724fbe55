/* Weft's C inference API: load a model, open a session, run it on the
 * caller's host buffers (docs/embedding.md).
 *
 * This is the API for applications that embed Weft, apart from the plugin
 * SDK (weft_plugin.h and friends, for those who write devices, transports
 * and optimizers). It shares only the dtype numbers of weft_tensor.h.
 *
 * Every call that can fail returns a weft_error_t*: NULL on success, else
 * an error the caller frees with weft_error_free, holding a code (the
 * WEFT_* status codes of weft_status.h: WEFT_INVALID_ARGUMENT, ...) and a
 * message that names what was wrong. No call aborts the process on bad
 * input: NULL pointers, unknown names, wrong dtypes, shapes and buffer
 * sizes are errors.
 *
 * Versioning follows the plugin ABI's: WEFT_INFERENCE_API_VERSION grows
 * when functions or struct fields are added at the end; a program built
 * against version N runs with a library of version >= N. Structs the
 * caller fills carry no size field; they never change once published
 * (new needs get new structs and functions).
 *
 * Threads: a model and a session may be used from several threads at
 * once; weft_session_run calls run concurrently.
 */
#ifndef WEFT_INFERENCE_H_
#define WEFT_INFERENCE_H_

#include <stddef.h>
#include <stdint.h>

#include "weft/weft_status.h"
#include "weft/weft_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_INFERENCE_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_INFERENCE_EXPORT
#endif

#define WEFT_INFERENCE_API_VERSION 1

typedef struct weft_error weft_error_t;
typedef struct weft_model weft_model_t;
typedef struct weft_session_options weft_session_options_t;
typedef struct weft_session weft_session_t;
typedef struct weft_array weft_array_t;

/* The version of the library loaded (compare with
 * WEFT_INFERENCE_API_VERSION, the one compiled against). */
WEFT_INFERENCE_EXPORT uint32_t weft_inference_api_version(void);

/* --- Errors ------------------------------------------------------------ */

/* The code (WEFT_INVALID_ARGUMENT, ...) and the message; both accept NULL
 * (WEFT_OK and ""). The message lives as long as the error. */
WEFT_INFERENCE_EXPORT int32_t weft_error_code(const weft_error_t* error);
WEFT_INFERENCE_EXPORT const char* weft_error_message(const weft_error_t* error);
WEFT_INFERENCE_EXPORT void weft_error_free(weft_error_t* error);

/* --- Models ------------------------------------------------------------ */

/* Reads a model: .onnx (imported, its initializers frozen as constants),
 * .wg (a binary graph) or .wgt (a text graph). */
WEFT_INFERENCE_EXPORT weft_error_t* weft_model_load(const char* path, weft_model_t** out);
/* The same from |size| bytes at |data| (copied; the caller may free them
 * after the call). |format| is "onnx", "wg" or "wgt". An ONNX model with
 * external data files cannot be loaded from memory. */
WEFT_INFERENCE_EXPORT weft_error_t* weft_model_load_memory(const void* data, size_t size, const char* format,
                                                           weft_model_t** out);
/* Sessions opened from a model keep what they need: the model may be freed
 * before them. NULL is ignored. */
WEFT_INFERENCE_EXPORT void weft_model_free(weft_model_t* model);

/* --- Session options --------------------------------------------------- */

WEFT_INFERENCE_EXPORT weft_error_t* weft_session_options_create(weft_session_options_t** out);
/* Reads a Weft TOML config file (docs/config.md): its [runtime] threads,
 * [placement], [graph_optimizer] and [plugins] apply to the sessions
 * opened with these options ([logging] and the training and cluster
 * sections do not). It sets every option the file holds: call it first,
 * and the calls below override it. A missing or malformed file is an error
 * naming the file, line and key. */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_options_set_config(weft_session_options_t* options, const char* path);
/* Threads one kernel may use (intra-op) and independent nodes that run at
 * once (inter-op); 0 derives either from the cores (the default). */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_options_set_threads(weft_session_options_t* options, int32_t intra_op,
                                                                     int32_t inter_op);
/* The graph optimizer's level (docs/optimizer.md): 0 runs the graph as
 * written; the default is the build's. */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_options_set_optimizer_level(weft_session_options_t* options,
                                                                             int32_t level);
/* The device type to run on first ("CPU", "CUDA", "HIP", "OPENCL"): nodes
 * it cannot run fall back to the others. The session refuses a type no
 * loaded plugin has a device of. Default: CUDA, HIP, CPU, OPENCL, the
 * first that has a device. */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_options_set_device(weft_session_options_t* options,
                                                                    const char* device_type);
/* Where device plugins are looked for, before $WEFT_PLUGIN_PATH and the
 * folder next to the library: directories or plugin files, separated by
 * ':'. */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_options_set_plugin_path(weft_session_options_t* options,
                                                                         const char* paths);
WEFT_INFERENCE_EXPORT void weft_session_options_free(weft_session_options_t* options);

/* --- Sessions ---------------------------------------------------------- */

/* Loads the device plugins and prepares |model| to run. |options| may be
 * NULL (the defaults). */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_create(const weft_model_t* model,
                                                        const weft_session_options_t* options, weft_session_t** out);
WEFT_INFERENCE_EXPORT void weft_session_free(weft_session_t* session);

/* An input or output of a session's model. rank is -1 when unknown; a
 * dimension is -1 when unknown (a batch of any size). The pointers live as
 * long as the session. */
typedef struct weft_tensor_info_t {
  const char* name;
  weft_dtype_t dtype;
  int32_t rank;
  const int64_t* dims;
} weft_tensor_info_t;

/* The model's inputs (its ONNX inputs, or the Placeholders its outputs
 * need) and outputs (its ONNX outputs, or the nodes nothing reads). */
WEFT_INFERENCE_EXPORT size_t weft_session_input_count(const weft_session_t* session);
WEFT_INFERENCE_EXPORT size_t weft_session_output_count(const weft_session_t* session);
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_input_info(const weft_session_t* session, size_t index,
                                                            weft_tensor_info_t* out);
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_output_info(const weft_session_t* session, size_t index,
                                                             weft_tensor_info_t* out);

/* A value fed to an input: |byte_size| bytes at |data|, row-major, of
 * |dtype| and the |rank| dimensions at |dims|. The buffer is read during
 * the call only, and used in place (no copy) when it is 64-byte aligned. */
typedef struct weft_feed_t {
  const char* name;
  weft_dtype_t dtype;
  int32_t rank;
  const int64_t* dims;
  const void* data;
  size_t byte_size;
} weft_feed_t;

/* An output to compute. The caller sets |name|, and either |data| and
 * |capacity| (a buffer it owns, which must hold the whole output) or
 * |data| = NULL (the library allocates the output as |array|, which the
 * caller frees with weft_array_free). The run sets the rest: dtype, rank,
 * dims, byte_size (the bytes written, or that the output needs when the
 * buffer was too small: the run then fails with WEFT_OUT_OF_RANGE, naming
 * the size). */
typedef struct weft_fetch_t {
  const char* name;
  void* data;
  size_t capacity;
  weft_dtype_t dtype;
  int32_t rank;
  int64_t dims[WEFT_MAX_RANK];
  size_t byte_size;
  weft_array_t* array;
} weft_fetch_t;

/* Runs the model once: every feed's value to its input, every fetch
 * computed. Inputs the fetches do not need may be left out. */
WEFT_INFERENCE_EXPORT weft_error_t* weft_session_run(weft_session_t* session, const weft_feed_t* feeds,
                                                     size_t num_feeds, weft_fetch_t* fetches, size_t num_fetches);

/* An output the library allocated: its bytes (64-byte aligned), until
 * weft_array_free. NULL is ignored. */
WEFT_INFERENCE_EXPORT const void* weft_array_data(const weft_array_t* value);
WEFT_INFERENCE_EXPORT size_t weft_array_byte_size(const weft_array_t* value);
WEFT_INFERENCE_EXPORT void weft_array_free(weft_array_t* value);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_INFERENCE_H_ */
