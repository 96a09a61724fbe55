// The model server's protocol codecs (core/serving/codec.h): TensorFlow
// Serving's REST bodies and KServe v2's (JSON and binary), what they parse
// into and write, and every refusal with its message. Expected values are
// written out by hand (IEEE bit patterns from the binary32/binary16
// formats, JSON text as TF Serving's and KServe's docs show it).
#include "core/serving/codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace weft::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TensorSpec Spec(std::string name, DType dtype, Shape shape) {
  return TensorSpec{name, name + ":0", dtype, std::move(shape)};
}

// x FP32 [-1,3] -> y FP32 [-1,2].
Signature OneInOneOut() {
  Signature sig;
  sig.inputs = {Spec("x", DType::kF32, Shape{-1, 3})};
  sig.outputs = {Spec("y", DType::kF32, Shape{-1, 2})};
  sig.batched = true;
  return sig;
}

// a FP32 [-1,2], b INT64 [-1] -> p FP32 [-1], q INT32 [-1,2].
Signature TwoInTwoOut() {
  Signature sig;
  sig.inputs = {Spec("a", DType::kF32, Shape{-1, 2}), Spec("b", DType::kI64, Shape{-1})};
  sig.outputs = {Spec("p", DType::kF32, Shape{-1}), Spec("q", DType::kI32, Shape{-1, 2})};
  sig.batched = true;
  return sig;
}

// One batched [-1] input of |dtype| called "v".
Signature Vector(DType dtype) {
  Signature sig;
  sig.inputs = {Spec("v", dtype, Shape{-1})};
  sig.outputs = {Spec("out", dtype, Shape{-1})};
  sig.batched = true;
  return sig;
}

template <class T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::string Message(std::string_view body, const Signature& sig) {
  Expected<InferRequest> request = ParseTfPredict(body, sig);
  EXPECT_FALSE(request.ok()) << body;
  EXPECT_EQ(request.status().code(), Code::kInvalidArgument);
  return request.status().message();
}

std::string V2Message(std::string_view body, const Signature& sig, std::size_t json_length = std::string::npos) {
  Expected<InferRequest> request =
      ParseV2Infer(body, json_length == std::string::npos ? body.size() : json_length, sig);
  EXPECT_FALSE(request.ok()) << body;
  EXPECT_EQ(request.status().code(), Code::kInvalidArgument);
  return request.status().message();
}

template <class T>
std::string Raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// ---- TensorFlow Serving: parsing ----

TEST(TfPredict, RowsOfOneInputStackAlongANewDimension) {
  Expected<InferRequest> r = ParseTfPredict(R"({"instances": [[1, 2, 3], [4.5, 5, -6]]})", OneInOneOut());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->row_format);
  EXPECT_EQ(r->batch_size, 2);
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].name, "x");
  EXPECT_EQ(r->inputs[0].value.shape(), (Shape{2, 3}));
  EXPECT_THAT(Values<float>(r->inputs[0].value), ElementsAre(1, 2, 3, 4.5f, 5, -6));
}

TEST(TfPredict, ScalarRowsAndNamedRowsOfOneInput) {
  Expected<InferRequest> r = ParseTfPredict(R"({"instances": [7, 8, 9]})", Vector(DType::kI32));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->inputs[0].value.shape(), (Shape{3}));
  EXPECT_THAT(Values<int32_t>(r->inputs[0].value), ElementsAre(7, 8, 9));
  r = ParseTfPredict(R"({"signature_name": "serving_default", "instances": [{"x": [1, 2, 3]}]})", OneInOneOut());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<float>(r->inputs[0].value), ElementsAre(1, 2, 3));
}

TEST(TfPredict, RowsOfSeveralInputsAreObjects) {
  Expected<InferRequest> r =
      ParseTfPredict(R"({"instances": [{"b": 5, "a": [1, 2]}, {"a": [3, 4], "b": -6}]})", TwoInTwoOut());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch_size, 2);
  ASSERT_EQ(r->inputs.size(), 2u);
  EXPECT_EQ(r->inputs[0].name, "a");  // signature order, not the request's
  EXPECT_EQ(r->inputs[0].value.shape(), (Shape{2, 2}));
  EXPECT_THAT(Values<float>(r->inputs[0].value), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(r->inputs[1].value.dtype(), DType::kI64);
  EXPECT_THAT(Values<int64_t>(r->inputs[1].value), ElementsAre(5, -6));
}

