#include "core/runtime/op_kernel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "core/ops/shape_fns.h"
#include "core/plugin/host_services.h"
#include "core/runtime/kernels/builtin_kernels.h"
#include "core/tensor/borrowed_buffer.h"
#include "weft/sdk/struct.h"

// The ABI's opaque kernel handles are the runtime's own objects.
struct weft_kernel_context_s {};
struct weft_kernel_init_s {};

namespace weft::runtime {
namespace {

// What a plugin kernel sees while it is created or queried.
struct KernelInit {
  const Graph* graph;
  const Graph::Node* node;
  const RuntimeDevice* device;
};

const weft_kernel_init_t* AsC(const KernelInit* init) { return reinterpret_cast<const weft_kernel_init_t*>(init); }
const KernelInit* FromC(const weft_kernel_init_t* init) { return reinterpret_cast<const KernelInit*>(init); }
weft_kernel_context_t* AsC(OpKernelContext* ctx) { return reinterpret_cast<weft_kernel_context_t*>(ctx); }
OpKernelContext* FromC(weft_kernel_context_t* ctx) { return reinterpret_cast<OpKernelContext*>(ctx); }
const OpKernelContext* FromC(const weft_kernel_context_t* ctx) { return reinterpret_cast<const OpKernelContext*>(ctx); }

weft_status_t Fail(const Status& status) { return plugin::MakeStatus(status); }

void FillView(const Tensor& t, weft_tensor_t* out) {
  weft_tensor_t view{};
  view.struct_size = sizeof view;
  view.dtype = static_cast<weft_dtype_t>(t.dtype());
  view.rank = t.rank();
  view.dims = t.rank() > 0 ? t.shape().dims().data() : nullptr;
  view.num_elements = t.num_elements();
  view.byte_size = t.byte_size();
  view.buffer = t.buffer() != nullptr ? t.buffer()->device_buffer() : nullptr;
  view.offset = t.offset();
  view.data = t.raw_data();
  sdk::FillOut(out, view);
}

Expected<const AttrValue*> FindAttr(const weft_kernel_init_t* init, const char* name) {
  const KernelInit* k = FromC(init);
  if (name == nullptr) return InvalidArgumentError(k->node->Describe(), ": attr name is NULL");
  auto it = k->node->def.attrs.find(name);
  if (it == k->node->def.attrs.end()) return NotFoundError(k->node->Describe(), " has no attr ", Quote(name));
  return &it->second;
}

template <class T>
Expected<const T*> TypedAttr(const weft_kernel_init_t* init, const char* name, std::string_view type) {
  WEFT_ASSIGN_OR_RETURN(const AttrValue* value, FindAttr(init, name));
  if (!value->holds<T>()) {
    return InvalidArgumentError(FromC(init)->node->Describe(), ": attr ", Quote(name), " is ",
                                AttrTypeName(value->type()), ", not ", type);
  }
  return &value->get<T>();
}

// --- weft_kernel_api_t
// ---------------------------------------------------------

const char* InitNodeName(const weft_kernel_init_t* init) { return FromC(init)->node->name().c_str(); }
const char* InitOp(const weft_kernel_init_t* init) { return FromC(init)->node->op_name().c_str(); }
int32_t InitNumInputs(const weft_kernel_init_t* init) { return static_cast<int32_t>(FromC(init)->node->inputs.size()); }
int32_t InitNumOutputs(const weft_kernel_init_t* init) { return FromC(init)->node->num_outputs(); }
weft_dtype_t InitInputDtype(const weft_kernel_init_t* init, int32_t i) {
  const auto& types = FromC(init)->node->input_types;
  return i >= 0 && static_cast<std::size_t>(i) < types.size()
             ? static_cast<weft_dtype_t>(types[static_cast<std::size_t>(i)])
             : WEFT_DTYPE_INVALID;
}
weft_dtype_t InitOutputDtype(const weft_kernel_init_t* init, int32_t i) {
  const auto& types = FromC(init)->node->output_types;
  return i >= 0 && static_cast<std::size_t>(i) < types.size()
             ? static_cast<weft_dtype_t>(types[static_cast<std::size_t>(i)])
             : WEFT_DTYPE_INVALID;
}
weft_status_t InitInputShape(const weft_kernel_init_t* init, int32_t i, int32_t* out_rank, const int64_t** out_dims) {
  const KernelInit* k = FromC(init);
  if (i < 0 || static_cast<std::size_t>(i) >= k->node->inputs.size()) {
    return Fail(NotFoundError(k->node->Describe(), " has no input ", i));
  }
  const Endpoint& src = k->node->inputs[static_cast<std::size_t>(i)];
  const Shape& shape = k->graph->node(src.node).output_shapes[static_cast<std::size_t>(src.index)];
  *out_rank = shape.rank();
  *out_dims = shape.rank() > 0 ? shape.dims().data() : nullptr;
  return nullptr;
}

weft_status_t AttrInt(const weft_kernel_init_t* init, const char* name, int64_t* out) {
  auto v = TypedAttr<int64_t>(init, name, "an int");
  if (!v.ok()) return Fail(v.status());
  *out = **v;
  return nullptr;
}
weft_status_t AttrFloat(const weft_kernel_init_t* init, const char* name, double* out) {
  auto v = TypedAttr<double>(init, name, "a float");
  if (!v.ok()) return Fail(v.status());
  *out = **v;
  return nullptr;
}
weft_status_t AttrBool(const weft_kernel_init_t* init, const char* name, weft_bool_t* out) {
  auto v = TypedAttr<bool>(init, name, "a bool");
  if (!v.ok()) return Fail(v.status());
  *out = **v ? 1 : 0;
  return nullptr;
}
weft_status_t AttrDtype(const weft_kernel_init_t* init, const char* name, weft_dtype_t* out) {
  auto v = TypedAttr<DType>(init, name, "a type");
  if (!v.ok()) return Fail(v.status());
  *out = static_cast<weft_dtype_t>(**v);
  return nullptr;
}
weft_status_t AttrString(const weft_kernel_init_t* init, const char* name, const char** out, size_t* size) {
  auto v = TypedAttr<std::string>(init, name, "a string");
  if (!v.ok()) return Fail(v.status());
  *out = (*v)->data();
  *size = (*v)->size();
  return nullptr;
}
weft_status_t AttrShape(const weft_kernel_init_t* init, const char* name, int32_t* rank, const int64_t** dims) {
  auto v = TypedAttr<Shape>(init, name, "a shape");
  if (!v.ok()) return Fail(v.status());
  *rank = (*v)->rank();
  *dims = (*v)->rank() > 0 ? (*v)->dims().data() : nullptr;
  return nullptr;
}
weft_status_t AttrIntList(const weft_kernel_init_t* init, const char* name, const int64_t** out, size_t* count) {
  auto v = TypedAttr<std::vector<int64_t>>(init, name, "a list(int)");
  if (!v.ok()) return Fail(v.status());
  *out = (*v)->data();
  *count = (*v)->size();
  return nullptr;
}
weft_status_t AttrFloatList(const weft_kernel_init_t* init, const char* name, const double** out, size_t* count) {
  auto v = TypedAttr<std::vector<double>>(init, name, "a list(float)");
  if (!v.ok()) return Fail(v.status());
  *out = (*v)->data();
  *count = (*v)->size();
  return nullptr;
}
weft_status_t AttrTensor(const weft_kernel_init_t* init, const char* name, weft_tensor_t* out) {
  auto v = TypedAttr<Tensor>(init, name, "a tensor");
  if (!v.ok()) return Fail(v.status());
  FillView(**v, out);
  return nullptr;
}

const char* NodeName(const weft_kernel_context_t* ctx) { return FromC(ctx)->node().name().c_str(); }
int32_t NumInputs(const weft_kernel_context_t* ctx) { return FromC(ctx)->num_inputs(); }
int32_t NumOutputs(const weft_kernel_context_t* ctx) { return FromC(ctx)->num_outputs(); }

weft_status_t Input(weft_kernel_context_t* c, int32_t i, weft_tensor_t* out) {
  OpKernelContext* ctx = FromC(c);
  if (i < 0 || i >= ctx->num_inputs() || out == nullptr) {
    return Fail(InvalidArgumentError("input ", i, " of ", ctx->node().Describe(), " does not exist (it has ",
                                     ctx->num_inputs(), ")"));
  }
  FillView(ctx->input(i), out);
  return nullptr;
}

weft_status_t AllocateOutput(weft_kernel_context_t* c, int32_t i, int32_t rank, const int64_t* dims,
                             weft_tensor_t* out) {
  OpKernelContext* ctx = FromC(c);
  if (i < 0 || i >= ctx->num_outputs()) {
    return Fail(InvalidArgumentError("output ", i, " of ", ctx->node().Describe(), " does not exist"));
  }
  if (rank < 0 || rank > WEFT_MAX_RANK || (rank > 0 && dims == nullptr)) {
    return Fail(InvalidArgumentError("allocate_output: bad rank ", rank));
  }
  auto t = ctx->AllocateOutput(i, Shape(std::vector<int64_t>(dims, dims + rank)));
  if (!t.ok()) return Fail(t.status());
  if (out != nullptr) FillView(**t, out);
  return nullptr;
}

weft_status_t ForwardInputReshaped(weft_kernel_context_t* c, int32_t in, int32_t out, int32_t rank,
                                   const int64_t* dims) {
  OpKernelContext* ctx = FromC(c);
  if (in < 0 || in >= ctx->num_inputs() || out < 0 || out >= ctx->num_outputs()) {
    return Fail(InvalidArgumentError("forward_input: no input ", in, " or output ", out));
  }
  const Tensor& source = ctx->input(in);
  if (rank < 0) {
    ctx->set_output(out, source);
    return nullptr;
  }
  auto reshaped = source.Reshaped(Shape(std::vector<int64_t>(dims, dims + rank)));
  if (!reshaped.ok()) return Fail(reshaped.status());
  ctx->set_output(out, *reshaped);
  return nullptr;
}

weft_status_t ForwardInput(weft_kernel_context_t* c, int32_t in, int32_t out) {
  return ForwardInputReshaped(c, in, out, -1, nullptr);
}

weft_status_t AllocateTemp(weft_kernel_context_t* c, weft_dtype_t dtype, int32_t rank, const int64_t* dims,
                           weft_tensor_t* out) {
  OpKernelContext* ctx = FromC(c);
  if (rank < 0 || rank > WEFT_MAX_RANK || (rank > 0 && dims == nullptr)) {
    return Fail(InvalidArgumentError("allocate_temp: bad rank ", rank));
  }
  auto t = ctx->AllocateTemp(static_cast<DType>(dtype), Shape(std::vector<int64_t>(dims, dims + rank)));
  if (!t.ok()) return Fail(t.status());
  FillView(**t, out);
  return nullptr;
}

weft_stream_t Stream(const weft_kernel_context_t* ctx) { return FromC(ctx)->device().stream(); }
int64_t StepId(const weft_kernel_context_t* ctx) { return FromC(ctx)->step().step_id; }
weft_bool_t IsCancelled(const weft_kernel_context_t* ctx) {
  return FromC(ctx)->step().cancelled.load(std::memory_order_relaxed) ? 1 : 0;
}

weft_status_t VariableLock(weft_kernel_context_t* c, int32_t i, weft_bool_t exclusive, weft_tensor_t* out) {
  auto value = FromC(c)->LockVariable(i, exclusive != 0);
  if (!value.ok()) return Fail(value.status());
  FillView(**value, out);
  return nullptr;
}

const char* VariableName(const weft_kernel_context_t* c, int32_t i) {
  const OpKernelContext* ctx = FromC(c);
  if (i < 0 || i >= ctx->num_inputs()) return "";
  Variable* v = HandleVariable(ctx->input(i));
  return v == nullptr ? "" : v->name().c_str();
}

weft_kernel_api_t BuildApi() {
  weft_kernel_api_t api{};
  api.struct_size = sizeof api;
  api.init_node_name = InitNodeName;
  api.init_op = InitOp;
  api.init_num_inputs = InitNumInputs;
  api.init_num_outputs = InitNumOutputs;
  api.init_input_dtype = InitInputDtype;
  api.init_output_dtype = InitOutputDtype;
  api.init_input_shape = InitInputShape;
  api.attr_int = AttrInt;
  api.attr_float = AttrFloat;
  api.attr_bool = AttrBool;
  api.attr_dtype = AttrDtype;
  api.attr_string = AttrString;
  api.attr_shape = AttrShape;
  api.attr_int_list = AttrIntList;
  api.attr_float_list = AttrFloatList;
  api.attr_tensor = AttrTensor;
  api.node_name = NodeName;
  api.num_inputs = NumInputs;
  api.num_outputs = NumOutputs;
  api.input = Input;
  api.allocate_output = AllocateOutput;
  api.forward_input = ForwardInput;
  api.forward_input_reshaped = ForwardInputReshaped;
  api.allocate_temp = AllocateTemp;
  api.stream = Stream;
  api.step_id = StepId;
  api.is_cancelled = IsCancelled;
  api.variable_lock = VariableLock;
  api.variable_name = VariableName;
  return api;
}

// --- Plugin kernels
// ------------------------------------------------------------

class PluginKernel : public OpKernel {
 public:
  PluginKernel(const weft_kernel_def_t* def, void* state) : def_(def), state_(state) {}
  ~PluginKernel() override {
    if (def_->destroy != nullptr) def_->destroy(state_);
  }
  bool IsAsync() const override { return (def_->flags & WEFT_KERNEL_ASYNC) != 0; }
  bool IsInline() const override { return (def_->flags & WEFT_KERNEL_INLINE) != 0; }

