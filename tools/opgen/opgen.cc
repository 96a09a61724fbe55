// Writes core/ops/generated_ops.h: a typed C++ wrapper for every op in the
// registry, so graph-building code reads like the math it builds and a
// misspelt attr is a compile error:
//
//   Output y = ops::MatMul(b, x, w, {.transpose_b = true});
//   Output p = ops::MaxPool(b, y, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
//
// Inputs come first (a list input is a std::vector<Output>), then the attrs
// that have no default and cannot be inferred from the inputs, then a
// struct of the attrs that have defaults, then an optional node name. Type
// attrs that an input determines ("T") and list lengths ("N") are inferred.
#include <iostream>
#include <set>
#include <string>

#include "core/graph/op_def.h"

namespace weft {
namespace {

const std::set<std::string> kKeywords = {"default",  "int",     "float",  "bool",     "char", "new",
                                         "delete",   "class",   "struct", "template", "this", "operator",
                                         "register", "builder", "attrs",  "name"};

std::string Param(const std::string& name) { return kKeywords.count(name) ? name + "_" : name; }

std::string CppType(AttrType type) {
  switch (type) {
    case AttrType::kInt: return "int64_t";
    case AttrType::kFloat: return "double";
    case AttrType::kBool: return "bool";
    case AttrType::kString: return "std::string";
    case AttrType::kType: return "DType";
    case AttrType::kShape: return "weft::Shape";  // the op Shape hides the type
    case AttrType::kTensor: return "Tensor";
    case AttrType::kFunc: return "FuncName";
    case AttrType::kIntList: return "std::vector<int64_t>";
    case AttrType::kFloatList: return "std::vector<double>";
    case AttrType::kBoolList: return "std::vector<bool>";
    case AttrType::kStringList: return "std::vector<std::string>";
    case AttrType::kTypeList: return "std::vector<DType>";
    case AttrType::kShapeList: return "std::vector<weft::Shape>";
    case AttrType::kTensorList: return "std::vector<Tensor>";
    case AttrType::kFuncList: return "std::vector<FuncName>";
  }
  return "int64_t";
}

std::string DTypeEnumerator(DType d) {
  switch (d) {
    case DType::kF32: return "DType::kF32";
    case DType::kF64: return "DType::kF64";
    case DType::kF16: return "DType::kF16";
    case DType::kBF16: return "DType::kBF16";
    case DType::kI8: return "DType::kI8";
    case DType::kI16: return "DType::kI16";
    case DType::kI32: return "DType::kI32";
    case DType::kI64: return "DType::kI64";
    case DType::kU8: return "DType::kU8";
    case DType::kBool: return "DType::kBool";
    case DType::kString: return "DType::kString";
    case DType::kResource: return "DType::kResource";
    default: return "DType::kInvalid";
  }
}

std::string DefaultExpr(const AttrValue& v) {
  switch (v.type()) {
    case AttrType::kInt: return StrCat(v.get<int64_t>());
    case AttrType::kFloat: return StrCat(v.get<double>());
    case AttrType::kBool: return v.get<bool>() ? "true" : "false";
    case AttrType::kString: return Quote(v.get<std::string>());
    case AttrType::kType: return DTypeEnumerator(v.get<DType>());
    case AttrType::kIntList: return StrCat("{", StrJoin(v.get<std::vector<int64_t>>(), ", "), "}");
    case AttrType::kFloatList: return StrCat("{", StrJoin(v.get<std::vector<double>>(), ", "), "}");
    default: return "{}";
  }
}

// The first sentence of the op's documentation, for the wrapper's comment.
std::string Summary(const std::string& doc) {
  const auto end = doc.find(". ");
  return end == std::string::npos ? doc : doc.substr(0, end + 1);
}

void Emit(const OpDef& op) {
  std::set<std::string> inferred;
  for (const ArgDef& arg : op.inputs) {
    if (!arg.type_attr.empty()) inferred.insert(arg.type_attr);
    if (!arg.type_list_attr.empty()) inferred.insert(arg.type_list_attr);
    if (!arg.number_attr.empty()) inferred.insert(arg.number_attr);
  }
  std::vector<const AttrDef*> required, optional;
  for (const AttrDef& a : op.attrs) {
    if (inferred.count(a.name)) continue;
    (a.default_value ? optional : required).push_back(&a);
  }
  const bool multi = op.outputs.size() > 1 || (op.outputs.size() == 1 && op.outputs[0].is_list());
  std::cout << "// " << op.Signature() << "\n// " << Summary(op.doc) << "\n";
  if (!optional.empty()) {
    std::cout << "struct " << op.name << "Attrs {\n";
    for (const AttrDef* a : optional) {
      std::cout << "  " << CppType(a->type) << " " << a->name << " = " << DefaultExpr(*a->default_value) << ";\n";
    }
    std::cout << "};\n";
  }
  std::cout << "inline " << (multi ? "std::vector<Output>" : "Output") << " " << op.name << "(GraphBuilder& builder";
  for (const ArgDef& arg : op.inputs) {
    std::cout << ", " << (arg.is_list() ? "const std::vector<Output>& " : "Output ") << Param(arg.name);
  }
  for (const AttrDef* a : required) std::cout << ", " << CppType(a->type) << " " << Param(a->name);
  if (!optional.empty()) std::cout << ", const " << op.name << "Attrs& attrs = {}";
  // Locals are prefixed so no arg name can shadow them.
  std::cout << ", std::string_view name = {}) {\n  std::vector<Output> weft_inputs;\n";
  for (const ArgDef& arg : op.inputs) {
    if (arg.is_list()) {
      std::cout << "  weft_inputs.insert(weft_inputs.end(), " << Param(arg.name) << ".begin(), " << Param(arg.name)
                << ".end());\n";
    } else {
      std::cout << "  weft_inputs.push_back(" << Param(arg.name) << ");\n";
    }
  }
  std::cout << "  AttrMap weft_attrs;\n";
  for (const AttrDef* a : required)
    std::cout << "  weft_attrs[\"" << a->name << "\"] = AttrValue(" << Param(a->name) << ");\n";
  for (const AttrDef* a : optional)
    std::cout << "  weft_attrs[\"" << a->name << "\"] = AttrValue(attrs." << a->name << ");\n";
  if (multi) {
    std::cout << "  return builder.AddNode(\"" << op.name << "\", weft_inputs, std::move(weft_attrs), name);\n}\n\n";
  } else {
    std::cout << "  return builder.Op(\"" << op.name << "\", weft_inputs, std::move(weft_attrs), name);\n}\n\n";
  }
}

}  // namespace
}  // namespace weft

int main() {
  std::cout << "// Generated by tools/opgen from the op registry; do not edit.\n"
               "// Typed wrappers for every op: see tools/opgen/opgen.cc.\n"
               "#ifndef WEFT_CORE_OPS_GENERATED_OPS_H_\n#define WEFT_CORE_OPS_GENERATED_OPS_H_\n\n"
               "#include <string>\n#include <string_view>\n#include <vector>\n\n"
               "#include \"core/graph/builder.h\"\n\nnamespace weft::ops {\n\n";
  for (const weft::OpDef* op : weft::OpRegistry::Global().All()) {
    if (op->name[0] == '_') continue;
    weft::Emit(*op);
  }
  std::cout << "}  // namespace weft::ops\n\n#endif  // WEFT_CORE_OPS_GENERATED_OPS_H_\n";
  return 0;
}