TEST(TfPredict, ColumnarInputs) {
  Expected<InferRequest> r = ParseTfPredict(R"({"inputs": [[1, 2, 3]]})", OneInOneOut());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->row_format);
  EXPECT_EQ(r->batch_size, 1);
  EXPECT_EQ(r->inputs[0].value.shape(), (Shape{1, 3}));
  r = ParseTfPredict(R"({"inputs": {"x": [[1, 2, 3], [4, 5, 6]]}})", OneInOneOut());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch_size, 2);
  r = ParseTfPredict(R"({"inputs": {"a": [[1, 2]], "b": [9007199254740993]}})", TwoInTwoOut());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<int64_t>(r->inputs[1].value), ElementsAre(9007199254740993));  // 2^53 + 1, exact
}

TEST(TfPredict, NonBatchedSignatureTakesColumnsOnly) {
  Signature sig;
  sig.inputs = {Spec("x", DType::kF64, Shape{2, 2})};
  sig.outputs = {Spec("y", DType::kF64, Shape{})};
  Expected<InferRequest> r = ParseTfPredict(R"({"inputs": [[1, 2], [3, 4]]})", sig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch_size, 1);
  EXPECT_THAT(Values<double>(r->inputs[0].value), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Message(R"({"instances": [[1, 2], [3, 4]]})", sig), HasSubstr("send {\"inputs\": ...}"));
}

TEST(TfPredict, RefusesWhatTheBodyShapeGetsWrong) {
  const Signature sig = OneInOneOut();
  EXPECT_THAT(Message(R"({"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]})", sig), HasSubstr("send one"));
  EXPECT_THAT(Message(R"({"instance": [[1, 2, 3]]})", sig),
              HasSubstr("neither \"instances\" (rows) nor \"inputs\" (columns) (the body has \"instance\")"));
  EXPECT_THAT(Message(R"([1, 2])", sig), HasSubstr("must be a JSON object"));
  EXPECT_THAT(Message(R"({"instances": []})", sig), HasSubstr("\"instances\" is empty"));
  EXPECT_THAT(Message(R"({"instances": {"x": 1}})", sig), HasSubstr("\"instances\" must be a list"));
  EXPECT_THAT(Message(R"({"signature_name": "predict", "instances": [[1, 2, 3]]})", sig),
              HasSubstr("unknown signature_name \"predict\": this model's signature is \"serving_default\""));
  EXPECT_THAT(Message(R"({"instances": [[1, 2, 3]],)", sig), HasSubstr("malformed JSON: "));
}

TEST(TfPredict, NamesMissingAndUnknownInputs) {
  const Signature sig = TwoInTwoOut();
  EXPECT_THAT(Message(R"({"inputs": {"a": [[1, 2]]}})", sig),
              HasSubstr("missing input \"b\" (the signature's inputs: a FP32 [-1,2], b INT64 [-1])"));
  EXPECT_THAT(
      Message(R"({"inputs": {"a": [[1, 2]], "bb": [1]}})", sig),
      HasSubstr("unknown input \"bb\"; did you mean \"b\"? (the signature's inputs: a FP32 [-1,2], b INT64 [-1])"));
  EXPECT_THAT(Message(R"({"instances": [{"a": [1, 2], "b": 1}, {"a": [1, 2]}]})", sig),
              HasSubstr("instances[1]: missing input \"b\""));
  EXPECT_THAT(Message(R"({"instances": [{"a": [1, 2], "b": 1, "zzz": 2}]})", sig),
              HasSubstr("instances[0]: unknown input \"zzz\" (the signature's inputs"));
  EXPECT_THAT(Message(R"({"inputs": {"a": [[1, 2]], "a": [[1, 2]], "b": [1]}})", sig),
              HasSubstr("input \"a\" is given twice"));
  EXPECT_THAT(Message(R"({"instances": [[1, 2]]})", sig), HasSubstr("every instance is an object {NAME: value}"));
}

TEST(TfPredict, ChecksShapesAgainstTheSignature) {
  EXPECT_THAT(Message(R"({"instances": [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]})", OneInOneOut()),
              HasSubstr("input \"x\": shape [2,5] does not fit the signature's [-1,3]"));
  EXPECT_THAT(Message(R"({"inputs": [1, 2, 3]})", OneInOneOut()),
              HasSubstr("input \"x\": shape [3] does not fit the signature's [-1,3]"));
  EXPECT_THAT(Message(R"({"inputs": {"a": [[1, 2], [3, 4]], "b": [1, 2, 3]}})", TwoInTwoOut()),
              HasSubstr("inputs \"a\" and \"b\" disagree on dimension 0 (the batch): 2 and 3 rows"));
  EXPECT_THAT(Message(R"({"inputs": []})", Vector(DType::kF32)), HasSubstr("input \"v\": no rows"));
}