  Status Compute(OpKernelContext& ctx) override { return plugin::TakeStatus(def_->compute(state_, AsC(&ctx))); }

  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    if (!IsAsync()) {
      done(Compute(ctx));
      return;
    }
    auto* callback = new std::function<void(Status)>(std::move(done));
    def_->compute_async(
        state_, AsC(&ctx),
        [](void* user, weft_status_t status) {
          auto* fn = static_cast<std::function<void(Status)>*>(user);
          (*fn)(plugin::TakeStatus(status));
          delete fn;
        },
        callback);
  }

 private:
  const weft_kernel_def_t* def_;
  void* state_;
};

// The binding of type attrs a kernel definition is for ("T=f32").
std::string ConstraintText(const weft_kernel_def_t& def) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < def.num_constraints; ++i) {
    const char* name = weft_dtype_name(def.constraint_dtypes[i]);
    parts.push_back(StrCat(def.constraint_attrs[i], "=", name != nullptr ? name : "?"));
  }
  return parts.empty() ? "any dtype" : StrJoin(parts, ",");
}

bool Matches(const weft_kernel_def_t& def, const Graph::Node& node) {
  for (size_t i = 0; i < def.num_constraints; ++i) {
    auto it = node.def.attrs.find(def.constraint_attrs[i]);
    if (it == node.def.attrs.end() || !it->second.holds<DType>()) return false;
    if (static_cast<weft_dtype_t>(it->second.get<DType>()) != def.constraint_dtypes[i]) return false;
  }
  return true;
}

}  // namespace

