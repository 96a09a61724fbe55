// The model server's data model (docs/serving.md): a model version's
// signature (named, typed inputs and outputs with a leading batch
// dimension), and a prediction request and its answer as the protocol
// codecs (codec.h) and the batcher (batcher.h) pass them between them.
#ifndef WEFT_CORE_SERVING_REQUEST_H_
#define WEFT_CORE_SERVING_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

namespace weft::serving {

// One input or output of a signature.
struct TensorSpec {
  std::string name;    // what clients call it (the JSON key, KServe's "name")
  std::string tensor;  // the graph tensor it feeds or fetches ("x", "logits:0")
  DType dtype = DType::kF32;
  // Partial: -1 where any size is accepted. When the signature is batched,
  // dimension 0 is the batch (-1).
  Shape shape;
};

struct Signature {
  std::string name = "serving_default";
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // Every input and output has a leading batch dimension of unknown size:
  // requests may be concatenated along dimension 0 and their answers split.
  bool batched = false;
};

struct NamedTensor {
  std::string name;  // a TensorSpec::name
  Tensor value;
};

// A parsed :predict or /infer request, validated against the signature:
// |inputs| holds every input of the signature once, in signature order,
// with its dtype and a shape that fits the spec.
struct InferRequest {
  std::vector<NamedTensor> inputs;
  // TensorFlow Serving: the request used "instances" (row format); the
  // answer then uses "predictions", else "outputs".
  bool row_format = false;
  // KServe v2: the request's "id", echoed in the answer.
  std::string id;
  // KServe v2: the outputs asked for by name (empty: all, in signature
  // order), and whether each answers as binary data.
  std::vector<std::string> requested_outputs;
  std::vector<bool> binary_outputs;
  // KServe v2: binary for every output ("binary_data_output": true).
  bool all_binary = false;
  // The number of rows (dimension 0 of the inputs) when batched, else 1.
  int64_t batch_size = 1;
};

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_REQUEST_H_
