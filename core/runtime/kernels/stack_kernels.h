// The runtime's kernels of the stack ops (core/ops/data_flow_ops.cc):
// Stack, StackPush and StackPop. A stack saves the forward values of a
// loop's iterations, one per index, for the loop's gradient to read back
// in reverse; it lives for one step. The bookkeeping is in host memory
// and the elements are kept as they arrive (no copy), so the ops run on
// every device.
#ifndef WEFT_CORE_RUNTIME_STACK_KERNELS_H_
#define WEFT_CORE_RUNTIME_STACK_KERNELS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/runtime/op_kernel.h"
#include "core/runtime/resource_mgr.h"

namespace weft::runtime {

// Tensors of one dtype saved under int64 indices. Thread-safe.
class StackResource : public Resource {
 public:
  StackResource(std::string name, DType elem_type) : name_(std::move(name)), elem_type_(elem_type) {}

  std::string_view kind() const override { return "stack"; }
  const std::string& name() const override { return name_; }
  DType elem_type() const { return elem_type_; }

  // Saves |elem| under |index|. An error when its dtype is not the stack's
  // or the index already holds an element.
  Status Push(int64_t index, Tensor elem);
  // Removes and returns the element under |index|; an error naming the
  // stack and the index when there is none.
  Expected<Tensor> Pop(int64_t index);
  int64_t size() const;

 private:
  std::string name_;
  DType elem_type_;
  mutable std::mutex mutex_;
  std::map<int64_t, Tensor> elements_;
};

// Whether |op| is one of the stack ops.
bool IsStackOp(std::string_view op);

// The kernel of stack op |node|.
Expected<std::unique_ptr<OpKernel>> CreateStackKernel(const Graph::Node& node);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_STACK_KERNELS_H_