// --- OpKernelContext
// ------------------------------------------------------------

OpKernelContext::~OpKernelContext() = default;

namespace {
std::atomic<bool> g_poison_outputs{false};
}  // namespace

void SetPoisonOutputs(bool on) { g_poison_outputs.store(on, std::memory_order_relaxed); }

Expected<Tensor*> OpKernelContext::AllocateOutput(int i, const Shape& shape) {
  auto t = device_->Allocate(node_->output_types[static_cast<std::size_t>(i)], shape);
  if (!t.ok()) return t.status().WithContext(StrCat("output ", i));
  if (g_poison_outputs.load(std::memory_order_relaxed) && t->dtype() != DType::kString &&
      t->dtype() != DType::kResource && t->host_visible() && t->byte_size() > 0) {
    std::memset(t->raw_data(), 0xA5, t->byte_size());
  }
  outputs_[i] = std::move(*t);
  return &outputs_[i];
}

Expected<const Tensor*> OpKernelContext::AllocateTemp(DType dtype, const Shape& shape) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, device_->Allocate(dtype, shape));
  temps_.push_front(std::move(t));
  return &temps_.front();
}

namespace {

// Whether a variable's value must be copied before an in-place update: a
// reader (a tensor of an earlier ReadVariable, a fetch, a _Send) still holds
// its buffer, or the buffer is memory a caller lent (a fed NumPy array,
// core/tensor/borrowed_buffer.h). The count is read through a copy of the
// pointer: the copy's increment is an acquire-release operation, which
// orders the update after every reader's release of the buffer, where
// use_count() alone is a relaxed load that orders nothing (ThreadSanitizer
// reported a reader's BiasAdd racing with the next step's Adam update on a
// ps task serving three workers).
bool MustCopyBeforeUpdate(const Tensor& value) {
  std::shared_ptr<Buffer> probe = value.buffer();
  return probe.use_count() > 2 || BorrowedBuffer::Is(probe.get());
}

}  // namespace

