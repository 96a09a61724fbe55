#include "core/runtime/kernels/stack_kernels.h"

#include <algorithm>
#include <array>

namespace weft::runtime {

Status StackResource::Push(int64_t index, Tensor elem) {
  if (elem.dtype() != elem_type_) {
    return InvalidArgumentError("stack '", name_, "' holds ", DTypeName(elem_type_), " elements; cannot push a ",
                                DTypeName(elem.dtype()), " tensor under index ", index);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = elements_.emplace(index, std::move(elem));
  if (!inserted) {
    return InvalidArgumentError("stack '", name_, "' already holds an element under index ", index,
                                "; each index is pushed once (one per loop iteration)");
  }
  return Status();
}

Expected<Tensor> StackResource::Pop(int64_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = elements_.find(index);
  if (it == elements_.end()) {
    if (elements_.empty())
      return NotFoundError("stack '", name_, "' has no element under index ", index, "; it is empty");
    return NotFoundError("stack '", name_, "' has no element under index ", index, "; it holds ", elements_.size(),
                         " element", elements_.size() == 1 ? "" : "s", ", indices ", elements_.begin()->first, " to ",
                         elements_.rbegin()->first);
  }
  Tensor elem = std::move(it->second);
  elements_.erase(it);
  return elem;
}

int64_t StackResource::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(elements_.size());
}

namespace {

const AttrValue& Attr(const Graph::Node& node, const char* name) { return node.def.attrs.find(name)->second; }

// The stack behind resource input 0.
Expected<StackResource*> InputStack(const OpKernelContext& ctx) {
  Resource* resource = HandleResource(ctx.input(0));
  if (resource == nullptr) return InvalidArgumentError("input 0 is not a resource handle");
  auto* stack = dynamic_cast<StackResource*>(resource);
  if (stack == nullptr) {
    return InvalidArgumentError("input 0 is a handle to the ", resource->kind(), " '", resource->name(),
                                "', not to a stack");
  }
  return stack;
}

// The i64 scalar index of input 1, read on the host.
Expected<int64_t> InputIndex(const OpKernelContext& ctx) {
  WEFT_ASSIGN_OR_RETURN(Tensor index, ctx.device().CopyToHost(ctx.input(1)));
  if (index.dtype() != DType::kI64 || index.rank() != 0) {
    return InvalidArgumentError("index must be an i64 scalar; got ", index.TypeString());
  }
  return index.scalar<int64_t>();
}

// A new, empty stack every time it runs, so each step (and each run of an
// enclosing loop's gradient) has its own.
class StackKernel : public OpKernel {
 public:
  StackKernel(std::string name, DType elem_type) : name_(std::move(name)), elem_type_(elem_type) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, MakeResourceHandle(std::make_shared<StackResource>(name_, elem_type_)));
    return Status();
  }

 private:
  std::string name_;
  DType elem_type_;
};

class StackPushKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(StackResource * stack, InputStack(ctx));
    WEFT_ASSIGN_OR_RETURN(int64_t index, InputIndex(ctx));
    WEFT_RETURN_IF_ERROR(stack->Push(index, ctx.input(2)));
    ctx.set_output(0, ctx.input(2));
    return Status();
  }
};

class StackPopKernel : public OpKernel {
 public:
  StackPopKernel(DType elem_type, std::vector<Shape> elem_shape)
      : elem_type_(elem_type), elem_shape_(std::move(elem_shape)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(StackResource * stack, InputStack(ctx));
    if (stack->elem_type() != elem_type_) {
      return InvalidArgumentError("stack '", stack->name(), "' holds ", DTypeName(stack->elem_type()),
                                  " elements but this StackPop has elem_type ", DTypeName(elem_type_));
    }
    WEFT_ASSIGN_OR_RETURN(int64_t index, InputIndex(ctx));
    WEFT_ASSIGN_OR_RETURN(Tensor elem, stack->Pop(index));
    if (!elem_shape_.empty() && !elem_shape_[0].IsCompatibleWith(elem.shape())) {
      return InvalidArgumentError("stack '", stack->name(), "' holds a ", elem.TypeString(), " element under index ",
                                  index, " but this StackPop declares elem_shape ", elem_shape_[0].ToString());
    }
    ctx.set_output(0, std::move(elem));
    return Status();
  }

 private:
  DType elem_type_;
  std::vector<Shape> elem_shape_;
};

constexpr std::array<std::string_view, 3> kStackOps = {"Stack", "StackPop", "StackPush"};

}  // namespace

bool IsStackOp(std::string_view op) { return std::find(kStackOps.begin(), kStackOps.end(), op) != kStackOps.end(); }

Expected<std::unique_ptr<OpKernel>> CreateStackKernel(const Graph::Node& node) {
  const std::string& op = node.op_name();
  if (op == "Stack") {
    std::string name = Attr(node, "stack_name").get<std::string>();
    if (name.empty()) name = node.name();
    return std::unique_ptr<OpKernel>(new StackKernel(std::move(name), Attr(node, "elem_type").get<DType>()));
  }
  if (op == "StackPush") return std::unique_ptr<OpKernel>(new StackPushKernel());
  if (op == "StackPop") {
    auto shape = node.def.attrs.find("elem_shape");
    std::vector<Shape> elem_shape;
    if (shape != node.def.attrs.end()) elem_shape = shape->second.get<std::vector<Shape>>();
    return std::unique_ptr<OpKernel>(new StackPopKernel(Attr(node, "elem_type").get<DType>(), std::move(elem_shape)));
  }
  return InternalError("no stack kernel for ", op);
}

}  // namespace weft::runtime
