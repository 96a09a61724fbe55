/* weft_classify: runs a model on rows of float32 values with Weft's C
 * inference API, and prints the index of each row's largest output
 * (docs/embedding.md).
 *
 *   weft_classify MODEL INPUT.f32 [OUTPUT.f32]
 *
 * INPUT.f32 holds raw float32 rows for the model's first input, whose
 * first dimension is the batch; OUTPUT.f32 receives the first output. */
#include <stdio.h>
#include <stdlib.h>

#include "weft/weft_inference.h"

static int Fail(weft_error_t* error) {
  fprintf(stderr, "weft_classify: %s\n", weft_error_message(error));
  weft_error_free(error);
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: weft_classify MODEL INPUT.f32 [OUTPUT.f32]\n");
    return 2;
  }
  weft_model_t* model = NULL;
  weft_session_t* session = NULL;
  weft_error_t* error = weft_model_load(argv[1], &model);
  if (error == NULL) error = weft_session_create(model, NULL, &session);
  weft_model_free(model);
  if (error != NULL) return Fail(error);

  /* The first input: how many floats one row takes. */
  weft_tensor_info_t input, output;
  if ((error = weft_session_input_info(session, 0, &input)) != NULL) return Fail(error);
  if ((error = weft_session_output_info(session, 0, &output)) != NULL) return Fail(error);
  long row = 1;
  for (int i = 1; i < input.rank; ++i) row = input.dims[i] > 0 ? row * input.dims[i] : -1;
  if (input.rank < 1 || row <= 0 || input.dtype != WEFT_DTYPE_F32 || output.dtype != WEFT_DTYPE_F32) {
    fprintf(stderr,
            "weft_classify: the model's first input must be float32 [batch, known sizes...] and its first "
            "output float32\n");
    return 1;
  }

  FILE* in = fopen(argv[2], "rb");
  if (in == NULL) {
    perror(argv[2]);
    return 1;
  }
  float* data = NULL;
  size_t count = 0, read = 0;
  do {
    float* more = realloc(data, (count + 4096) * sizeof(float));
    if (more == NULL) {
      fprintf(stderr, "weft_classify: out of memory\n");
      return 1;
    }
    data = more;
    read = fread(data + count, sizeof(float), 4096, in);
    count += read;
  } while (read == 4096);
  fclose(in);
  if (count == 0 || count % (size_t)row != 0) {
    fprintf(stderr, "weft_classify: %s holds %zu floats, not rows of %ld\n", argv[2], count, row);
    return 1;
  }

  int64_t dims[WEFT_MAX_RANK];
  dims[0] = (int64_t)(count / (size_t)row);
  for (int i = 1; i < input.rank; ++i) dims[i] = input.dims[i];
  weft_feed_t feed = {input.name, WEFT_DTYPE_F32, input.rank, dims, data, count * sizeof(float)};
  weft_fetch_t fetch = {0};
  fetch.name = output.name; /* data = NULL: the library allocates the output */
  if ((error = weft_session_run(session, &feed, 1, &fetch, 1)) != NULL) return Fail(error);

  const float* y = weft_array_data(fetch.array);
  const int64_t classes = fetch.rank == 2 ? fetch.dims[1] : 1;
  for (int64_t r = 0; r < fetch.dims[0]; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c) best = y[r * classes + c] > y[r * classes + best] ? c : best;
    printf("%lld%c", (long long)best, r + 1 == fetch.dims[0] ? '\n' : ' ');
  }
  if (argc > 3) {
    FILE* out = fopen(argv[3], "wb");
    if (out == NULL || fwrite(y, 1, fetch.byte_size, out) != fetch.byte_size) perror(argv[3]);
    if (out != NULL) fclose(out);
  }
  weft_array_free(fetch.array);
  weft_session_free(session);
  free(data);
  return 0;
}
