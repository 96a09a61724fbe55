// TensorFlow Serving's REST :predict and metadata bodies (codec.h). The
// formats are TF Serving's "RESTful API" page: row ("instances") and
// columnar ("inputs") requests.
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

// Reads |value| (one input's value, including dimension 0 when batched)
// into a new tensor of |spec|.
Expected<Tensor> ReadColumn(dom::element value, const TensorSpec& spec, uint64_t json_bytes) {
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, InferShape(value, kMaxRank, spec));
  WEFT_RETURN_IF_ERROR(CheckFits(spec, dims));
  WEFT_RETURN_IF_ERROR(CheckElementCount(spec, dims, json_bytes).status());
  WEFT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(spec.dtype, Shape(dims)));
  ElementSink sink(tensor, spec.name, /*rows=*/false, /*bool_from_int=*/false);
  WEFT_RETURN_IF_ERROR(sink.WriteNested(value, 0));
  return tensor;
}

// Rows whose outer list differs from the first's are ragged; finding them
// before allocating also keeps a long first row from sizing the tensor.
Status CheckRowLengths(const std::vector<dom::element>& rows, int64_t length, const TensorSpec& spec) {
  for (std::size_t r = 1; r < rows.size(); ++r) {
    dom::array list;
    const int64_t size = rows[r].get_array().get(list) ? -1 : ListSize(list);
    if (size != length) {
      return InvalidArgumentError("input ", Quote(spec.name), ": instances[", r, "] ",
                                  size < 0 ? std::string("is not a list") : StrCat("has ", size, " values"),
                                  ", expected ", length, " like instances[0] (ragged rows)");
    }
  }
  return Status::Ok();
}

// Stacks the row values |rows| of |spec| along a new dimension 0.
Expected<Tensor> ReadRows(const std::vector<dom::element>& rows, const TensorSpec& spec, uint64_t json_bytes) {
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> row_dims, InferShape(rows[0], kMaxRank - 1, spec));
  std::vector<int64_t> dims{static_cast<int64_t>(rows.size())};
  dims.insert(dims.end(), row_dims.begin(), row_dims.end());
  WEFT_RETURN_IF_ERROR(CheckFits(spec, dims));
  if (!row_dims.empty()) WEFT_RETURN_IF_ERROR(CheckRowLengths(rows, row_dims[0], spec));
  WEFT_RETURN_IF_ERROR(CheckElementCount(spec, dims, json_bytes).status());
  WEFT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(spec.dtype, Shape(dims)));
  ElementSink sink(tensor, spec.name, /*rows=*/true, /*bool_from_int=*/false);
  for (dom::element row : rows) WEFT_RETURN_IF_ERROR(sink.WriteNested(row, 1));
  return tensor;
}

// Sorts row |r|'s object {NAME: value} into |values| (one list per input).
Status SortNamedRow(dom::element row, int64_t r, const Signature& sig, std::vector<std::vector<dom::element>>& values) {
  dom::object object;
  if (row.get_object().get(object)) {
    return InvalidArgumentError("instances[", r, "]: with several inputs every instance is an object {NAME: value} ",
                                SpecsString(sig.inputs, false));
  }
  std::vector<bool> seen(sig.inputs.size());
  for (dom::key_value_pair field : object) {
    const int index = FindSpec(sig.inputs, field.key);
    if (index < 0) return UnknownNameError(sig.inputs, field.key, false).WithContext(StrCat("instances[", r, "]"));
    if (seen[static_cast<std::size_t>(index)]) {
      return InvalidArgumentError("instances[", r, "]: input ", Quote(field.key), " is given twice");
    }
    seen[static_cast<std::size_t>(index)] = true;
    values[static_cast<std::size_t>(index)].push_back(field.value);
  }
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) {
      return InvalidArgumentError("instances[", r, "]: missing input ", Quote(sig.inputs[i].name), " ",
                                  SpecsString(sig.inputs, false));
    }
  }
  return Status::Ok();
}