Expected<Tensor*> OpKernelContext::LockVariable(int i, bool exclusive) {
  if (i < 0 || i >= num_inputs_) return InvalidArgumentError("variable_lock: no input ", i);
  Variable* v = HandleVariable(inputs_[i]);
  if (v == nullptr) return InvalidArgumentError("input ", i, " is not a variable handle");
  for (const auto& held : locks_) {
    if (held->variable == v)
      return InvalidArgumentError("variable ", Quote(v->name()), " is locked twice in one compute");
  }
  auto held = std::make_unique<HeldLock>();
  held->variable = v;
  if (exclusive) {
    held->exclusive = std::unique_lock<std::shared_mutex>(v->mutex());
  } else {
    held->shared = std::shared_lock<std::shared_mutex>(v->mutex());
  }
  if (!v->initialized()) {
    return FailedPreconditionError("variable ", Quote(v->name()), " (", DTypeName(v->dtype()),
                                   v->declared_shape().ToString(),
                                   ") is read before it was assigned a value; run its "
                                   "initializer first");
  }
  if (exclusive && MustCopyBeforeUpdate(v->value())) {
    WEFT_ASSIGN_OR_RETURN(Tensor copy, device_->Duplicate(v->value()));
    v->set_value(std::move(copy));
  }
  locks_.push_back(std::move(held));
  return const_cast<Tensor*>(&v->value());
}

