/* The C inference API from C (capi/include/weft/weft_inference.h): a model
 * y = Relu(x @ W + b), x [batch, 4] -> y [batch, 3], loaded from a file
 * and from memory, run on caller buffers (aligned, unaligned, and into a
 * library-allocated array), and every refusal the API makes checked by
 * its code and message.
 *
 *   capi_test MODEL.onnx X.bin ROWS Y.bin [EXTERNAL.onnx]
 *
 * X.bin holds ROWS x 4 float32 values; the first run's output goes to
 * Y.bin (tests/capi/capi_test.py compares it with NumPy and `weft run`).
 * EXTERNAL.onnx, the same model with its weights in an external data file,
 * loads from its file and is refused from memory.
 * Prints one line per failed check and exits 1 when any failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft_inference.h"

static int g_checks = 0;
static int g_failures = 0;

static void Check(int ok, const char* what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    printf("FAIL %s\n", what);
  }
}

/* |error| must have |code| and a message holding every one of the NULL-
 * terminated |words|; frees it. */
static void Refused(weft_error_t* error, int32_t code, const char* what, const char* const* words) {
  ++g_checks;
  if (error == NULL) {
    ++g_failures;
    printf("FAIL %s: accepted\n", what);
    return;
  }
  const char* message = weft_error_message(error);
  int ok = weft_error_code(error) == code;
  for (const char* const* w = words; *w != NULL; ++w) ok = ok && strstr(message, *w) != NULL;
  if (!ok) {
    ++g_failures;
    printf("FAIL %s: code %d (want %d), message: %s\n", what, (int)weft_error_code(error), (int)code, message);
  }
  weft_error_free(error);
}

