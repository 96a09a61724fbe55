#include "core/runtime/resource_mgr.h"

namespace weft::runtime {
namespace {

// Holds a pointer to the resource as the element, and a reference to keep
// the resource alive as long as the handle tensor lives.
class HandleBuffer : public Buffer {
 public:
  explicit HandleBuffer(std::shared_ptr<Resource> resource)
      : Buffer(&slot_, sizeof(slot_), nullptr, nullptr), resource_(std::move(resource)), slot_(resource_.get()) {}

 private:
  std::shared_ptr<Resource> resource_;
  Resource* slot_;
};

std::string Path(const std::pair<std::string, std::string>& key) {
  return key.first.empty() ? key.second : key.first + "/" + key.second;
}

}  // namespace

Expected<std::shared_ptr<Resource>> ResourceMgr::FindOrInsert(
    const Key& key, const std::function<Expected<std::shared_ptr<Resource>>()>& create) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = resources_.find(key);
  if (it != resources_.end()) return it->second;
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<Resource> made, create());
  resources_.emplace(key, made);
  return made;
}

Expected<std::shared_ptr<Variable>> ResourceMgr::LookupOrCreate(const std::string& container, const std::string& name,
                                                                DType dtype, const Shape& shape) {
  return LookupOrCreate<Variable>(
      container, name, "variable",
      [&]() -> Expected<std::shared_ptr<Variable>> { return std::make_shared<Variable>(name, dtype, shape); },
      [&](const Variable& v) -> Status {
        if (v.dtype() != dtype || !v.declared_shape().IsCompatibleWith(shape)) {
          return InvalidArgumentError("variable ", Quote(name), " exists as ", DTypeName(v.dtype()),
                                      v.declared_shape().ToString(), "; it cannot be used as ", DTypeName(dtype),
                                      shape.ToString());
        }
        return Status();
      });
}

std::map<std::string, std::shared_ptr<Variable>> ResourceMgr::All() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, std::shared_ptr<Variable>> out;
  for (const auto& [key, resource] : resources_) {
    if (auto variable = std::dynamic_pointer_cast<Variable>(resource)) out[Path(key)] = std::move(variable);
  }
  return out;
}

std::map<std::string, std::shared_ptr<Resource>> ResourceMgr::AllResources() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<std::string, std::shared_ptr<Resource>> out;
  for (const auto& [key, resource] : resources_) out[Path(key)] = resource;
  return out;
}

void ResourceMgr::Clear(const std::string& container) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = resources_.begin(); it != resources_.end();) {
    it = it->first.first == container ? resources_.erase(it) : std::next(it);
  }
}

Tensor MakeResourceHandle(std::shared_ptr<Resource> resource) {
  return Tensor(DType::kResource, Shape{}, std::make_shared<HandleBuffer>(std::move(resource)));
}

Resource* HandleResource(const Tensor& handle) {
  if (handle.dtype() != DType::kResource || handle.raw_data() == nullptr) return nullptr;
  return *handle.data<Resource*>();
}

Variable* HandleVariable(const Tensor& handle) { return dynamic_cast<Variable*>(HandleResource(handle)); }

}  // namespace weft::runtime