TEST(TfPredict, RefusesRaggedLists) {
  Signature sig;
  sig.inputs = {Spec("m", DType::kF32, Shape{-1, -1})};
  sig.outputs = {Spec("y", DType::kF32, Shape{-1})};
  sig.batched = true;
  Signature sig3 = sig;
  sig3.inputs = {Spec("m3", DType::kF32, Shape{-1, -1, -1})};
  EXPECT_THAT(Message(R"({"instances": [[1, 2], [3, 4, 5]]})", sig),
              HasSubstr("input \"m\": instances[1] has 3 values, expected 2 like instances[0] (ragged rows)"));
  EXPECT_THAT(Message(R"({"instances": [[[1], [2]], [[3], [4, 5]]]})", sig3),
              HasSubstr("input \"m3\": the value at instances[1][1] has 2 values, expected 1"));
  EXPECT_THAT(Message(R"({"inputs": [[1, 2], 3]})", sig),
              HasSubstr("input \"m\": the value at [1] is 3, expected a list of 2"));
  EXPECT_THAT(Message(R"({"inputs": [[1, 2], [3, [4]]]})", sig),
              HasSubstr("input \"m\": the value at [1][1] is a list, expected a number"));
  // Ragged rows whose first is long: refused before allocating 10 x 300.
  std::string body = R"({"instances": [[)";
  for (int i = 0; i < 300; ++i) body += (i ? ",1" : "1");
  body += "]" + std::string(9 * 3, ' ');
  for (int i = 0; i < 9; ++i) body += ",[]";
  body += "]}";
  EXPECT_THAT(Message(body, sig), HasSubstr("instances[1] has 0 values, expected 300"));
  // Deeper: the cap on elements (a byte of JSON each) refuses it.
  body = R"({"instances": [[[)";
  for (int i = 0; i < 40; ++i) body += (i ? ",1" : "1");
  body += "]], [[]], [[]], [[]], [[]], [[]], [[]]]}";
  EXPECT_THAT(Message(body, sig3), HasSubstr("input \"m3\": shape [7,1,40] has 280 elements, more than the request's"));
}

TEST(TfPredict, LimitsNesting) {
  Signature sig;
  sig.inputs = {Spec("deep", DType::kF32, Shape::UnknownRank())};
  sig.outputs = {Spec("y", DType::kF32, Shape::UnknownRank())};
  EXPECT_TRUE(ParseTfPredict(R"({"inputs": [[[[[[[[1]]]]]]]]})", sig).ok());  // 8 deep
  EXPECT_THAT(Message(R"({"inputs": [[[[[[[[[1]]]]]]]]]})", sig),
              HasSubstr("input \"deep\": lists nested more than 8 deep (a tensor has at most 8 dimensions)"));
  const std::string very_deep = "{\"inputs\": " + std::string(5000, '[') + std::string(5000, ']') + "}";
  EXPECT_THAT(Message(very_deep, sig), HasSubstr("malformed JSON"));
}

TEST(TfPredict, ConvertsNumbersToTheInputsDtype) {
  EXPECT_THAT(Message(R"({"instances": [1, 300]})", Vector(DType::kU8)),
              HasSubstr("input \"v\": element 1 (at instances[1]): 300 is out of range for UINT8"));
  EXPECT_THAT(Message(R"({"instances": [-1]})", Vector(DType::kU8)), HasSubstr("-1 is out of range for UINT8"));
  EXPECT_THAT(Message(R"({"instances": [1, 2, 1.5]})", Vector(DType::kI32)),
              HasSubstr("input \"v\": element 2 (at instances[2]): expected an integer for INT32, got 1.5"));
  EXPECT_THAT(Message(R"({"instances": [2147483648]})", Vector(DType::kI32)),
              HasSubstr("2147483648 is out of range for INT32"));
  EXPECT_THAT(Message(R"({"instances": [18446744073709551615]})", Vector(DType::kI64)),
              HasSubstr("18446744073709551615 is out of range for INT64"));
  EXPECT_THAT(Message(R"({"instances": ["1"]})", Vector(DType::kF32)),
              HasSubstr("expected a number for FP32, got \"1\""));
  EXPECT_THAT(Message(R"({"instances": [null]})", Vector(DType::kF32)), HasSubstr("got null"));
  EXPECT_THAT(Message(R"({"instances": [1e39]})", Vector(DType::kF32)), HasSubstr("is out of range for FP32"));
  EXPECT_THAT(Message(R"({"instances": [1]})", Vector(DType::kBool)),
              HasSubstr("expected true or false for BOOL, got 1"));
  Expected<InferRequest> r = ParseTfPredict(R"({"instances": [2.0, -1e3]})", Vector(DType::kI16));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<int16_t>(r->inputs[0].value), ElementsAre(2, -1000));
  r = ParseTfPredict(R"({"instances": [true, false]})", Vector(DType::kBool));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<bool>(r->inputs[0].value), ElementsAre(true, false));
}