Status ReadInstances(dom::element instances, const Signature& sig, uint64_t json_bytes, InputSlots& slots) {
  if (!sig.batched) {
    return InvalidArgumentError(
        "this model's signature is not batched (its inputs have no batch dimension), so it "
        "takes no \"instances\" (rows): send {\"inputs\": ...} (columnar) instead");
  }
  dom::array rows;
  if (instances.get_array().get(rows)) return InvalidArgumentError("\"instances\" must be a list, one entry per row");
  if (rows.begin() == rows.end()) return InvalidArgumentError("\"instances\" is empty: send at least one row");
  // One input: an entry is the input's row value, or (as TF Serving also
  // takes) an object naming it.
  dom::element first = *rows.begin();
  const bool named = sig.inputs.size() != 1 || (first.type() == dom::element_type::OBJECT && !IsBase64Object(first));
  std::vector<std::vector<dom::element>> values(sig.inputs.size());
  int64_t r = 0;
  for (dom::element row : rows) {
    if (named) {
      WEFT_RETURN_IF_ERROR(SortNamedRow(row, r, sig, values));
    } else {
      values[0].push_back(row);
    }
    ++r;
  }
  for (std::size_t i = 0; i < sig.inputs.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(int index, slots.Claim(sig.inputs[i].name));
    WEFT_ASSIGN_OR_RETURN(Tensor tensor, ReadRows(values[i], sig.inputs[i], json_bytes));
    slots.Set(index, std::move(tensor));
  }
  return Status::Ok();
}

Status ReadInputs(dom::element inputs, const Signature& sig, uint64_t json_bytes, InputSlots& slots) {
  const bool named = sig.inputs.size() != 1 || (inputs.type() == dom::element_type::OBJECT && !IsBase64Object(inputs));
  if (!named) {
    WEFT_ASSIGN_OR_RETURN(int index, slots.Claim(sig.inputs[0].name));
    WEFT_ASSIGN_OR_RETURN(Tensor tensor, ReadColumn(inputs, sig.inputs[0], json_bytes));
    slots.Set(index, std::move(tensor));
    return Status::Ok();
  }
  dom::object object;
  if (inputs.get_object().get(object)) {
    return InvalidArgumentError("with several inputs, \"inputs\" is an object {NAME: value} ",
                                SpecsString(sig.inputs, false));
  }
  for (dom::key_value_pair field : object) {
    WEFT_ASSIGN_OR_RETURN(int index, slots.Claim(field.key));
    WEFT_ASSIGN_OR_RETURN(Tensor tensor,
                          ReadColumn(field.value, sig.inputs[static_cast<std::size_t>(index)], json_bytes));
    slots.Set(index, std::move(tensor));
  }
  return Status::Ok();
}

// Row |r| of |t| (dimension 0 is the rows).
void AppendRow(std::string& out, const Tensor& t, int64_t r) {
  if (t.rank() == 0 || r >= t.dim(0)) {
    out.append("null");
    return;
  }
  const std::vector<int64_t>& dims = t.shape().dims();
  const int64_t row_elements = t.num_elements() / t.dim(0);
  AppendNested(out, t, r * row_elements, std::span<const int64_t>(dims).subspan(1));
}

std::string_view TfDType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "DT_FLOAT";
    case DType::kF64: return "DT_DOUBLE";
    case DType::kI8: return "DT_INT8";
    case DType::kI16: return "DT_INT16";
    case DType::kI32: return "DT_INT32";
    case DType::kI64: return "DT_INT64";
    case DType::kU8: return "DT_UINT8";
    case DType::kBool: return "DT_BOOL";
    case DType::kF16: return "DT_HALF";
    case DType::kBF16: return "DT_BFLOAT16";
    case DType::kString: return "DT_STRING";
    default: return "DT_INVALID";
  }
}

// A SignatureDef's inputs or outputs: {NAME: TensorInfo}, as TF Serving's
// JSON (protobuf's JSON mapping: int64 sizes as strings).
Json TensorInfos(const std::vector<TensorSpec>& specs) {
  Json infos = Json::object();
  for (const TensorSpec& spec : specs) {
    Json shape = Json::object();
    if (spec.shape.unknown_rank()) {
      shape["unknown_rank"] = true;
    } else {
      Json dims = Json::array();
      for (int64_t d : spec.shape.dims()) dims.push_back({{"size", StrCat(d)}, {"name", ""}});
      shape["dim"] = std::move(dims);
      shape["unknown_rank"] = false;
    }
    infos[spec.name] = {{"dtype", TfDType(spec.dtype)}, {"tensor_shape", std::move(shape)}, {"name", spec.tensor}};
  }
  return infos;
}

}  // namespace