#define REFUSED(call, code, ...)                      \
  do {                                                \
    const char* const words_[] = {__VA_ARGS__, NULL}; \
    Refused((call), (code), #call, words_);           \
  } while (0)

static int Ok(weft_error_t* error, const char* what) {
  ++g_checks;
  if (error == NULL) return 1;
  ++g_failures;
  printf("FAIL %s: %s\n", what, weft_error_message(error));
  weft_error_free(error);
  return 0;
}

static char* ReadAll(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* data = malloc(n > 0 ? (size_t)n : 1);
  *size = fread(data, 1, (size_t)n, f);
  fclose(f);
  return data;
}

static weft_feed_t Feed(const char* name, weft_dtype_t dtype, const int64_t* dims, int32_t rank, const void* data,
                        size_t bytes) {
  weft_feed_t feed = {name, dtype, rank, dims, data, bytes};
  return feed;
}

static weft_fetch_t Fetch(const char* name, void* data, size_t capacity) {
  weft_fetch_t fetch;
  memset(&fetch, 0, sizeof fetch);
  fetch.name = name;
  fetch.data = data;
  fetch.capacity = capacity;
  return fetch;
}

static void CheckInfo(weft_session_t* session) {
  Check(weft_session_input_count(session) == 1 && weft_session_output_count(session) == 1, "one input, one output");
  weft_tensor_info_t info;
  if (Ok(weft_session_input_info(session, 0, &info), "input_info")) {
    Check(strcmp(info.name, "x") == 0 && info.dtype == WEFT_DTYPE_F32 && info.rank == 2 && info.dims[0] == -1 &&
              info.dims[1] == 4,
          "input 0 is x, f32 [-1, 4]");
  }
  if (Ok(weft_session_output_info(session, 0, &info), "output_info")) {
    Check(strcmp(info.name, "y") == 0 && info.dtype == WEFT_DTYPE_F32 && info.rank == 2 && info.dims[0] == -1 &&
              info.dims[1] == 3,
          "output 0 is y, f32 [-1, 3]");
  }
  REFUSED(weft_session_input_info(session, 1, &info), WEFT_OUT_OF_RANGE, "input 1", "1 input");
  REFUSED(weft_session_output_info(session, 0, NULL), WEFT_INVALID_ARGUMENT, "out is NULL");
  REFUSED(weft_session_input_info(NULL, 0, &info), WEFT_INVALID_ARGUMENT, "session is NULL");
}

static void CheckRefusals(weft_session_t* session, const float* x, int64_t rows) {
  const int64_t dims[2] = {rows, 4};
  const int64_t wide[2] = {rows, 5};
  const size_t bytes = (size_t)rows * 4 * sizeof(float);
  float y[64 * 3];
  weft_fetch_t fetch = Fetch("y", y, sizeof y);
  weft_feed_t feed = Feed("z", WEFT_DTYPE_F32, dims, 2, x, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "no input \"z\"", "\"x\"");
  feed = Feed("x", WEFT_DTYPE_I32, dims, 2, x, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "input \"x\"", "f32", "i32");
  feed = Feed("x", WEFT_DTYPE_F32, dims, 2, x, bytes - 4);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "input \"x\"", "bytes given");
  feed = Feed("x", WEFT_DTYPE_F32, wide, 2, x, (size_t)rows * 5 * sizeof(float));
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "input \"x\"", "does not fit");
  feed = Feed("x", WEFT_DTYPE_F32, dims, 2, NULL, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "the data is NULL");
  feed = Feed("x", WEFT_DTYPE_F32, NULL, 2, x, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "rank 2 with dims NULL");
  const int64_t negative[2] = {-5, 4};
  feed = Feed("x", WEFT_DTYPE_F32, negative, 2, x, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "input \"x\": dimension 0 is -5");
  const int64_t huge[2] = {INT64_MAX / 2, 4};
  feed = Feed("x", WEFT_DTYPE_F32, huge, 2, x, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "input \"x\"");
  feed = Feed(NULL, WEFT_DTYPE_F32, dims, 2, x, bytes);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "feeds[0]", "name is NULL");
  feed = Feed("x", WEFT_DTYPE_F32, dims, 2, x, bytes);
  weft_feed_t twice[2] = {feed, feed};
  REFUSED(weft_session_run(session, twice, 2, &fetch, 1), WEFT_INVALID_ARGUMENT, "fed twice");
  weft_fetch_t wrong = Fetch("logits", y, sizeof y);
  REFUSED(weft_session_run(session, &feed, 1, &wrong, 1), WEFT_INVALID_ARGUMENT, "no output \"logits\"", "\"y\"");
  weft_fetch_t small = Fetch("y", y, 8);
  REFUSED(weft_session_run(session, &feed, 1, &small, 1), WEFT_OUT_OF_RANGE, "output \"y\" takes", "holds 8");
  Check(small.byte_size == (size_t)rows * 3 * sizeof(float), "a too-small buffer is told the size it needs");
  REFUSED(weft_session_run(session, &feed, 1, NULL, 0), WEFT_INVALID_ARGUMENT, "nothing to fetch");
  REFUSED(weft_session_run(session, NULL, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "feeds or fetches is NULL");
  REFUSED(weft_session_run(NULL, &feed, 1, &fetch, 1), WEFT_INVALID_ARGUMENT, "session is NULL");
  REFUSED(weft_session_run(session, NULL, 0, &fetch, 1), WEFT_INVALID_ARGUMENT, "'x'", "was not fed");
}

/* A TOML config for the session: |good| runs (at level 0, so the matrix
 * product, bias and Relu are not fused: the same values within 1e-6),
 * a bad key and a missing file are refused naming them. */