TEST(TfPredict, HalfPrecisionInputsRoundOnce) {
  // binary16: 1.5 = 0x3e00, 65504 (the largest) = 0x7bff, -2 = 0xc000.
  Expected<InferRequest> r = ParseTfPredict(R"({"instances": [1.5, 65504, -2]})", Vector(DType::kF16));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<uint16_t>(r->inputs[0].value), ElementsAre(0x3e00, 0x7bff, 0xc000));
  EXPECT_THAT(Message(R"({"instances": [70000]})", Vector(DType::kF16)), HasSubstr("70000 is out of range for FP16"));
  // bfloat16: 1 = 0x3f80, -0.5 = 0xbf00.
  r = ParseTfPredict(R"({"instances": [1, -0.5]})", Vector(DType::kBF16));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<uint16_t>(r->inputs[0].value), ElementsAre(0x3f80, 0xbf00));
}

TEST(TfPredict, RefusesBase64AndStringInputs) {
  EXPECT_THAT(Message(R"({"instances": [{"b64": "aGVsbG8="}]})", Vector(DType::kF32)),
              HasSubstr("input \"v\": base64 ({\"b64\": ...}) values are for string inputs; this input is FP32"));
  EXPECT_THAT(Message(R"({"inputs": {"b64": "aGVsbG8="}})", Vector(DType::kF32)), HasSubstr("base64"));
  EXPECT_THAT(Message(R"({"instances": ["a"]})", Vector(DType::kString)),
              HasSubstr("input \"v\" is a string (BYTES) input; the model server does not take string inputs"));
}

TEST(TfPredict, FloatsRoundTripExactly) {
  Expected<InferRequest> r =
      ParseTfPredict(R"({"instances": [0.1, 1e-45, 3.4028235e38, -0.0, 16777217]})", Vector(DType::kF32));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<float> v = Values<float>(r->inputs[0].value);
  // binary32 bit patterns: 0.1f, the smallest subnormal, the largest finite,
  // negative zero, 2^24 + 1 rounded to even (2^24).
  EXPECT_THAT(std::vector<uint32_t>({Bits(v[0]), Bits(v[1]), Bits(v[2]), Bits(v[3]), Bits(v[4])}),
              ElementsAre(0x3dcccccdu, 0x00000001u, 0x7f7fffffu, 0x80000000u, 0x4b800000u));
  InferRequest columns;
  const std::string text = WriteTfPredict(columns, Vector(DType::kF32), {r->inputs[0].value});
  EXPECT_EQ(text, R"({"outputs":[0.1,1e-45,3.4028235e+38,-0,16777216]})");
}

// ---- TensorFlow Serving: answers ----

TEST(TfPredict, WritesPredictionsAndOutputs) {
  const Signature sig = TwoInTwoOut();
  const std::vector<Tensor> outputs = {Tensor::FromVector<float>({0.5f, -2}, Shape{2}),
                                       Tensor::FromVector<int32_t>({1, 2, 3, 4}, Shape{2, 2})};
  InferRequest rows;
  rows.row_format = true;
  EXPECT_EQ(WriteTfPredict(rows, sig, outputs), R"({"predictions":[{"p":0.5,"q":[1,2]},{"p":-2,"q":[3,4]}]})");
  InferRequest columns;
  EXPECT_EQ(WriteTfPredict(columns, sig, outputs), R"({"outputs":{"p":[0.5,-2],"q":[[1,2],[3,4]]}})");
  const std::vector<Tensor> one = {Tensor::FromVector<float>({1, 2, 3, 4}, Shape{2, 2})};
  EXPECT_EQ(WriteTfPredict(rows, OneInOneOut(), one), R"({"predictions":[[1,2],[3,4]]})");
  EXPECT_EQ(WriteTfPredict(columns, OneInOneOut(), one), R"({"outputs":[[1,2],[3,4]]})");
}

