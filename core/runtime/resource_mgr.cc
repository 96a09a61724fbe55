#include "core/runtime/resource_mgr.h"

namespace weft::runtime {
namespace {

// Holds a pointer to the variable as the element, and a reference to keep
// the variable alive as long as the handle tensor lives.
class HandleBuffer : public Buffer {
 public:
  explicit HandleBuffer(std::shared_ptr<Variable> variable)
      : Buffer(&slot_, sizeof(slot_), nullptr, nullptr), variable_(std::move(variable)), slot_(variable_.get()) {}

 private:
  std::shared_ptr<Variable> variable_;
  Variable* slot_;
};

}  // namespace

Expected<std::shared_ptr<Variable>> ResourceMgr::LookupOrCreate(const std::string& container, const std::string& name,
                                                                DType dtype, const Shape& shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(container, name);
  auto it = variables_.find(key);
  if (it == variables_.end()) {
    auto variable = std::make_shared<Variable>(name, dtype, shape);
    variables_.emplace(std::move(key), variable);
    return variable;
  }
  const Variable& v = *it->second;
  if (v.dtype() != dtype || !v.declared_shape().IsCompatibleWith(shape)) {
    return InvalidArgumentError("variable ", Quote(name), " exists as ", DTypeName(v.dtype()),
                                v.declared_shape().ToString(), "; it cannot be used as ", DTypeName(dtype),
                                shape.ToString());
  }
  return it->second;
}

std::map<std::string, std::shared_ptr<Variable>> ResourceMgr::All() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, std::shared_ptr<Variable>> out;
  for (const auto& [key, variable] : variables_) {
    out[key.first.empty() ? key.second : key.first + "/" + key.second] = variable;
  }
  return out;
}

void ResourceMgr::Clear(const std::string& container) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = variables_.begin(); it != variables_.end();) {
    it = it->first.first == container ? variables_.erase(it) : std::next(it);
  }
}

Tensor MakeResourceHandle(std::shared_ptr<Variable> variable) {
  return Tensor(DType::kResource, Shape{}, std::make_shared<HandleBuffer>(std::move(variable)));
}

Variable* HandleVariable(const Tensor& handle) {
  if (handle.dtype() != DType::kResource || handle.raw_data() == nullptr) return nullptr;
  return *handle.data<Variable*>();
}

}  // namespace weft::runtime
