// What an op's shape function sees: the input dtypes and (partial) shapes,
// the values of constant inputs, and the node's attrs (defaults applied and
// types already checked). It sets the output shapes; output dtypes follow
// from the op's signature.
//
//   Status MatMulShape(InferenceContext& c) {
//     const Shape& a = c.input_shape(0);
//     ...
//     if (inner_a != inner_b) return c.Error("inner dimensions differ: ", ...);
//     c.set_output(0, Shape{m, n});
//     return Status();
//   }
//
// Errors are prefixed with the node and op by the caller:
// "node 'dense1/matmul' (MatMul): inner dimensions differ: [128,784] x [512,10]".
#ifndef WEFT_CORE_GRAPH_SHAPE_INFERENCE_H_
#define WEFT_CORE_GRAPH_SHAPE_INFERENCE_H_

#include <vector>

#include "core/graph/attr_value.h"
#include "core/graph/op_def.h"

namespace weft {

class InferenceContext {
 public:
  InferenceContext(const OpDef& op, const AttrMap& attrs, std::vector<DType> input_types,
                   std::vector<Shape> input_shapes, std::vector<const Tensor*> input_values, int num_outputs)
      : op_(op),
        attrs_(attrs),
        input_types_(std::move(input_types)),
        input_shapes_(std::move(input_shapes)),
        input_values_(std::move(input_values)),
        output_shapes_(static_cast<std::size_t>(num_outputs), Shape::UnknownRank()) {}

  const OpDef& op() const { return op_; }
  int num_inputs() const { return static_cast<int>(input_shapes_.size()); }
  int num_outputs() const { return static_cast<int>(output_shapes_.size()); }
  DType input_type(int i) const { return input_types_[static_cast<std::size_t>(i)]; }
  const Shape& input_shape(int i) const { return input_shapes_[static_cast<std::size_t>(i)]; }
  // The value of input |i| when it is known while building (a Const), or
  // nullptr.
  const Tensor* input_value(int i) const { return input_values_[static_cast<std::size_t>(i)]; }
  // For a resource input: the declared shape of the variable it refers to
  // (unknown rank when not known).
  const Shape& input_handle_shape(int i) const {
    static const Shape kUnknown = Shape::UnknownRank();
    return static_cast<std::size_t>(i) < input_handle_shapes_.size() ? input_handle_shapes_[static_cast<std::size_t>(i)]
                                                                     : kUnknown;
  }
  void set_input_handle_shapes(std::vector<Shape> shapes) { input_handle_shapes_ = std::move(shapes); }

  // Attr values. The graph checked every attr against the op's declaration,
  // so these only fail for a name the op does not declare (a bug).
  int64_t Int(std::string_view name) const { return Get(name).get<int64_t>(); }
  double Float(std::string_view name) const { return Get(name).get<double>(); }
  bool Bool(std::string_view name) const { return Get(name).get<bool>(); }
  const std::string& String(std::string_view name) const { return Get(name).get<std::string>(); }
  DType Type(std::string_view name) const { return Get(name).get<DType>(); }
  const Shape& ShapeAttr(std::string_view name) const { return Get(name).get<weft::Shape>(); }
  const std::vector<int64_t>& Ints(std::string_view name) const { return Get(name).get<std::vector<int64_t>>(); }
  const Tensor& TensorAttr(std::string_view name) const { return Get(name).get<Tensor>(); }
  bool Has(std::string_view name) const { return attrs_.find(name) != attrs_.end(); }
  const AttrValue& Get(std::string_view name) const { return attrs_.find(name)->second; }

  void set_output(int i, Shape shape) { output_shapes_[static_cast<std::size_t>(i)] = std::move(shape); }
  const std::vector<Shape>& output_shapes() const { return output_shapes_; }

  // An INVALID_ARGUMENT status with the concatenated message.
  template <class... Args>
  Status Error(const Args&... args) const {
    return InvalidArgumentError(args...);
  }

 private:
  const OpDef& op_;
  const AttrMap& attrs_;
  std::vector<DType> input_types_;
  std::vector<Shape> input_shapes_;
  std::vector<const Tensor*> input_values_;
  std::vector<Shape> input_handle_shapes_;
  std::vector<Shape> output_shapes_;
};

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_SHAPE_INFERENCE_H_