TEST(TfPredict, NonFiniteOutputsAreNull) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  InferRequest rows;
  rows.row_format = true;
  EXPECT_EQ(WriteTfPredict(rows, Vector(DType::kF32), {Tensor::FromVector<float>({nan, inf, -inf, 1})}),
            R"({"predictions":[null,null,null,1]})");
}

TEST(TfMetadata, MatchesTfServingsLayout) {
  EXPECT_EQ(WriteTfMetadata("m", "3", OneInOneOut()),
            R"({"model_spec":{"name":"m","signature_name":"","version":"3"},"metadata":{"signature_def":)"
            R"({"signature_def":{"serving_default":{"inputs":{"x":{"dtype":"DT_FLOAT","tensor_shape":{"dim":)"
            R"([{"size":"-1","name":""},{"size":"3","name":""}],"unknown_rank":false},"name":"x:0"}},)"
            R"("outputs":{"y":{"dtype":"DT_FLOAT","tensor_shape":{"dim":[{"size":"-1","name":""},)"
            R"({"size":"2","name":""}],"unknown_rank":false},"name":"y:0"}},)"
            R"("method_name":"tensorflow/serving/predict"}}}}})");
}

// ---- KServe v2 ----

TEST(V2Infer, FlatAndNestedDataAreTheSame) {
  const Signature sig = OneInOneOut();
  for (const char* data : {"[1, 2, 3, 4, 5, 6]", "[[1, 2, 3], [4, 5, 6]]"}) {
    const std::string body =
        std::string(R"({"id": "r1", "inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": )") + data +
        "}]}";
    Expected<InferRequest> r = ParseV2Infer(body, body.size(), sig);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->id, "r1");
    EXPECT_EQ(r->batch_size, 2);
    EXPECT_EQ(r->inputs[0].value.shape(), (Shape{2, 3}));
    EXPECT_THAT(Values<float>(r->inputs[0].value), ElementsAre(1, 2, 3, 4, 5, 6));
    EXPECT_TRUE(r->requested_outputs.empty());
  }
}

