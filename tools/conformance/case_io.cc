#include "tools/conformance/case_io.h"

#include <cmath>
#include <cstring>

#include "core/tensor/npy.h"
#include "weft/sdk/half.h"

namespace weft::cases {
namespace {

// A case's inputs or outputs: tables with a file name (a plain name in
// the cases' folder) and an optional dtype.
Expected<std::vector<IoSpec>> ReadSpecs(const toml::node_view<const toml::node>& node, const std::string& where) {
  std::vector<IoSpec> specs;
  if (!node) return specs;
  const toml::array* array = node.as_array();
  if (array == nullptr) return InvalidArgumentError(where, " is not an array");
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::table* t = (*array)[i].as_table();
    const std::optional<std::string> file = t != nullptr ? (*t)["file"].value<std::string>() : std::nullopt;
    if (!file || file->empty() || file->find('/') != std::string::npos || *file == "..") {
      return InvalidArgumentError(where, "[", i, "] needs a file: a plain file name in the cases' folder");
    }
    specs.push_back({*file, (*t)["dtype"].value_or(std::string()) == "bf16"});
  }
  return specs;
}

}  // namespace

double AsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[i];
    case DType::kF64: return t.data<double>()[i];
    case DType::kF16: return sdk::HalfToFloat(t.data<uint16_t>()[i]);
    case DType::kBF16: return sdk::Bfloat16ToFloat(t.data<uint16_t>()[i]);
    case DType::kI8: return t.data<int8_t>()[i];
    case DType::kI16: return t.data<int16_t>()[i];
    case DType::kI32: return t.data<int32_t>()[i];
    case DType::kI64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kU8: return t.data<uint8_t>()[i];
    // Read as a byte: a poisoned (unwritten) bool is neither 0 nor 1, and
    // loading it as a bool would be undefined.
    case DType::kBool: {
      uint8_t byte;
      std::memcpy(&byte, static_cast<const uint8_t*>(t.raw_data()) + i, 1);
      return byte;
    }
    default: return std::nan("");
  }
}

Expected<std::vector<Case>> ReadCases(const toml::table& document) {
  std::vector<Case> out;
  const toml::array* array = document["case"].as_array();
  if (array == nullptr) return InvalidArgumentError("no [[case]] array");
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::table* table = (*array)[i].as_table();
    if (table == nullptr) return InvalidArgumentError("case ", i, " is not a table");
    const toml::table& t = *table;
    Case c;
    c.name = t["name"].value_or(std::string());
    c.op = t["op"].value_or(std::string());
    if (c.name.empty() || c.op.empty()) return InvalidArgumentError("case ", i, " needs a name and an op");
    const std::string where = StrCat("case ", c.name);
    WEFT_ASSIGN_OR_RETURN(c.inputs, ReadSpecs(t["inputs"], where + " inputs"));
    WEFT_ASSIGN_OR_RETURN(c.outputs, ReadSpecs(t["outputs"], where + " outputs"));
    c.error = t["error"].value_or(std::string());
    c.rtol = t["rtol"].value_or(0.0);
    c.atol = t["atol"].value_or(0.0);
    c.signed_zeros = t["signed_zeros"].value_or(false);
    c.attrs = t["attrs"].as_table();
    if (t["attrs"] && c.attrs == nullptr) return InvalidArgumentError(where, ": attrs is not a table");
    out.push_back(std::move(c));
  }
  return out;
}

Expected<Tensor> LoadTensor(const std::string& dir, const IoSpec& spec) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, ReadNpy(dir + "/" + spec.file));
  if (!spec.bf16) return t;
  WEFT_ASSIGN_OR_RETURN(Tensor b, Tensor::Allocate(DType::kBF16, t.shape()));
  for (int64_t i = 0; i < t.num_elements(); ++i) b.data<uint16_t>()[i] = sdk::FloatToBfloat16(t.data<float>()[i]);
  return b;
}

DType ExpectedDType(const Tensor& file_tensor, const IoSpec& spec) {
  return spec.bf16 ? DType::kBF16 : file_tensor.dtype();
}

Expected<AttrMap> Attrs(const Case& c, const OpDef& op) {
  AttrMap out;
  if (c.attrs == nullptr) return out;
  for (const auto& [key, node] : *c.attrs) {
    const std::string name(key.str());
    const AttrDef* def = op.FindAttr(name);
    if (def == nullptr) return InvalidArgumentError("case attr ", Quote(name), " is not an attr of ", op.name);
    switch (def->type) {
      case AttrType::kType: {
        auto d = ParseDType(node.value_or(std::string()));
        if (!d) return InvalidArgumentError("attr ", name, ": bad dtype");
        out[name] = AttrValue(*d);
        break;
      }
      case AttrType::kString: out[name] = AttrValue(node.value_or(std::string())); break;
      case AttrType::kInt: out[name] = AttrValue(node.value_or(int64_t{0})); break;
      case AttrType::kFloat: out[name] = AttrValue(node.value_or(0.0)); break;
      case AttrType::kBool: out[name] = AttrValue(node.value_or(false)); break;
      case AttrType::kIntList:
      case AttrType::kShape: {
        std::vector<int64_t> values;
        if (node.as_array() == nullptr) return InvalidArgumentError("attr ", name, ": expected an array");
        for (const toml::node& e : *node.as_array()) values.push_back(e.value_or(int64_t{0}));
        if (def->type == AttrType::kShape) {
          out[name] = AttrValue(Shape(values));
        } else {
          out[name] = AttrValue(values);
        }
        break;
      }
      case AttrType::kFloatList: {
        std::vector<double> values;
        if (node.as_array() == nullptr) return InvalidArgumentError("attr ", name, ": expected an array");
        for (const toml::node& e : *node.as_array()) values.push_back(e.value_or(0.0));
        out[name] = AttrValue(values);
        break;
      }
      default:
        return InvalidArgumentError("attr ", name, ": type ", AttrTypeName(def->type), " not supported in cases");
    }
  }
  return out;
}

std::string Compare(const Tensor& got, const Tensor& want, DType want_dtype, double rtol, double atol,
                    bool signed_zeros) {
  if (got.dtype() != want_dtype) return StrCat("dtype ", DTypeName(got.dtype()), ", expected ", DTypeName(want_dtype));
  if (got.shape() != want.shape())
    return StrCat("shape ", got.shape().ToString(), ", expected ", want.shape().ToString());
  const bool integral = !IsFloating(want_dtype);
  std::string report;
  int bad = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    if (integral && want_dtype == DType::kI64) {
      if (got.data<int64_t>()[i] != want.data<int64_t>()[i] && bad++ < 5)
        report += StrCat(" [", i, "] got ", got.data<int64_t>()[i], " want ", want.data<int64_t>()[i], ";");
      continue;
    }
    const double g = AsDouble(got, i), w = AsDouble(want, i);
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else if (signed_zeros && w == 0) {
      ok = g == 0 && std::signbit(g) == std::signbit(w);
    } else if (integral) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= atol + rtol * std::fabs(w);
    }
    if (!ok && bad++ < 5) {
      // -0 prints as "-0", so a sign difference is visible.
      report += StrCat(" [", i, "] got ", g, " want ", w, ";");
    }
  }
  if (bad == 0) return "";
  return StrCat(bad, " of ", got.num_elements(), " elements differ:", report);
}

}  // namespace weft::cases
