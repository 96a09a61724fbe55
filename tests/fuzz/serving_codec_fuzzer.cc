// libFuzzer target: the model server's request codecs (core/serving/
// codec.h). The first byte picks the protocol and one of three signatures;
// the rest is the body (for KServe v2, the second byte also gives the
// share of it that is JSON, as the Inference-Header-Content-Length header
// would). A request that parses is answered with its own inputs as outputs,
// which runs the writers over whatever the parser accepted.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/serving/codec.h"

namespace {

using weft::DType;
using weft::Shape;
using weft::serving::Signature;
using weft::serving::TensorSpec;

Signature Make(std::vector<TensorSpec> inputs, bool batched) {
  Signature sig;
  sig.inputs = inputs;
  sig.outputs = std::move(inputs);
  sig.batched = batched;
  return sig;
}

const Signature& SignatureFor(uint8_t which) {
  static const Signature kSignatures[] = {
      Make({{"x", "x", DType::kF32, Shape{-1, 4}}}, true),
      Make({{"a", "a", DType::kI64, Shape{-1}},
            {"b", "b", DType::kBool, Shape{-1, 2}},
            {"c", "c", DType::kF16, Shape{-1, 2, 2}}},
           true),
      Make({{"img", "img", DType::kU8, Shape{2, -1}}, {"s", "s", DType::kF64, Shape{}}}, false),
  };
  return kSignatures[which % 3];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Signature& sig = SignatureFor(data[0] >> 1);
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  if ((data[0] & 1) == 0) {
    auto request = weft::serving::ParseTfPredict(body, sig);
    if (!request.ok()) return 0;
    std::vector<weft::Tensor> outputs;
    for (const auto& in : request->inputs) outputs.push_back(in.value);
    (void)weft::serving::WriteTfPredict(*request, sig, outputs);
    return 0;
  }
  const std::size_t json_length = data[1] == 255 ? body.size() : body.size() * data[1] / 255;
  auto request = weft::serving::ParseV2Infer(body, json_length, sig);
  if (!request.ok()) return 0;
  std::vector<weft::Tensor> outputs;
  for (const auto& in : request->inputs) outputs.push_back(in.value);
  (void)weft::serving::WriteV2Infer("m", "1", *request, sig, outputs);
  return 0;
}
