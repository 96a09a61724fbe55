// Per-device state that outlives steps: variables, found by (container,
// name). Every session of a process that uses a device shares its
// variables, as in TensorFlow.
#ifndef WEFT_CORE_RUNTIME_RESOURCE_MGR_H_
#define WEFT_CORE_RUNTIME_RESOURCE_MGR_H_

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include "core/tensor/tensor.h"

namespace weft::runtime {

class Variable {
 public:
  Variable(std::string name, DType dtype, Shape declared_shape)
      : name_(std::move(name)), dtype_(dtype), declared_shape_(std::move(declared_shape)) {}

  const std::string& name() const { return name_; }
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
  // another dtype or an incompatible shape is an error naming both.
  Expected<std::shared_ptr<Variable>> LookupOrCreate(const std::string& container, const std::string& name,
                                                     DType dtype, const Shape& shape);
  // Every variable, by "container/name" (for checkpoints and inspection).
  std::map<std::string, std::shared_ptr<Variable>> All() const;
  // Drops every variable of |container| ("" is the default container).
  void Clear(const std::string& container);

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Variable>> variables_;
};

// A resource-dtype tensor: a host scalar that keeps its variable alive.
Tensor MakeResourceHandle(std::shared_ptr<Variable> variable);
// The variable behind a resource tensor (nullptr if it holds none).
Variable* HandleVariable(const Tensor& handle);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_RESOURCE_MGR_H_
