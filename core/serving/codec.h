// The model server's protocol codecs (docs/serving.md): JSON request bodies
// of TensorFlow Serving's REST API and of KServe's v2 inference protocol
// (with its binary tensor extension) into an InferRequest validated against
// a model version's Signature, and answers, errors and metadata back to
// JSON.
//
//   WEFT_ASSIGN_OR_RETURN(InferRequest request, ParseTfPredict(body, signature));
//   std::vector<Tensor> outputs = ...;  // one per signature output
//   std::string answer = WriteTfPredict(request, signature, outputs);
//
// Parsing uses simdjson (its DOM, one parser per thread, kept between
// requests so that a steady stream of requests allocates no parser memory)
// and writes each number straight into the input tensor's buffer. Every
// function here is thread-safe.
//
// What a request may hold, beyond the signature's inputs:
//  - a nested list is at most kMaxRank (8) lists deep, counting the row
//    list of "instances";
//  - a tensor has no more elements than the JSON text has bytes (every
//    element takes at least one), so a declared shape of [1e12] or ragged
//    rows are refused before anything is allocated;
//  - numbers convert to the input's dtype: floating dtypes take any number
//    (one that overflows the dtype is refused), integer dtypes take integers
//    in range (and a floating number with an integral value, such as 2.0),
//    BOOL takes true and false (and 0 and 1 in KServe v2); f16 and bf16 are
//    rounded once from the JSON number;
//  - string inputs are refused: Weft serves no string models.
// Every refusal is INVALID_ARGUMENT (HTTP 400) with a message that names the
// input and, where it helps, the signature.
//
// Writing: numbers in their shortest round-trip form (std::to_chars);
// NaN and the infinities, which JSON cannot represent, are written as null
// (as core/base/json.h does); strings are escaped with invalid UTF-8 bytes
// replaced by U+FFFD.
#ifndef WEFT_CORE_SERVING_CODEC_H_
#define WEFT_CORE_SERVING_CODEC_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/serving/request.h"
#include "core/tensor/dtype.h"
#include "core/tensor/tensor.h"

namespace weft::serving {

// A TensorFlow Serving REST :predict body: {"signature_name"?, "instances":
// [...]} (row format: one entry per row of a batched signature; an entry is
// the single input's row value, or an object {NAME: row value}) or
// {"inputs": ...} (columnar: the single input's value, or an object {NAME:
// value}; values include the batch dimension). "signature_name" must be
// |sig|'s name. Base64 {"b64": ...} values are refused.
Expected<InferRequest> ParseTfPredict(std::string_view body, const Signature& sig);

// The answer to a :predict request: {"predictions": [row, ...]} for a row
// request (each row the single output's row, or an object {NAME: row} for
// several outputs), else {"outputs": value} or {"outputs": {NAME: value}}.
// |outputs| holds one host-visible tensor per signature output, in
// signature order; when the signature is batched, dimension 0 of each is the
// request's rows.
std::string WriteTfPredict(const InferRequest& request, const Signature& sig, const std::vector<Tensor>& outputs);

// A KServe v2 /infer body. |json_length| is the Inference-Header-Content-Length
// header's value, or body.size() when the header is absent; the bytes after
// it are the inputs' binary data, in the order of the inputs that have a
// "binary_data_size" parameter, and must add up exactly. The request's
// "outputs" (which outputs, in which order, and which as binary data) and
// "id" are recorded in the InferRequest for WriteV2Infer.
Expected<InferRequest> ParseV2Infer(std::string_view body, std::size_t json_length, const Signature& sig);

// A v2 answer: the JSON part first (|json_length| bytes), then, when
// |binary|, the binary outputs' bytes (the caller sends the
// Inference-Header-Content-Length header then).
struct V2Answer {
  std::string body;
  std::size_t json_length = 0;
  bool binary = false;
};

// The answer to a v2 /infer request: {"model_name", "model_version", "id"
// (when the request had one), "outputs": [{"name", "datatype", "shape",
// "data": [flat row-major values]} or, for a binary output, "parameters":
// {"binary_data_size": N} instead of "data"]}. |outputs| as for
// WriteTfPredict; the request's "outputs" select and order them.
V2Answer WriteV2Infer(std::string_view model, std::string_view version, const InferRequest& request,
                      const Signature& sig, const std::vector<Tensor>& outputs);

// {"error": |message|}.
std::string WriteError(std::string_view message);

// KServe v2 model metadata: {"name", "versions": [...], "platform": "weft",
// "inputs": [{"name", "datatype", "shape": [-1, 4]}], "outputs": [...]}.
// A shape of unknown rank is written as [-1] (KServe has no way to say it).
std::string WriteV2Metadata(std::string_view model, const std::vector<std::string>& versions, const Signature& sig);

// TensorFlow Serving's GetModelMetadata JSON for |sig| (as
// "signature_def"), the way TF Serving's REST API writes it: dimension sizes
// as strings, dtypes as "DT_FLOAT".
std::string WriteTfMetadata(std::string_view model, std::string_view version, const Signature& sig);

// KServe v2's name of |dtype|: FP32 FP64 INT8 INT16 INT32 INT64 UINT8 BOOL
// FP16 BF16, BYTES for strings; "INVALID" for the rest.
std::string_view V2DataType(DType dtype);

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_CODEC_H_
