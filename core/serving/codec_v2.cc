// KServe's v2 inference protocol (the Open Inference Protocol): /infer
// bodies in JSON and with the binary tensor extension (codec.h), and model
// metadata.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "core/base/strings.h"
#include "core/serving/codec.h"
#include "core/serving/codec_util.h"
#include "core/tensor/size.h"

namespace weft::serving {
namespace {

using namespace codec_internal;  // NOLINT(build/namespaces): this file's helpers

// The body after the JSON part, and how much of it the inputs have taken.
struct BinaryPart {
  std::string_view bytes;
  uint64_t taken = 0;
};

// One input's fields, as far as they are there.
struct V2Input {
  std::string_view name;
  std::optional<std::string_view> datatype;
  std::optional<dom::element> shape;
  std::optional<dom::element> data;
  std::optional<uint64_t> binary_size;
};

Status ReadInputFields(dom::element input, int64_t position, V2Input& fields) {
  dom::object object;
  if (input.get_object().get(object)) {
    return InvalidArgumentError("inputs[", position,
                                "] must be an object {\"name\", \"shape\", \"datatype\", \"data\"}");
  }
  bool named = false;
  for (dom::key_value_pair field : object) {
    if (field.key == "name") {
      if (field.value.get_string().get(fields.name))
        return InvalidArgumentError("inputs[", position, "]: \"name\" must be a string");
      named = true;
    } else if (field.key == "datatype") {
      std::string_view datatype;
      if (field.value.get_string().get(datatype))
        return InvalidArgumentError("inputs[", position, "]: \"datatype\" must be a string");
      fields.datatype = datatype;
    } else if (field.key == "shape") {
      fields.shape = field.value;
    } else if (field.key == "data") {
      fields.data = field.value;
    } else if (field.key == "parameters") {
      dom::element size;
      if (!field.value["binary_data_size"].get(size)) {
        uint64_t bytes;
        if (size.get_uint64().get(bytes)) {
          return InvalidArgumentError("inputs[", position, "]: \"binary_data_size\" must be a non-negative integer");
        }
        fields.binary_size = bytes;
      }
    }
  }
  if (!named) return InvalidArgumentError("inputs[", position, "] has no \"name\"");
  return Status::Ok();
}

Expected<std::vector<int64_t>> ReadShape(const V2Input& fields) {
  dom::array list;
  if (!fields.shape || fields.shape->get_array().get(list)) {
    return InvalidArgumentError("input ", Quote(fields.name), ": \"shape\" must be a list of dimension sizes");
  }
  std::vector<int64_t> dims;
  for (dom::element e : list) {
    int64_t d;
    if (e.get_int64().get(d) || d < 0) {
      return InvalidArgumentError("input ", Quote(fields.name), ": \"shape\" must be a list of non-negative integers");
    }
    if (static_cast<int>(dims.size()) == kMaxRank) {
      return InvalidArgumentError("input ", Quote(fields.name), ": \"shape\" has more than ", kMaxRank,
                                  " dimensions (a tensor has at most ", kMaxRank, ")");
    }
    dims.push_back(d);
  }
  return dims;
}

// The input's elements from the binary part, which must hold them exactly.
Expected<Tensor> ReadBinary(const V2Input& fields, const TensorSpec& spec, const std::vector<int64_t>& dims,
                            BinaryPart& binary) {
  Expected<int64_t> count = CheckedNumElements(dims);
  std::optional<int64_t> bytes;
  if (count.ok()) bytes = CheckedMul(*count, static_cast<int64_t>(DTypeSize(spec.dtype)));
  if (!bytes || static_cast<uint64_t>(*bytes) != *fields.binary_size) {
    return InvalidArgumentError("input ", Quote(spec.name), ": binary_data_size is ", *fields.binary_size,
                                " bytes, but shape ", ListString(dims), " of ", V2DataType(spec.dtype), " needs ",
                                bytes ? StrCat(*bytes) : std::string("more than 2^63"));
  }
  const uint64_t left = binary.bytes.size() - binary.taken;
  if (*fields.binary_size > left) {
    return InvalidArgumentError("input ", Quote(spec.name), ": its ", *fields.binary_size,
                                " bytes of binary data from byte ", binary.taken,
                                " after the JSON part run past the end of the body (", left,
                                " bytes left): the body is truncated or Inference-Header-Content-Length is wrong");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(spec.dtype, Shape(dims)));
  const char* from = binary.bytes.data() + binary.taken;
  if (spec.dtype == DType::kBool) {
    // Any non-zero byte is true; a bool holding another value is undefined.
    bool* to = tensor.data<bool>();
    for (int64_t i = 0; i < *count; ++i) to[i] = from[i] != 0;
  } else if (*bytes > 0) {
    std::memcpy(tensor.raw_data(), from, static_cast<std::size_t>(*bytes));
  }
  binary.taken += *fields.binary_size;
  return tensor;
}

Expected<Tensor> ReadJsonData(const V2Input& fields, const TensorSpec& spec, const std::vector<int64_t>& dims,
                              uint64_t json_bytes) {
  if (!fields.data) {
    return InvalidArgumentError("input ", Quote(spec.name), ": no \"data\" (nor a \"binary_data_size\" parameter)");
  }
  WEFT_ASSIGN_OR_RETURN(int64_t count, CheckElementCount(spec, dims, json_bytes));
  WEFT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(spec.dtype, Shape(dims)));
  ElementSink sink(tensor, spec.name, /*rows=*/false, /*bool_from_int=*/true);
  WEFT_RETURN_IF_ERROR(sink.WriteFlat(*fields.data));
  if (sink.count() != count) {
    return InvalidArgumentError("input ", Quote(spec.name), ": \"data\" has ", sink.count(), " values, shape ",
                                ListString(dims), " needs ", count);
  }
  return tensor;
}

Status ReadInput(dom::element input, int64_t position, const Signature& sig, uint64_t json_bytes, BinaryPart& binary,
                 InputSlots& slots) {
  V2Input fields;
  WEFT_RETURN_IF_ERROR(ReadInputFields(input, position, fields));
  WEFT_ASSIGN_OR_RETURN(int index, slots.Claim(fields.name));
  const TensorSpec& spec = sig.inputs[static_cast<std::size_t>(index)];
  if (!fields.datatype) {
    return InvalidArgumentError("input ", Quote(spec.name), ": no \"datatype\" (the model expects ",
                                V2DataType(spec.dtype), ")");
  }
  if (*fields.datatype != V2DataType(spec.dtype)) {
    return InvalidArgumentError("input ", Quote(spec.name), ": the model expects ", V2DataType(spec.dtype),
                                ", the request says ", *fields.datatype);
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadShape(fields));
  WEFT_RETURN_IF_ERROR(CheckFits(spec, dims));
  if (fields.binary_size && fields.data) {
    return InvalidArgumentError("input ", Quote(spec.name), ": has both \"data\" and a \"binary_data_size\" parameter");
  }
  Expected<Tensor> tensor =
      fields.binary_size ? ReadBinary(fields, spec, dims, binary) : ReadJsonData(fields, spec, dims, json_bytes);
  if (!tensor.ok()) return tensor.status();
  slots.Set(index, std::move(tensor).value());
  return Status::Ok();
}

// "binary_data" in |parameters| (an object), or |fallback|.
Expected<bool> BinaryFlag(dom::element parameters, std::string_view key, bool fallback) {
  dom::element flag;
  if (parameters[key].get(flag)) return fallback;
  bool value;
  if (flag.get_bool().get(value)) return InvalidArgumentError("\"", key, "\" must be true or false");
  return value;
}

Status ReadOutputs(dom::element outputs, const Signature& sig, InferRequest& request) {
  dom::array list;
  if (outputs.get_array().get(list)) return InvalidArgumentError("\"outputs\" must be a list of {\"name\"}");
  for (dom::element output : list) {
    std::string_view name;
    if (output["name"].get_string().get(name)) {
      return InvalidArgumentError("every entry of \"outputs\" must be an object with a \"name\"");
    }
    if (FindSpec(sig.outputs, name) < 0) return UnknownNameError(sig.outputs, name, /*outputs=*/true);
    for (const std::string& asked : request.requested_outputs) {
      if (asked == name) return InvalidArgumentError("output ", Quote(name), " is asked for twice");
    }
    bool binary = request.all_binary;
    dom::element parameters;
    if (!output["parameters"].get(parameters)) {
      WEFT_ASSIGN_OR_RETURN(binary, BinaryFlag(parameters, "binary_data", request.all_binary));
    }
    request.requested_outputs.emplace_back(name);
    request.binary_outputs.push_back(binary);
  }
  return Status::Ok();
}

// Appends one output's JSON to |out| and, when it is answered as binary
// data, its bytes to |bytes|; returns whether it was.
bool AppendOutput(std::string& out, std::string& bytes, const TensorSpec& spec, const Tensor& t, bool binary) {
  out.append("{\"name\":");
  AppendJsonString(out, spec.name);
  out.append(",\"datatype\":\"");
  out.append(V2DataType(t.dtype()));
  out.append("\",\"shape\":");
  out.append(ListString(t.shape().dims()));
  // Strings have the extension's own length-prefixed layout; they are
  // always answered as JSON.
  if (binary && t.dtype() != DType::kString) {
    out.append(",\"parameters\":{\"binary_data_size\":");
    out.append(StrCat(t.byte_size()));
    out.append("}}");
    if (t.byte_size() > 0) bytes.append(static_cast<const char*>(t.raw_data()), t.byte_size());
    return true;
  }
  out.append(",\"data\":");
  AppendFlat(out, t);
  out.push_back('}');
  return false;
}

Json SpecsJson(const std::vector<TensorSpec>& specs) {
  Json list = Json::array();
  for (const TensorSpec& spec : specs) {
    // KServe has no way to say "unknown rank": [-1].
    const std::vector<int64_t> dims = spec.shape.unknown_rank() ? std::vector<int64_t>{-1} : spec.shape.dims();
    list.push_back({{"name", spec.name}, {"datatype", V2DataType(spec.dtype)}, {"shape", dims}});
  }
  return list;
}

}  // namespace

