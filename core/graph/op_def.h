// Op definitions: an op's inputs and outputs with their dtype constraints,
// its attrs with defaults, whether it is stateful, its shape function and a
// paragraph of documentation. Kernels do not live here: device plugins
// register those per (op, device type, dtypes).
//
// Ops are declared with a small signature language, as in TensorFlow:
//
//   OpDefBuilder("MatMul")
//       .Input("a: T").Input("b: T").Output("product: T")
//       .Attr("T: {f16, bf16, f32, f64, i32, i64}")
//       .Attr("transpose_a: bool = false").Attr("transpose_b: bool = false")
//       .Shape(MatMulShape)
//       .Doc("Matrix product of two rank-2 tensors ...");
//
// Arg forms: "x: T" (dtype from type attr T), "shape: i64" (fixed dtype),
// "values: N * T" (N tensors of dtype T), "components: Tcomponents" (one
// tensor per dtype of the list(type) attr Tcomponents). Attr forms: "T: type",
// "T: {f32, f64}", "N: int >= 1", "axis: int = -1", "eps: float = 1e-5",
// "padding: {'SAME', 'VALID'}", "strides: list(int) = [1, 1]",
// "value: tensor", "shape: shape", "keep_dims: bool = false".
// Named dtype sets: {numeric}, {float}, {int}, {index}, {all}.
#ifndef WEFT_CORE_GRAPH_OP_DEF_H_
#define WEFT_CORE_GRAPH_OP_DEF_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "core/graph/attr_value.h"

namespace weft {

struct ArgDef {
  std::string name;
  DType fixed_type = DType::kInvalid;  // "shape: i64"
  std::string type_attr;               // "x: T"
  std::string number_attr;             // "values: N * T"
  // "components: Tcomponents" where Tcomponents is a list(type) attr: one
  // tensor per entry of the list, each of that entry's dtype.
  std::string type_list_attr;
  bool is_list() const { return !number_attr.empty() || !type_list_attr.empty(); }
  // "x: T", "values: N * T", "shape: i64"
  std::string ToString() const;
};

struct AttrDef {
  std::string name;
  AttrType type = AttrType::kInt;
  std::optional<AttrValue> default_value;
  std::vector<DType> allowed_types;          // for type attrs; empty = any
  std::vector<std::string> allowed_strings;  // for string attrs; empty = any
  std::optional<int64_t> minimum;            // for int attrs
  // "T: {f32, f64}", "N: int >= 1", "transpose_a: bool = false"
  std::string ToString() const;
};

class InferenceContext;
using ShapeFn = std::function<Status(InferenceContext&)>;

struct OpDef {
  std::string name;
  std::vector<ArgDef> inputs;
  std::vector<ArgDef> outputs;
  std::vector<AttrDef> attrs;
  // Reads or writes state, so it is never pruned as a duplicate, folded or
  // reordered past its control dependencies.
  bool stateful = false;
  ShapeFn shape_fn;
  std::string doc;

  const AttrDef* FindAttr(std::string_view attr) const;
  // "MatMul(a: T, b: T) -> (product: T) with T: {f16, ...}, transpose_a: bool = false"
  std::string Signature() const;
};

class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string name);
  OpDefBuilder& Input(std::string_view spec);
  OpDefBuilder& Output(std::string_view spec);
  OpDefBuilder& Attr(std::string_view spec);
  OpDefBuilder& Stateful();
  OpDefBuilder& Shape(ShapeFn fn);
  OpDefBuilder& Doc(std::string doc);
  // The definition, or the first error in a spec (naming the op and spec).
  Expected<OpDef> Build() const;

 private:
  OpDef def_;
  std::vector<std::string> input_specs_, output_specs_, attr_specs_;
};

// Every op the core knows. Ops are registered by family (core/ops) when the
// registry is first used; nothing registers itself from a static
// constructor.
class OpRegistry {
 public:
  // The process-wide registry with every built-in op.
  static const OpRegistry& Global();

  // Adds |builder|'s op. A malformed definition or a duplicate name is an
  // error naming it.
  Status Register(const OpDefBuilder& builder);
  const OpDef* Find(std::string_view name) const;
  // All ops, sorted by name.
  std::vector<const OpDef*> All() const;
  std::size_t size() const { return ops_.size(); }

 private:
  std::unordered_map<std::string, std::unique_ptr<OpDef>> ops_;
};

// Parses a dtype set spec ("{f32, f64}", "{numeric}") — exposed for tests.
Expected<std::vector<DType>> ParseDTypeSet(std::string_view spec);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_OP_DEF_H_