TEST(V2Infer, WritesJsonOutputs) {
  const Signature sig = TwoInTwoOut();
  const std::string body = R"({"id": "7", "inputs": [{"name": "b", "shape": [1], "datatype": "INT64", "data": [3]},)"
                           R"({"name": "a", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}],)"
                           R"("outputs": [{"name": "q"}, {"name": "p"}]})";
  Expected<InferRequest> r = ParseV2Infer(body, body.size(), sig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(r->requested_outputs, ElementsAre("q", "p"));
  EXPECT_THAT(r->binary_outputs, ElementsAre(false, false));
  const std::vector<Tensor> outputs = {Tensor::FromVector<float>({0.25f}, Shape{1}),
                                       Tensor::FromVector<int32_t>({5, -6}, Shape{1, 2})};
  const V2Answer answer = WriteV2Infer("m", "2", *r, sig, outputs);
  EXPECT_FALSE(answer.binary);
  EXPECT_EQ(answer.json_length, answer.body.size());
  EXPECT_EQ(answer.body, R"({"model_name":"m","model_version":"2","id":"7","outputs":[)"
                         R"({"name":"q","datatype":"INT32","shape":[1,2],"data":[5,-6]},)"
                         R"({"name":"p","datatype":"FP32","shape":[1],"data":[0.25]}]})");
}

TEST(V2Infer, BinaryInputsAndOutputs) {
  const Signature sig = TwoInTwoOut();
  const std::string json =
      R"({"inputs": [{"name": "a", "shape": [2, 2], "datatype": "FP32", "parameters": {"binary_data_size": 16}},)"
      R"({"name": "b", "shape": [2], "datatype": "INT64", "parameters": {"binary_data_size": 16}}],)"
      R"("outputs": [{"name": "p", "parameters": {"binary_data": true}}, {"name": "q"}]})";
  const std::string body = json + Raw<float>({0.1f, 2, 3, 4}) + Raw<int64_t>({-1, 1LL << 40});
  Expected<InferRequest> r = ParseV2Infer(body, json.size(), sig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_THAT(Values<float>(r->inputs[0].value), ElementsAre(0.1f, 2, 3, 4));
  EXPECT_THAT(Values<int64_t>(r->inputs[1].value), ElementsAre(-1, 1LL << 40));
  EXPECT_THAT(r->binary_outputs, ElementsAre(true, false));

  const std::vector<Tensor> outputs = {Tensor::FromVector<float>({1.5f, -2}, Shape{2}),
                                       Tensor::FromVector<int32_t>({1, 2, 3, 4}, Shape{2, 2})};
  const V2Answer answer = WriteV2Infer("m", "1", *r, sig, outputs);
  const std::string expected_json = R"({"model_name":"m","model_version":"1","outputs":[)"
                                    R"({"name":"p","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
                                    R"({"name":"q","datatype":"INT32","shape":[2,2],"data":[1,2,3,4]}]})";
  EXPECT_TRUE(answer.binary);
  EXPECT_EQ(answer.json_length, expected_json.size());
  // 1.5f = 0x3fc00000, -2.0f = 0xc0000000, little-endian.
  EXPECT_EQ(answer.body, expected_json + std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8));
}

TEST(V2Infer, BinaryDataOutputMakesEveryOutputBinary) {
  const std::string json = R"({"parameters": {"binary_data_output": true}, "inputs": [{"name": "v", "shape": [3],)"
                           R"("datatype": "BOOL", "data": [true, 0, 1]}]})";
  Expected<InferRequest> r = ParseV2Infer(json, json.size(), Vector(DType::kBool));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->all_binary);
  EXPECT_THAT(Values<bool>(r->inputs[0].value), ElementsAre(true, false, true));
  const V2Answer answer = WriteV2Infer("m", "1", *r, Vector(DType::kBool), {r->inputs[0].value});
  EXPECT_TRUE(answer.binary);
  EXPECT_EQ(answer.body.substr(answer.json_length), std::string("\x01\x00\x01", 3));
}

TEST(V2Infer, ChecksBinarySizesExactly) {
  const Signature sig = Vector(DType::kF32);
  const std::string json =
      R"({"inputs": [{"name": "v", "shape": [2], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]})";
  EXPECT_THAT(V2Message(json + std::string(5, '\0'), sig, json.size()),
              HasSubstr("input \"v\": its 8 bytes of binary data from byte 0 after the JSON part run past the end of "
                        "the body (5 bytes left)"));
  EXPECT_THAT(V2Message(json + std::string(12, '\0'), sig, json.size()),
              HasSubstr("the body has 12 bytes after the JSON part (Inference-Header-Content-Length "));
  EXPECT_THAT(V2Message(json, sig, json.size() + 1), HasSubstr("but the body has only"));
  const std::string wrong =
      R"({"inputs": [{"name": "v", "shape": [3], "datatype": "FP32", "parameters": {"binary_data_size": 8}}]})";
  EXPECT_THAT(V2Message(wrong + std::string(8, '\0'), sig, wrong.size()),
              HasSubstr("input \"v\": binary_data_size is 8 bytes, but shape [3] of FP32 needs 12"));
}

TEST(V2Infer, RefusesHugeShapesBeforeAllocating) {
  const Signature sig = Vector(DType::kF32);
  EXPECT_THAT(
      V2Message(R"({"inputs": [{"name": "v", "shape": [1000000000000], "datatype": "FP32", "data": [1]}]})", sig),
      HasSubstr("input \"v\": shape [1000000000000] has 1000000000000 elements, more than the request's"));
  Signature any;
  any.inputs = {Spec("v", DType::kF32, Shape::UnknownRank())};
  EXPECT_THAT(V2Message(R"({"inputs": [{"name": "v", "shape": [4294967296, 4294967296, 4294967296],)"
                        R"("datatype": "FP32", "data": [1]}]})",
                        any),
              HasSubstr("input \"v\": shape [4294967296,4294967296,4294967296]"));
  const std::string json = R"({"inputs": [{"name": "v", "shape": [4611686018427387904], "datatype": "FP32",)"
                           R"("parameters": {"binary_data_size": 4}}]})";
  EXPECT_THAT(V2Message(json + "abcd", sig, json.size()), HasSubstr("needs more than 2^63"));
}