// --- Kernel creation
// -----------------------------------------------------------

bool IsRuntimeOp(std::string_view op) { return RuntimeKernels().count(op) != 0; }

std::vector<std::string> RuntimeOps() {
  std::vector<std::string> ops;
  for (const auto& entry : RuntimeKernels()) ops.push_back(entry.first);
  return ops;
}

const weft_kernel_api_t* KernelApi() {
  static const weft_kernel_api_t api = BuildApi();
  return &api;
}

void EnableKernelServices() { plugin::SetKernelServices(KernelApi()); }

namespace {

// The plugin kernel definition for |node| on |device|, or an error saying
// which dtypes the device does have kernels for.
Expected<const weft_kernel_def_t*> ChooseKernel(const Graph::Node& node, const RuntimeDevice& device) {
  const auto& defs = device.kernels().ForOp(node.op_name());
  const weft_kernel_def_t* chosen = nullptr;
  for (const weft_kernel_def_t* def : defs) {
    if (Matches(*def, node)) {
      chosen = def;
      break;
    }
  }
  if (chosen == nullptr) {
    std::vector<std::string> bindings;
    for (const weft_kernel_def_t* def : defs) bindings.push_back(ConstraintText(*def));
    std::string binding;
    for (const auto& [name, value] : node.def.attrs) {
      if (value.holds<DType>()) binding += StrCat(binding.empty() ? "" : ",", name, "=", DTypeName(value.get<DType>()));
    }
    std::string hint;
#if defined(WEFT_LITE_SELECTED_FOR)
    // A lite build made for some models (docs/lite.md) has their kernels only.
    hint = StrCat("; this lite build has the kernels of ", WEFT_LITE_SELECTED_FOR,
                  " only: rebuild it for this model too (cmake --preset lite -DWEFT_LITE_MODELS=\"...;MODEL.wg\", "
                  "docs/lite.md)");
#endif
    return UnimplementedError("no ", device.type(), " kernel for ", node.op_name(),
                              binding.empty() ? "" : StrCat(" with ", binding),
                              defs.empty() ? StrCat("; the ", device.type(), " plugin has no kernel for this op")
                                           : StrCat("; it has kernels for ", StrJoin(bindings, "; ")),
                              hint);
  }
  return chosen;
}

}  // namespace

KernelSupport QueryKernelSupport(const Graph& graph, const Graph::Node& node, const RuntimeDevice& device) {
  KernelSupport support;
  if (IsRuntimeOp(node.op_name())) {
    support.supported = true;
    return support;
  }
  auto chosen = ChooseKernel(node, device);
  if (!chosen.ok()) {
    support.reason = chosen.status().message();
    return support;
  }
  support.supported = true;
  const weft_kernel_def_t* def = *chosen;
  if (def->query != nullptr) {
    weft_kernel_query_t query{};
    query.struct_size = sizeof query;
    KernelInit init{&graph, &node, &device};
    Status status = plugin::TakeStatus(def->query(device.handle(), AsC(&init), &query));
    if (!status.ok()) {
      support.supported = false;
      support.reason = StrCat(device.type(), " kernel query for ", node.op_name(), " failed: ", status.message());
    } else if (query.unsupported) {
      support.supported = false;
      support.reason = StrCat(device.type(), " kernel for ", node.op_name(), " does not run these shapes",
                              query.reason != nullptr ? StrCat(": ", query.reason) : std::string());
    } else {
      support.cost_ns = query.cost_ns;
    }
  }
  return support;
}

Expected<std::unique_ptr<OpKernel>> CreateKernel(const Graph& graph, const Graph::Node& node,
                                                 const RuntimeDevice& device) {
  if (IsRuntimeOp(node.op_name())) return CreateRuntimeKernel(node, device);
  WEFT_ASSIGN_OR_RETURN(const weft_kernel_def_t* chosen, ChooseKernel(node, device));
  void* state = nullptr;
  if (chosen->create != nullptr) {
    KernelInit init{&graph, &node, &device};
    WEFT_RETURN_IF_ERROR(plugin::TakeStatus(chosen->create(device.handle(), AsC(&init), &state)));
  }
  return std::unique_ptr<OpKernel>(new PluginKernel(chosen, state));
}

}  // namespace weft::runtime