static void CheckConfig(const char* model_path, const char* scratch, const float* x, int64_t rows, const float* y) {
  char good[4096], bad[4096];
  snprintf(good, sizeof good, "%s.good.toml", scratch);
  snprintf(bad, sizeof bad, "%s.bad.toml", scratch);
  FILE* f = fopen(good, "w");
  FILE* g = fopen(bad, "w");
  if (f == NULL || g == NULL) {
    Check(0, "writing the config files");
    if (f != NULL) fclose(f);
    if (g != NULL) fclose(g);
    return;
  }
  fputs("[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n[graph_optimizer]\nlevel = 0\n", f);
  fputs("[graph_optimizer]\nlevel = 9\n", g);
  fclose(f);
  fclose(g);
  weft_session_options_t* options = NULL;
  weft_model_t* model = NULL;
  weft_session_t* session = NULL;
  if (!Ok(weft_session_options_create(&options), "options") || !Ok(weft_model_load(model_path, &model), "load")) {
    weft_session_options_free(options);
    weft_model_free(model);
    return;
  }
  REFUSED(weft_session_options_set_config(options, bad), WEFT_INVALID_ARGUMENT,
          ".bad.toml:2:", "graph_optimizer.level");
  REFUSED(weft_session_options_set_config(options, "/nonexistent/weft.toml"), WEFT_NOT_FOUND, "/nonexistent/weft.toml");
  REFUSED(weft_session_options_set_config(options, NULL), WEFT_INVALID_ARGUMENT, "must not be NULL");
  if (Ok(weft_session_options_set_config(options, good), "set_config") &&
      Ok(weft_session_create(model, options, &session), "a session from a config")) {
    const int64_t dims[2] = {rows, 4};
    float y2[64 * 3];
    weft_feed_t feed = Feed("x", WEFT_DTYPE_F32, dims, 2, x, (size_t)rows * 4 * sizeof(float));
    weft_fetch_t fetch = Fetch("y", y2, sizeof y2);
    if (Ok(weft_session_run(session, &feed, 1, &fetch, 1), "run with the config")) {
      int close = 1;
      for (int64_t i = 0; i < rows * 3; ++i) close = close && fabsf(y[i] - y2[i]) <= 1e-6f * (fabsf(y[i]) + 1e-6f);
      Check(close, "the config's session (level 0, unfused) gives the fused answers within 1e-6");
    }
    weft_session_free(session);
  }
  weft_model_free(model);
  weft_session_options_free(options);
}

/* A model of a string input: feeding strings is refused, never read. */
static void CheckStringFeed(void) {
  static const char kText[] =
      "( producer = 1, minConsumer = 1, nodes = ["
      " ( name = \"s\", op = \"Placeholder\", inputs = [], device = \"\", attrs = ["
      "   (name = \"dtype\", value = (type = string)),"
      "   (name = \"shape\", value = (shape = (unknownRank = false, dims = [-1]))) ] ),"
      " ( name = \"y\", op = \"Identity\", inputs = [\"s\"], device = \"\", attrs = ["
      "   (name = \"T\", value = (type = string)) ] ) ] )";
  weft_model_t* model = NULL;
  weft_session_t* session = NULL;
  if (!Ok(weft_model_load_memory(kText, sizeof kText - 1, "wgt", &model), "load a string model") ||
      !Ok(weft_session_create(model, NULL, &session), "a session of a string model")) {
    weft_model_free(model);
    return;
  }
  weft_model_free(model);
  const int64_t dims[1] = {2};
  char bytes[96] = {0};
  weft_feed_t feed = Feed("s", WEFT_DTYPE_STRING, dims, 1, bytes + 1, sizeof bytes - 1);
  weft_fetch_t fetch = Fetch("y", NULL, 0);
  REFUSED(weft_session_run(session, &feed, 1, &fetch, 1), WEFT_UNIMPLEMENTED, "input \"s\"", "string", "cannot be fed");
  weft_session_free(session);
}

