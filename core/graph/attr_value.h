// Attribute values of graph nodes: int, float, bool, string, dtype, shape,
// tensor, function name, and lists of each.
//
//   AttrMap attrs = {{"transpose_a", AttrValue(true)}, {"T", AttrValue(DType::kF32)}};
#ifndef WEFT_CORE_GRAPH_ATTR_VALUE_H_
#define WEFT_CORE_GRAPH_ATTR_VALUE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

namespace weft {

// A reference to a function of the graph's library.
struct FuncName {
  std::string name;
  friend bool operator==(const FuncName& a, const FuncName& b) { return a.name == b.name; }
};

enum class AttrType {
  kInt,
  kFloat,
  kBool,
  kString,
  kType,
  kShape,
  kTensor,
  kFunc,
  kIntList,
  kFloatList,
  kBoolList,
  kStringList,
  kTypeList,
  kShapeList,
  kTensorList,
  kFuncList,
};

// "int", "list(float)", ...
std::string_view AttrTypeName(AttrType type);

class AttrValue {
 public:
  using Storage = std::variant<int64_t, double, bool, std::string, DType, Shape, Tensor, FuncName, std::vector<int64_t>,
                               std::vector<double>, std::vector<bool>, std::vector<std::string>, std::vector<DType>,
                               std::vector<Shape>, std::vector<Tensor>, std::vector<FuncName>>;

  AttrValue() : value_(int64_t{0}) {}
  AttrValue(int64_t v) : value_(v) {}                              // NOLINT(google-explicit-constructor)
  AttrValue(int v) : value_(int64_t{v}) {}                         // NOLINT(google-explicit-constructor)
  AttrValue(double v) : value_(v) {}                               // NOLINT(google-explicit-constructor)
  AttrValue(float v) : value_(static_cast<double>(v)) {}           // NOLINT(google-explicit-constructor)
  AttrValue(bool v) : value_(v) {}                                 // NOLINT(google-explicit-constructor)
  AttrValue(std::string v) : value_(std::move(v)) {}               // NOLINT(google-explicit-constructor)
  AttrValue(const char* v) : value_(std::string(v)) {}             // NOLINT(google-explicit-constructor)
  AttrValue(DType v) : value_(v) {}                                // NOLINT(google-explicit-constructor)
  AttrValue(Shape v) : value_(std::move(v)) {}                     // NOLINT(google-explicit-constructor)
  AttrValue(Tensor v) : value_(std::move(v)) {}                    // NOLINT(google-explicit-constructor)
  AttrValue(FuncName v) : value_(std::move(v)) {}                  // NOLINT(google-explicit-constructor)
  AttrValue(std::vector<int64_t> v) : value_(std::move(v)) {}      // NOLINT
  AttrValue(std::vector<double> v) : value_(std::move(v)) {}       // NOLINT
  AttrValue(std::vector<bool> v) : value_(std::move(v)) {}         // NOLINT
  AttrValue(std::vector<std::string> v) : value_(std::move(v)) {}  // NOLINT
  AttrValue(std::vector<DType> v) : value_(std::move(v)) {}        // NOLINT
  AttrValue(std::vector<Shape> v) : value_(std::move(v)) {}        // NOLINT
  AttrValue(std::vector<Tensor> v) : value_(std::move(v)) {}       // NOLINT
  AttrValue(std::vector<FuncName> v) : value_(std::move(v)) {}     // NOLINT

  AttrType type() const { return static_cast<AttrType>(value_.index()); }
  const Storage& storage() const { return value_; }

  template <class T>
  bool holds() const {
    return std::holds_alternative<T>(value_);
  }
  template <class T>
  const T& get() const {
    return std::get<T>(value_);
  }

  // How the value reads in messages and `weft inspect`: 3, 0.5, true,
  // "SAME", f32, [2,3], f32[2] {1, 2}, [1, 2].
  std::string ToString() const;

  // Equal values (tensors compared bitwise).
  friend bool operator==(const AttrValue& a, const AttrValue& b);

 private:
  Storage value_;
};

using AttrMap = std::map<std::string, AttrValue, std::less<>>;

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_ATTR_VALUE_H_
