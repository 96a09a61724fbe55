// Per-device state that outlives steps: resources (variables, queues),
// found by (container, name). Every session of a process that uses a
// device shares its resources, as in TensorFlow. A resource reaches the
// ops that use it through a resource-dtype handle tensor.
#ifndef WEFT_CORE_RUNTIME_RESOURCE_MGR_H_
#define WEFT_CORE_RUNTIME_RESOURCE_MGR_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>

#include "core/tensor/tensor.h"

namespace weft::runtime {

// State owned by a device's resource manager.
class Resource {
 public:
  virtual ~Resource() = default;
  // "variable", "FIFO queue", ...: for messages.
  virtual std::string_view kind() const = 0;
  virtual const std::string& name() const = 0;
};

class Variable : public Resource {
 public:
  Variable(std::string name, DType dtype, Shape declared_shape)
      : name_(std::move(name)), dtype_(dtype), declared_shape_(std::move(declared_shape)) {}

  std::string_view kind() const override { return "variable"; }
  const std::string& name() const override { return name_; }
  DType dtype() const { return dtype_; }
  const Shape& declared_shape() const { return declared_shape_; }

  // Readers take the lock shared, in-place updates exclusive.
  std::shared_mutex& mutex() { return mutex_; }
  // Under the lock.
  bool initialized() const { return value_.valid(); }
  const Tensor& value() const { return value_; }
  void set_value(Tensor value) { value_ = std::move(value); }

 private:
  std::string name_;
  DType dtype_;
  Shape declared_shape_;
  std::shared_mutex mutex_;
  Tensor value_;
};

class ResourceMgr {
 public:
  // The variable (container, name), created on first use. A second use with
  // another dtype or an incompatible shape, or a name held by another kind
  // of resource, is an error naming both.
  Expected<std::shared_ptr<Variable>> LookupOrCreate(const std::string& container, const std::string& name, DType dtype,
                                                     const Shape& shape);

  // The resource (container, name) of type T, made by |create| on first
  // use. A resource of that name that is not a T is an error naming both
  // kinds; |check| (optional) vets an existing T against what the caller
  // asks for, returning an error that says how they differ.
  template <class T>
  Expected<std::shared_ptr<T>> LookupOrCreate(const std::string& container, const std::string& name,
                                              std::string_view kind,
                                              const std::function<Expected<std::shared_ptr<T>>()>& create,
                                              const std::function<Status(const T&)>& check = {});

  // Every variable, by "container/name" (for checkpoints and inspection).
  std::map<std::string, std::shared_ptr<Variable>> All() const;
  // Every resource of any kind, by "container/name".
  std::map<std::string, std::shared_ptr<Resource>> AllResources() const;
  // Drops every resource of |container| ("" is the default container).
  // Ops that still hold a handle keep theirs alive.
  void Clear(const std::string& container);

 private:
  using Key = std::pair<std::string, std::string>;
  // Under |mutex_|: the existing resource, or the new one |create| makes.
  Expected<std::shared_ptr<Resource>> FindOrInsert(const Key& key,
                                                   const std::function<Expected<std::shared_ptr<Resource>>()>& create);

  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<Resource>> resources_;
};

// A resource-dtype tensor: a host scalar that keeps its resource alive.
Tensor MakeResourceHandle(std::shared_ptr<Resource> resource);
// The resource behind a handle tensor (nullptr if it holds none).
Resource* HandleResource(const Tensor& handle);
// The variable behind a handle tensor (nullptr if it holds none or another
// kind of resource).
Variable* HandleVariable(const Tensor& handle);

// --- Implementation ---------------------------------------------------------

template <class T>
Expected<std::shared_ptr<T>> ResourceMgr::LookupOrCreate(const std::string& container, const std::string& name,
                                                         std::string_view kind,
                                                         const std::function<Expected<std::shared_ptr<T>>()>& create,
                                                         const std::function<Status(const T&)>& check) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<Resource> found,
                        FindOrInsert({container, name}, [&]() -> Expected<std::shared_ptr<Resource>> {
                          WEFT_ASSIGN_OR_RETURN(std::shared_ptr<T> made, create());
                          return std::shared_ptr<Resource>(std::move(made));
                        }));
  auto typed = std::dynamic_pointer_cast<T>(found);
  if (typed == nullptr) {
    return InvalidArgumentError("resource ", Quote(name), " exists as a ", found->kind(), "; it cannot be used as a ",
                                kind);
  }
  if (check) WEFT_RETURN_IF_ERROR(check(*typed));
  return typed;
}

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_RESOURCE_MGR_H_