static void CheckLoadRefusals(const char* model_path) {
  weft_model_t* model = NULL;
  REFUSED(weft_model_load(NULL, &model), WEFT_INVALID_ARGUMENT, "must not be NULL");
  REFUSED(weft_model_load(model_path, NULL), WEFT_INVALID_ARGUMENT, "must not be NULL");
  REFUSED(weft_model_load("/nonexistent/model.onnx", &model), WEFT_NOT_FOUND, "/nonexistent/model.onnx");
  REFUSED(weft_model_load("/nonexistent/model.wg", &model), WEFT_NOT_FOUND, "/nonexistent/model.wg");
  Check(model == NULL, "a failed load leaves out NULL");
  REFUSED(weft_model_load_memory("abc", 3, "pb", &model), WEFT_INVALID_ARGUMENT, "\"pb\"", "\"onnx\"");
  REFUSED(weft_model_load_memory("\x08\x07garbage", 9, "onnx", &model), WEFT_INVALID_ARGUMENT, "<memory>");
  REFUSED(weft_model_load_memory("node {", 6, "wgt", &model), WEFT_INVALID_ARGUMENT, "<memory>");
  REFUSED(weft_model_load_memory(NULL, 0, "onnx", &model), WEFT_INVALID_ARGUMENT, "must not be NULL");
  weft_session_t* session = NULL;
  REFUSED(weft_session_create(NULL, NULL, &session), WEFT_INVALID_ARGUMENT, "must not be NULL");
  weft_session_options_t* options = NULL;
  if (Ok(weft_session_options_create(&options), "options_create")) {
    REFUSED(weft_session_options_set_threads(options, -1, 0), WEFT_INVALID_ARGUMENT, "intra_op -1");
    REFUSED(weft_session_options_set_optimizer_level(options, 9), WEFT_INVALID_ARGUMENT, "level 9", "0 to 3");
    REFUSED(weft_session_options_set_plugin_path(options, NULL), WEFT_INVALID_ARGUMENT, "must not be NULL");
    REFUSED(weft_session_options_set_device(options, ""), WEFT_INVALID_ARGUMENT, "device type is empty");
    REFUSED(weft_session_options_set_device(options, NULL), WEFT_INVALID_ARGUMENT, "must not be NULL");
    weft_model_t* probe = NULL;
    if (Ok(weft_session_options_set_device(options, "TPU"), "set_device TPU") &&
        Ok(weft_model_load(model_path, &probe), "model_load")) {
      REFUSED(weft_session_create(probe, options, &session), WEFT_NOT_FOUND, "device type \"TPU\"",
              "no loaded plugin has it", "CPU");
      Check(session == NULL, "a refused session leaves out NULL");
    }
    weft_model_free(probe);
    weft_session_options_free(options);
  }
  REFUSED(weft_session_options_set_threads(NULL, 1, 1), WEFT_INVALID_ARGUMENT, "options is NULL");
  REFUSED(weft_session_options_create(NULL), WEFT_INVALID_ARGUMENT, "out is NULL");
  Check(weft_error_code(NULL) == WEFT_OK && strcmp(weft_error_message(NULL), "") == 0, "no error is OK and \"\"");
  weft_model_free(NULL);
  weft_session_free(NULL);
  weft_array_free(NULL);
  weft_error_free(NULL);
}

