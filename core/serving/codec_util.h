// Not API: what the TensorFlow Serving and KServe v2 codecs (codec_tf.cc,
// codec_v2.cc) share: the thread's simdjson parser, JSON values into tensor
// elements, tensors into JSON text, and the checks and messages that refer
// to the signature.
#ifndef WEFT_CORE_SERVING_CODEC_UTIL_H_
#define WEFT_CORE_SERVING_CODEC_UTIL_H_

#include <simdjson.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/serving/request.h"
#include "core/tensor/tensor.h"

namespace weft::serving::codec_internal {

namespace dom = simdjson::dom;

// Borrows this thread's simdjson parser for the lifetime of the object;
// elements from Parse are valid until then. The parser keeps its buffers
// between requests (so steady traffic allocates none), except after a
// document larger than kKeepBytes, whose buffers (about ten times the text)
// are freed when the object goes.
class JsonParser {
 public:
  static constexpr std::size_t kKeepBytes = std::size_t{4} << 20;

  JsonParser();
  ~JsonParser();
  JsonParser(const JsonParser&) = delete;
  JsonParser& operator=(const JsonParser&) = delete;

  // The root of |text|; malformed JSON is INVALID_ARGUMENT with simdjson's
  // reason. simdjson reads SIMDJSON_PADDING bytes past the end, so |text| is
  // copied into the parser's own padded buffer (reused: one memcpy).
  Expected<dom::element> Parse(std::string_view text);

 private:
  dom::parser& parser_;
};

// "x FP32 [-1,4]"; "[...]" for a shape of unknown rank.
std::string SpecString(const TensorSpec& spec);
// "(the signature's inputs: x FP32 [-1,4], y INT64 [-1])" ("outputs" when
// |outputs|).
std::string SpecsString(const std::vector<TensorSpec>& specs, bool outputs);
// The index of the spec called |name|, or -1.
int FindSpec(const std::vector<TensorSpec>& specs, std::string_view name);
// `unknown input "y"; did you mean "x"? (the signature's inputs: ...)`.
Status UnknownNameError(const std::vector<TensorSpec>& specs, std::string_view name, bool outputs);
// Refuses a signature with string inputs: the codecs do not parse strings.
Status CheckNoStringInputs(const Signature& sig);

// Whether a tensor of |dims| fits |spec|'s shape (rank and known dims);
// the error shows both.
Status CheckFits(const TensorSpec& spec, const std::vector<int64_t>& dims);
// The element count of |dims| when it is at most |max_elements| (the JSON
// text's size: every element takes at least a byte of it), else an error
// naming the input; checked for overflow.
Expected<int64_t> CheckElementCount(const TensorSpec& spec, const std::vector<int64_t>& dims, uint64_t max_elements);

// Inputs as the parsers find them, assembled into an InferRequest.
class InputSlots {
 public:
  explicit InputSlots(const Signature& sig) : sig_(sig), tensors_(sig.inputs.size()) {}
  // The index of input |name|: an error when the signature has no such
  // input, or it was given already.
  Expected<int> Claim(std::string_view name);
  void Set(int index, Tensor tensor) { tensors_[static_cast<std::size_t>(index)] = std::move(tensor); }
  // Checks every input is present and, when batched, that they agree on
  // dimension 0 (at least one row); fills |request|'s inputs and batch_size.
  Status Finish(InferRequest& request);

 private:
  const Signature& sig_;
  std::vector<Tensor> tensors_;
};

// The shape of |spec|'s value |value|, nested lists (a number is a scalar:
// []), from its first elements; more than |max_rank| lists deep is an
// error, and so is an object (a base64 {"b64": ...} one says so).
Expected<std::vector<int64_t>> InferShape(dom::element value, int max_rank, const TensorSpec& spec);
// The length of |list| (dom::array::size() saturates at 0xFFFFFF).
int64_t ListSize(dom::array list);
// Whether |e| is TF Serving's base64 {"b64": ...} object.
bool IsBase64Object(dom::element e);

// Writes JSON values into a tensor's elements in row-major order,
// converting each to the tensor's dtype (see codec.h for the rules).
class ElementSink {
 public:
  // |rows|: the tensor stacks the rows of "instances" (messages then say
  // "instances[3][1]" instead of "[3][1]"). |bool_from_int|: BOOL takes 0
  // and 1 too.
  ElementSink(const Tensor& tensor, std::string_view input, bool rows, bool bool_from_int);

  // Writes |value|, which must be nested lists of exactly the tensor's
  // dimensions from |depth| on, at the next element.
  Status WriteNested(dom::element value, int depth);
  // Writes the numbers of |value| (a number, or lists nested at most
  // kMaxRank deep) in order, whatever the nesting; stops writing, but goes
  // on counting, past the tensor's end.
  Status WriteFlat(dom::element value, int depth = 0);
  // The elements written or counted so far.
  int64_t count() const { return next_; }

 private:
  template <class Store>
  Status Nested(dom::element value, int depth);
  template <class Store>
  Status Flat(dom::element value, int depth);
  Status ElementError(dom::element value, int code) const;
  Status ShapeError(int depth, std::string_view what) const;
  std::string Where(int depth) const;

  const Tensor& tensor_;
  std::string_view input_;
  bool rows_;
  bool bool_from_int_;
  int64_t next_ = 0;
};

// Appends |text| as a JSON string (invalid UTF-8 bytes become U+FFFD).
void AppendJsonString(std::string& out, std::string_view text);
// Appends elements [|begin|, |begin| + product(|dims|)) of the host tensor
// |t| as nested lists of |dims| (a bare value when |dims| is empty).
void AppendNested(std::string& out, const Tensor& t, int64_t begin, std::span<const int64_t> dims);
// Appends every element of |t| as one flat list.
void AppendFlat(std::string& out, const Tensor& t);
// A guess at the JSON size of |t|'s elements, to reserve.
std::size_t EstimateJsonBytes(const Tensor& t);

}  // namespace weft::serving::codec_internal

#endif  // WEFT_CORE_SERVING_CODEC_UTIL_H_