Expected<InferRequest> ParseV2Infer(std::string_view body, std::size_t json_length, const Signature& sig) {
  WEFT_RETURN_IF_ERROR(CheckNoStringInputs(sig));
  if (json_length > body.size()) {
    return InvalidArgumentError("Inference-Header-Content-Length is ", json_length, ", but the body has only ",
                                body.size(), " bytes");
  }
  const std::string_view json = body.substr(0, json_length);
  BinaryPart binary{body.substr(json_length)};
  JsonParser parser;
  WEFT_ASSIGN_OR_RETURN(dom::element root, parser.Parse(json));
  dom::object object;
  if (root.get_object().get(object))
    return InvalidArgumentError("the /infer body must be a JSON object with \"inputs\"");
  InferRequest request;
  std::optional<dom::element> inputs;
  std::optional<dom::element> outputs;
  for (dom::key_value_pair field : object) {
    if (field.key == "id") {
      std::string_view id;
      if (field.value.get_string().get(id)) return InvalidArgumentError("\"id\" must be a string");
      request.id = std::string(id);
    } else if (field.key == "parameters") {
      WEFT_ASSIGN_OR_RETURN(request.all_binary, BinaryFlag(field.value, "binary_data_output", false));
    } else if (field.key == "inputs") {
      inputs = field.value;
    } else if (field.key == "outputs") {
      outputs = field.value;
    }
  }
  dom::array list;
  if (!inputs || inputs->get_array().get(list)) {
    return InvalidArgumentError("the body needs \"inputs\": a list of {\"name\", \"shape\", \"datatype\", \"data\"} ",
                                SpecsString(sig.inputs, false));
  }
  InputSlots slots(sig);
  int64_t position = 0;
  for (dom::element input : list) WEFT_RETURN_IF_ERROR(ReadInput(input, position++, sig, json.size(), binary, slots));
  if (binary.taken != binary.bytes.size()) {
    return InvalidArgumentError("the body has ", binary.bytes.size(), " bytes after the JSON part (",
                                "Inference-Header-Content-Length ", json_length, "), but the inputs' binary_data_size ",
                                "parameters add up to ", binary.taken);
  }
  if (outputs) WEFT_RETURN_IF_ERROR(ReadOutputs(*outputs, sig, request));
  WEFT_RETURN_IF_ERROR(slots.Finish(request));
  return request;
}