/* Runs |session| on |x| (rows x 4) into |y|; 1 when it ran. */
static int RunInto(weft_session_t* session, const float* x, int64_t rows, float* y, const char* what) {
  const int64_t dims[2] = {rows, 4};
  weft_feed_t feed = Feed("x", WEFT_DTYPE_F32, dims, 2, x, (size_t)rows * 4 * sizeof(float));
  weft_fetch_t fetch = Fetch("y", y, (size_t)rows * 3 * sizeof(float));
  if (!Ok(weft_session_run(session, &feed, 1, &fetch, 1), what)) return 0;
  Check(fetch.dtype == WEFT_DTYPE_F32 && fetch.rank == 2 && fetch.dims[0] == rows && fetch.dims[1] == 3 &&
            fetch.byte_size == (size_t)rows * 3 * sizeof(float) && fetch.array == NULL,
        "the fetch says f32 [rows, 3] and the bytes written");
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: capi_test MODEL.onnx X.bin ROWS Y.bin [EXTERNAL.onnx]\n");
    return 2;
  }
  if (argc == 6) {
    weft_model_t* external = NULL;
    if (Ok(weft_model_load(argv[5], &external), "load a model with external data from its file")) {
      weft_model_free(external);
    }
    size_t size = 0;
    char* bytes = ReadAll(argv[5], &size);
    REFUSED(weft_model_load_memory(bytes, size, "onnx", &external), WEFT_INVALID_ARGUMENT, "<memory>", "external file",
            "load the .onnx file from its folder");
    free(bytes);
  }
  const int64_t rows = atoll(argv[3]);
  size_t x_size = 0;
  float* x = (float*)ReadAll(argv[2], &x_size);
  if (x == NULL || rows < 1 || rows > 64 || x_size != (size_t)rows * 4 * sizeof(float)) {
    fprintf(stderr, "capi_test: %s must hold %s x 4 float32 values (1 to 64 rows)\n", argv[2], argv[3]);
    return 2;
  }
  Check(weft_inference_api_version() == WEFT_INFERENCE_API_VERSION, "the library's version is the header's");
  CheckLoadRefusals(argv[1]);
  CheckStringFeed();

  weft_model_t* model = NULL;
  weft_session_options_t* options = NULL;
  weft_session_t* session = NULL;
  if (!Ok(weft_model_load(argv[1], &model), "model_load") || !Ok(weft_session_options_create(&options), "options") ||
      !Ok(weft_session_options_set_threads(options, 1, 1), "threads") ||
      !Ok(weft_session_options_set_device(options, "/device:cpu"), "set_device CPU") ||
      !Ok(weft_session_create(model, options, &session), "session_create")) {
    printf("%d checks, %d failed\n", g_checks, g_failures);
    return 1;
  }
  weft_model_free(model); /* the session keeps what it needs */
  CheckInfo(session);

  float y[64 * 3];
  if (RunInto(session, x, rows, y, "run")) {
    FILE* out = fopen(argv[4], "wb");
    if (out != NULL) {
      fwrite(y, sizeof(float), (size_t)rows * 3, out);
      fclose(out);
    }
    /* The same values fed from an address that is not 64-byte aligned
     * (copied), and fetched into a library-allocated array. */
    char* raw = malloc((size_t)rows * 4 * sizeof(float) + 68);
    float* unaligned = (float*)(raw + 4 + (64 - ((uintptr_t)raw % 64)) % 64);
    memcpy(unaligned, x, (size_t)rows * 4 * sizeof(float));
    float y2[64 * 3];
    if (RunInto(session, unaligned, rows, y2, "run unaligned")) {
      Check(memcmp(y, y2, (size_t)rows * 3 * sizeof(float)) == 0, "an unaligned feed gives the same bits");
    }
    free(raw);
    const int64_t dims[2] = {rows, 4};
    weft_feed_t feed = Feed("x", WEFT_DTYPE_F32, dims, 2, x, (size_t)rows * 4 * sizeof(float));
    weft_fetch_t fetch = Fetch("y", NULL, 0);
    if (Ok(weft_session_run(session, &feed, 1, &fetch, 1), "run into an array")) {
      Check(fetch.array != NULL && weft_array_byte_size(fetch.array) == (size_t)rows * 3 * sizeof(float) &&
                memcmp(weft_array_data(fetch.array), y, (size_t)rows * 3 * sizeof(float)) == 0 &&
                (uintptr_t)weft_array_data(fetch.array) % 64 == 0,
            "the library's array holds the same bits, 64-byte aligned");
      weft_array_free(fetch.array);
    }
    /* From memory. */
    size_t size = 0;
    char* bytes = ReadAll(argv[1], &size);
    weft_model_t* from_memory = NULL;
    weft_session_t* second = NULL;
    if (bytes != NULL && Ok(weft_model_load_memory(bytes, size, "onnx", &from_memory), "load_memory")) {
      free(bytes);
      bytes = NULL;
      if (Ok(weft_session_create(from_memory, options, &second), "session from memory")) {
        float y3[64 * 3];
        if (RunInto(second, x, rows, y3, "run from memory")) {
          Check(memcmp(y, y3, (size_t)rows * 3 * sizeof(float)) == 0, "a model from memory gives the same bits");
        }
        weft_session_free(second);
      }
      weft_model_free(from_memory);
    }
    free(bytes);
  }
  CheckConfig(argv[1], argv[4], x, rows, y);
  CheckRefusals(session, x, rows);
  weft_session_free(session);
  weft_session_options_free(options);
  free(x);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