TEST(V2Infer, RefusesWrongDatatypesAndCounts) {
  const Signature sig = OneInOneOut();
  EXPECT_THAT(V2Message(R"({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "INT64", "data": [1, 2, 3]}]})", sig),
              HasSubstr("input \"x\": the model expects FP32, the request says INT64"));
  EXPECT_THAT(V2Message(R"({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2]}]})", sig),
              HasSubstr("input \"x\": \"data\" has 2 values, shape [1,3] needs 3"));
  EXPECT_THAT(
      V2Message(R"({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})", sig),
      HasSubstr("input \"x\": shape [1,4] does not fit the signature's [-1,3]"));
  EXPECT_THAT(V2Message(R"({"inputs": [{"name": "x", "shape": [1, -3], "datatype": "FP32", "data": []}]})", sig),
              HasSubstr("\"shape\" must be a list of non-negative integers"));
  EXPECT_THAT(V2Message(R"({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32"}]})", sig),
              HasSubstr("input \"x\": no \"data\""));
  EXPECT_THAT(
      V2Message(R"({"inputs": [{"name": "image", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})", sig),
      HasSubstr("unknown input \"image\" (the signature's inputs: x FP32 [-1,3])"));
  EXPECT_THAT(
      V2Message(R"({"inputs": [{"name": "v", "shape": [1], "datatype": "UINT8", "data": [256]}]})", Vector(DType::kU8)),
      HasSubstr("input \"v\": element 0 (at [0]): 256 is out of range for UINT8"));
  EXPECT_THAT(
      V2Message(R"({"inputs": [{"name": "v", "shape": [1], "datatype": "BOOL", "data": [2]}]})", Vector(DType::kBool)),
      HasSubstr("expected true or false (or 0 or 1) for BOOL, got 2"));
  EXPECT_THAT(V2Message(R"({"inputs": []})", sig), HasSubstr("missing input \"x\""));
  EXPECT_THAT(V2Message(R"({"input": []})", sig), HasSubstr("the body needs \"inputs\""));
}

TEST(V2Infer, LimitsNestingOfData) {
  const std::string deep = std::string(9, '[') + "1" + std::string(9, ']');
  EXPECT_THAT(V2Message(R"({"inputs": [{"name": "v", "shape": [1], "datatype": "FP32", "data": )" + deep + "}]}",
                        Vector(DType::kF32)),
              HasSubstr("input \"v\": \"data\" nests lists more than 8 deep"));
}

TEST(V2Infer, RefusesUnknownAndRepeatedOutputs) {
  const std::string input = R"({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}],)";
  EXPECT_THAT(V2Message(input + R"("outputs": [{"name": "logits"}]})", OneInOneOut()),
              HasSubstr("unknown output \"logits\" (the signature's outputs: y FP32 [-1,2])"));
  EXPECT_THAT(V2Message(input + R"("outputs": [{"name": "z"}]})", OneInOneOut()),
              HasSubstr("unknown output \"z\"; did you mean \"y\"?"));
  EXPECT_THAT(V2Message(input + R"("outputs": [{"name": "y"}, {"name": "y"}]})", OneInOneOut()),
              HasSubstr("output \"y\" is asked for twice"));
  EXPECT_THAT(V2Message(input + R"("outputs": [{"name": "y", "parameters": {"binary_data": 1}}]})", OneInOneOut()),
              HasSubstr("\"binary_data\" must be true or false"));
}

TEST(V2Metadata, ListsTheSignature) {
  EXPECT_EQ(WriteV2Metadata("m", {"1", "2"}, OneInOneOut()),
            R"({"name":"m","versions":["1","2"],"platform":"weft",)"
            R"("inputs":[{"name":"x","datatype":"FP32","shape":[-1,3]}],)"
            R"("outputs":[{"name":"y","datatype":"FP32","shape":[-1,2]}]})");
  EXPECT_EQ(V2DataType(DType::kF64), "FP64");
  EXPECT_EQ(V2DataType(DType::kU8), "UINT8");
  EXPECT_EQ(V2DataType(DType::kBF16), "BF16");
  EXPECT_EQ(V2DataType(DType::kString), "BYTES");
}

TEST(WriteError, EscapesAndReplacesInvalidUtf8) {
  EXPECT_EQ(WriteError("input \"x\": bad\n"), R"({"error":"input \"x\": bad\n"})");
  EXPECT_EQ(WriteError("a\xff"), "{\"error\":\"a\xef\xbf\xbd\"}");
}

}  // namespace
}  // namespace weft::serving
