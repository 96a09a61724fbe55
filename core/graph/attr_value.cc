#include "core/graph/attr_value.h"

namespace weft {

std::string_view AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kBool: return "bool";
    case AttrType::kString: return "string";
    case AttrType::kType: return "type";
    case AttrType::kShape: return "shape";
    case AttrType::kTensor: return "tensor";
    case AttrType::kFunc: return "func";
    case AttrType::kIntList: return "list(int)";
    case AttrType::kFloatList: return "list(float)";
    case AttrType::kBoolList: return "list(bool)";
    case AttrType::kStringList: return "list(string)";
    case AttrType::kTypeList: return "list(type)";
    case AttrType::kShapeList: return "list(shape)";
    case AttrType::kTensorList: return "list(tensor)";
    case AttrType::kFuncList: return "list(func)";
  }
  return "?";
}

namespace {

std::string One(const int64_t& v) { return StrCat(v); }
std::string One(const double& v) { return StrCat(v); }
std::string One(bool v) { return v ? "true" : "false"; }
std::string One(const std::string& v) { return Quote(v); }
std::string One(const DType& v) { return std::string(DTypeName(v)); }
std::string One(const Shape& v) { return v.ToString(); }
std::string One(const Tensor& v) { return v.DebugString(8); }
std::string One(const FuncName& v) { return StrCat("@", v.name); }

template <class T>
std::string List(const std::vector<T>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ", ";
    if constexpr (std::is_same_v<T, bool>) {
      out += One(static_cast<bool>(values[i]));
    } else {
      out += One(values[i]);
    }
  }
  return out + "]";
}

}  // namespace

std::string AttrValue::ToString() const {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::vector<int64_t>> || std::is_same_v<V, std::vector<double>> ||
                      std::is_same_v<V, std::vector<bool>> || std::is_same_v<V, std::vector<std::string>> ||
                      std::is_same_v<V, std::vector<DType>> || std::is_same_v<V, std::vector<Shape>> ||
                      std::is_same_v<V, std::vector<Tensor>> || std::is_same_v<V, std::vector<FuncName>>) {
          return List(v);
        } else {
          return One(v);
        }
      },
      value_);
}

bool operator==(const AttrValue& a, const AttrValue& b) {
  if (a.value_.index() != b.value_.index()) return false;
  return std::visit(
      [&b](const auto& x) -> bool {
        using V = std::decay_t<decltype(x)>;
        const V& y = std::get<V>(b.value_);
        if constexpr (std::is_same_v<V, Tensor>) {
          return x.BitwiseEquals(y);
        } else if constexpr (std::is_same_v<V, std::vector<Tensor>>) {
          if (x.size() != y.size()) return false;
          for (std::size_t i = 0; i < x.size(); ++i) {
            if (!x[i].BitwiseEquals(y[i])) return false;
          }
          return true;
        } else if constexpr (std::is_same_v<V, double>) {
          // Bitwise, so that NaN attrs round-trip as equal.
          return std::memcmp(&x, &y, sizeof x) == 0;
        } else {
          return x == y;
        }
      },
      a.value_);
}

}  // namespace weft