Expected<InferRequest> ParseTfPredict(std::string_view body, const Signature& sig) {
  WEFT_RETURN_IF_ERROR(CheckNoStringInputs(sig));
  JsonParser parser;
  WEFT_ASSIGN_OR_RETURN(dom::element root, parser.Parse(body));
  dom::object object;
  if (root.get_object().get(object)) {
    return InvalidArgumentError("the :predict body must be a JSON object with \"instances\" or \"inputs\"");
  }
  std::optional<dom::element> instances;
  std::optional<dom::element> inputs;
  std::vector<std::string> other_keys;
  for (dom::key_value_pair field : object) {
    if (field.key == "signature_name") {
      std::string_view name;
      if (field.value.get_string().get(name)) return InvalidArgumentError("\"signature_name\" must be a string");
      if (name != sig.name) {
        return InvalidArgumentError("unknown signature_name ", Quote(name), ": this model's signature is ",
                                    Quote(sig.name));
      }
    } else if (field.key == "instances") {
      instances = field.value;
    } else if (field.key == "inputs") {
      inputs = field.value;
    } else {
      other_keys.emplace_back(field.key);
    }
  }
  if (instances && inputs) {
    return InvalidArgumentError("the body has both \"instances\" (rows) and \"inputs\" (columns): send one");
  }
  if (!instances && !inputs) {
    std::string hint;
    for (const std::string& key : other_keys) {
      if (!ClosestMatch(key, {"instances", "inputs"}).empty()) hint = StrCat(" (the body has ", Quote(key), ")");
    }
    return InvalidArgumentError("the body has neither \"instances\" (rows) nor \"inputs\" (columns)", hint);
  }
  InferRequest request;
  InputSlots slots(sig);
  if (instances) {
    request.row_format = true;
    WEFT_RETURN_IF_ERROR(ReadInstances(*instances, sig, body.size(), slots));
  } else {
    WEFT_RETURN_IF_ERROR(ReadInputs(*inputs, sig, body.size(), slots));
  }
  WEFT_RETURN_IF_ERROR(slots.Finish(request));
  return request;
}

std::string WriteTfPredict(const InferRequest& request, const Signature& sig, const std::vector<Tensor>& outputs) {
  std::string out;
  std::size_t estimate = 64;
  for (const Tensor& t : outputs) estimate += EstimateJsonBytes(t) + 16;
  out.reserve(estimate);
  const bool one = outputs.size() == 1;
  if (request.row_format) {
    out.append("{\"predictions\":[");
    const int64_t rows = outputs.empty() || outputs[0].rank() == 0 ? 0 : outputs[0].dim(0);
    for (int64_t r = 0; r < rows; ++r) {
      if (r > 0) out.push_back(',');
      if (one) {
        AppendRow(out, outputs[0], r);
        continue;
      }
      out.push_back('{');
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        if (i > 0) out.push_back(',');
        AppendJsonString(out, sig.outputs[i].name);
        out.push_back(':');
        AppendRow(out, outputs[i], r);
      }
      out.push_back('}');
    }
    out.append("]}");
    return out;
  }
  out.append("{\"outputs\":");
  if (!one) out.push_back('{');
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!one) {
      if (i > 0) out.push_back(',');
      AppendJsonString(out, sig.outputs[i].name);
      out.push_back(':');
    }
    AppendNested(out, outputs[i], 0, outputs[i].shape().dims());
  }
  if (!one) out.push_back('}');
  out.push_back('}');
  return out;
}

std::string WriteTfMetadata(std::string_view model, std::string_view version, const Signature& sig) {
  Json signature = {{"inputs", TensorInfos(sig.inputs)},
                    {"outputs", TensorInfos(sig.outputs)},
                    {"method_name", "tensorflow/serving/predict"}};
  Json defs = Json::object();
  defs[sig.name] = std::move(signature);
  Json answer = {
      {"model_spec", {{"name", std::string(model)}, {"signature_name", ""}, {"version", std::string(version)}}},
      {"metadata", {{"signature_def", {{"signature_def", std::move(defs)}}}}}};
  return DumpJson(answer);
}

}  // namespace weft::serving