V2Answer WriteV2Infer(std::string_view model, std::string_view version, const InferRequest& request,
                      const Signature& sig, const std::vector<Tensor>& outputs) {
  std::vector<std::size_t> chosen;
  std::vector<bool> binary;
  if (request.requested_outputs.empty()) {
    for (std::size_t i = 0; i < outputs.size(); ++i) chosen.push_back(i);
    binary.assign(outputs.size(), request.all_binary);
  } else {
    for (std::size_t k = 0; k < request.requested_outputs.size(); ++k) {
      const int index = FindSpec(sig.outputs, request.requested_outputs[k]);
      if (index < 0 || static_cast<std::size_t>(index) >= outputs.size()) continue;  // the parser refused these
      chosen.push_back(static_cast<std::size_t>(index));
      binary.push_back(k < request.binary_outputs.size() ? request.binary_outputs[k] : request.all_binary);
    }
  }
  V2Answer answer;
  std::string& out = answer.body;
  std::size_t estimate = 128;
  for (std::size_t i : chosen) estimate += EstimateJsonBytes(outputs[i]) + 64;
  out.reserve(estimate);
  std::string bytes;
  out.append("{\"model_name\":");
  AppendJsonString(out, model);
  out.append(",\"model_version\":");
  AppendJsonString(out, version);
  if (!request.id.empty()) {
    out.append(",\"id\":");
    AppendJsonString(out, request.id);
  }
  out.append(",\"outputs\":[");
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    if (k > 0) out.push_back(',');
    if (AppendOutput(out, bytes, sig.outputs[chosen[k]], outputs[chosen[k]], binary[k])) answer.binary = true;
  }
  out.append("]}");
  answer.json_length = out.size();
  out.append(bytes);
  return answer;
}

std::string WriteV2Metadata(std::string_view model, const std::vector<std::string>& versions, const Signature& sig) {
  Json answer = {{"name", std::string(model)},
                 {"versions", versions},
                 {"platform", "weft"},
                 {"inputs", SpecsJson(sig.inputs)},
                 {"outputs", SpecsJson(sig.outputs)}};
  return DumpJson(answer);
}

}  // namespace weft::serving
