/* The C inference API as the lite build provides it (docs/lite.md): what
 * it refuses, each with its message, and a run of a .wg model on the
 * caller's buffers, written to a file for lite_test.py to compare.
 * Usage: weft_lite_capi_test MODEL.wg INPUT.f32 ROWS COLS OUT.f32 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/weft_inference.h"

static int failures = 0;

/* |error| must be set, with |code| and a message containing |part|. */
static void ExpectError(const char* what, weft_error_t* error, int32_t code, const char* part) {
  if (error == NULL) {
    printf("FAIL %s: no error\n", what);
    ++failures;
    return;
  }
  const char* message = weft_error_message(error);
  if (weft_error_code(error) != code || strstr(message, part) == NULL) {
    printf("FAIL %s: code %d, message: %s\n", what, (int)weft_error_code(error), message);
    ++failures;
  } else {
    printf("ok   %s: %s\n", what, message);
  }
  weft_error_free(error);
}

static void Check(const char* what, weft_error_t* error) {
  if (error != NULL) {
    printf("FAIL %s: %s\n", what, weft_error_message(error));
    weft_error_free(error);
    exit(1);
  }
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s MODEL.wg INPUT.f32 ROWS COLS OUT.f32\n", argv[0]);
    return 2;
  }
  weft_session_options_t* options = NULL;
  Check("options", weft_session_options_create(&options));
  ExpectError("set_config", weft_session_options_set_config(options, "configs/local.toml"), WEFT_UNIMPLEMENTED,
              "reads no TOML");
  ExpectError("set_plugin_path", weft_session_options_set_plugin_path(options, "/usr/lib"), WEFT_UNIMPLEMENTED,
              "loads no plugins");
  ExpectError("set_optimizer_level", weft_session_options_set_optimizer_level(options, 2), WEFT_INVALID_ARGUMENT,
              "has no graph optimizer");
  Check("set_optimizer_level 0", weft_session_options_set_optimizer_level(options, 0));
  Check("set_threads", weft_session_options_set_threads(options, 2, 1));

  weft_model_t* model = NULL;
  ExpectError("load .onnx", weft_model_load("model.onnx", &model), WEFT_UNIMPLEMENTED, "reads .wg graphs only");
  ExpectError("load .wgt", weft_model_load("model.wgt", &model), WEFT_UNIMPLEMENTED, "weft optimize");
  ExpectError("load_memory onnx", weft_model_load_memory("x", 1, "onnx", &model), WEFT_UNIMPLEMENTED,
              "reads .wg graphs only");
  ExpectError("load missing", weft_model_load("no-such-model.wg", &model), WEFT_NOT_FOUND, "no-such-model.wg");

  Check("load", weft_model_load(argv[1], &model));
  weft_session_t* session = NULL;
  Check("session", weft_session_create(model, options, &session));

  const long rows = atol(argv[3]), cols = atol(argv[4]);
  const size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
  float* input = malloc(bytes);
  FILE* in = fopen(argv[2], "rb");
  if (input == NULL || in == NULL || fread(input, 1, bytes, in) != bytes) {
    fprintf(stderr, "cannot read %s\n", argv[2]);
    return 1;
  }
  fclose(in);
  weft_tensor_info_t input_info, output_info;
  Check("input_info", weft_session_input_info(session, 0, &input_info));
  Check("output_info", weft_session_output_info(session, 0, &output_info));
  const int64_t dims[2] = {rows, cols};
  weft_feed_t feed = {input_info.name, WEFT_DTYPE_F32, 2, dims, input, bytes};
  weft_fetch_t fetch;
  memset(&fetch, 0, sizeof(fetch));
  fetch.name = output_info.name;
  Check("run", weft_session_run(session, &feed, 1, &fetch, 1));
  FILE* out = fopen(argv[5], "wb");
  fwrite(weft_array_data(fetch.array), 1, weft_array_byte_size(fetch.array), out);
  fclose(out);
  printf("ok   run: %s -> %s, %zu bytes\n", input_info.name, output_info.name, weft_array_byte_size(fetch.array));

  weft_array_free(fetch.array);
  free(input);
  weft_session_free(session);
  weft_model_free(model);
  weft_session_options_free(options);
  return failures == 0 ? 0 : 1;
}
