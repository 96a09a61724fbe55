#include "core/train/optimizer.h"

#include <deque>
#include <mutex>

#include "core/plugin/host_services.h"

// The opaque types of weft_optimizer.h, defined by the host.
struct weft_value_s {
  weft::Output output;
};

struct weft_graph_builder_s {
  weft::GraphBuilder* b = nullptr;
  const weft::train::HasKernelFn* has_kernel = nullptr;
  // Values handed out; pointers into a deque stay valid.
  std::deque<weft_value_s> values;

  weft_value_t Hold(weft::Output output) {
    values.push_back(weft_value_s{output});
    return &values.back();
  }
};

struct weft_node_builder_s {
  weft_graph_builder_s* graph = nullptr;
  std::string op;
  std::string name;
  std::vector<weft::Output> inputs;
  std::vector<weft::Output> after;
  weft::AttrMap attrs;
  weft::Status error;
};

namespace weft::train {
namespace {

bool Valid(weft_value_t v) { return v != nullptr && v->output.valid(); }

weft_node_builder_t* NodeBegin(weft_graph_builder_t* graph, const char* op, const char* name) {
  auto* node = new weft_node_builder_s;
  node->graph = graph;
  node->op = op == nullptr ? "" : op;
  node->name = name == nullptr || *name == '\0' ? node->op : name;
  return node;
}

void NodeAddInput(weft_node_builder_t* node, weft_value_t input) {
  if (!node->error.ok()) return;
  if (!Valid(input)) {
    node->error = InvalidArgumentError("input ", node->inputs.size(), " of node '", node->name, "' (", node->op,
                                       ") is not a value of this graph");
  } else if (input->output.index() < 0) {
    node->error =
        InvalidArgumentError("input ", node->inputs.size(), " of node '", node->name, "' (", node->op, ") is node '",
                             input->output.node_name(), "', which has no outputs; use it as a control input");
  } else {
    node->inputs.push_back(input->output);
  }
}

void NodeAddControlInput(weft_node_builder_t* node, weft_value_t after) {
  if (!node->error.ok()) return;
  if (!Valid(after)) {
    node->error = InvalidArgumentError("a control input of node '", node->name, "' is not a value of this graph");
    return;
  }
  node->after.push_back(after->output);
}

template <class T>
void SetAttr(weft_node_builder_t* node, const char* name, T value) {
  if (name == nullptr || *name == '\0') {
    if (node->error.ok()) node->error = InvalidArgumentError("node '", node->name, "': an attr without a name");
    return;
  }
  node->attrs[name] = AttrValue(value);
}

void NodeSetAttrInt(weft_node_builder_t* node, const char* name, int64_t value) { SetAttr(node, name, value); }
void NodeSetAttrFloat(weft_node_builder_t* node, const char* name, double value) { SetAttr(node, name, value); }
void NodeSetAttrBool(weft_node_builder_t* node, const char* name, weft_bool_t value) {
  SetAttr(node, name, value != 0);
}
void NodeSetAttrDtype(weft_node_builder_t* node, const char* name, weft_dtype_t value) {
  SetAttr(node, name, static_cast<DType>(value));
}
void NodeSetAttrString(weft_node_builder_t* node, const char* name, const char* data, size_t size) {
  SetAttr(node, name, std::string(data == nullptr ? "" : data, data == nullptr ? 0 : size));
}

weft_status_t NodeFinish(weft_node_builder_t* node, weft_value_t* out_outputs, size_t capacity,
                         size_t* out_num_outputs) {
  std::unique_ptr<weft_node_builder_s> owned(node);
  if (out_num_outputs != nullptr) *out_num_outputs = 0;
  if (!node->error.ok()) return plugin::MakeStatus(node->error);
  GraphBuilder& b = *node->graph->b;
  std::vector<Output> outputs;
  {
    auto deps = b.ControlDependencies(node->after);
    outputs = b.AddNode(node->op, node->inputs, node->attrs, node->name);
  }
  if (!b.status().ok()) return plugin::MakeStatus(b.status());
  if (outputs.empty()) {
    if (capacity >= 1 && out_outputs != nullptr) {
      out_outputs[0] = node->graph->Hold(Output(&b, b.num_nodes() - 1, -1));
    }
    return nullptr;
  }
  for (std::size_t i = 0; i < outputs.size() && i < capacity && out_outputs != nullptr; ++i) {
    out_outputs[i] = node->graph->Hold(outputs[i]);
  }
  if (out_num_outputs != nullptr) *out_num_outputs = outputs.size();
  return nullptr;
}

weft_status_t Scalar(weft_graph_builder_t* graph, weft_dtype_t dtype, double value, weft_value_t* out_value) {
  GraphBuilder& b = *graph->b;
  Output out;
  switch (static_cast<DType>(dtype)) {
    case DType::kF32: out = b.Const(Tensor::Scalar<float>(static_cast<float>(value))); break;
    case DType::kF64: out = b.Const(Tensor::Scalar<double>(value)); break;
    case DType::kI32: out = b.Const(Tensor::Scalar<int32_t>(static_cast<int32_t>(value))); break;
    case DType::kI64: out = b.Const(Tensor::Scalar<int64_t>(static_cast<int64_t>(value))); break;
    default:
      out = b.Op("Cast", {b.Const(Tensor::Scalar<double>(value))}, {{"DstT", AttrValue(static_cast<DType>(dtype))}});
  }
  if (!b.status().ok()) return plugin::MakeStatus(b.status());
  *out_value = graph->Hold(out);
  return nullptr;
}

weft_bool_t HasKernel(weft_graph_builder_t* graph, const char* op, const char* const* attrs, const weft_dtype_t* dtypes,
                      size_t num_attrs) {
  if (graph->has_kernel == nullptr || !*graph->has_kernel || op == nullptr) return 0;
  std::vector<std::pair<std::string, DType>> constraints;
  for (size_t i = 0; i < num_attrs; ++i) {
    if (attrs == nullptr || dtypes == nullptr || attrs[i] == nullptr) return 0;
    constraints.emplace_back(attrs[i], static_cast<DType>(dtypes[i]));
  }
  return (*graph->has_kernel)(op, constraints) ? 1 : 0;
}

const weft_graph_api_t kGraphApi = [] {
  weft_graph_api_t api{};
  api.struct_size = sizeof(api);
  api.node_begin = NodeBegin;
  api.node_add_input = NodeAddInput;
  api.node_add_control_input = NodeAddControlInput;
  api.node_set_attr_int = NodeSetAttrInt;
  api.node_set_attr_float = NodeSetAttrFloat;
  api.node_set_attr_bool = NodeSetAttrBool;
  api.node_set_attr_dtype = NodeSetAttrDtype;
  api.node_set_attr_string = NodeSetAttrString;
  api.node_finish = NodeFinish;
  api.scalar = Scalar;
  api.has_kernel = HasKernel;
  return api;
}();

}  // namespace

void EnableGraphServices() {
  static std::once_flag once;
  std::call_once(once, [] { plugin::SetGraphServices(&kGraphApi); });
}

Expected<std::unique_ptr<Optimizer>> Optimizer::Create(const plugin::OptimizerPlugin& plugin,
                                                       config::OptionValues hyperparameters) {
  EnableGraphServices();
  std::unique_ptr<Optimizer> opt(new Optimizer);
  opt->name_ = plugin.table->name;
  opt->table_ = plugin.table;
  opt->hyperparameters_ = std::move(hyperparameters);
  WEFT_RETURN_IF_ERROR(
      plugin::TakeStatus(opt->table_->create(plugin::AsOptionsHandle(&opt->hyperparameters_), &opt->state_))
          .WithContext(StrCat("optimizer '", opt->name_, "'")));
  return opt;
}

Expected<std::unique_ptr<Optimizer>> Optimizer::Create(const plugin::OptimizerPlugin& plugin,
                                                       const config::Section* section) {
  const std::string path = section != nullptr ? section->path : StrCat("optimizers.", plugin.table->name);
  WEFT_ASSIGN_OR_RETURN(config::OptionValues values, config::ValidateOptions(section, path, plugin.hyperparameters));
  return Create(plugin, std::move(values));
}

Optimizer::~Optimizer() {
  if (table_ != nullptr && state_ != nullptr) table_->destroy(state_);
}

Expected<std::vector<SlotDef>> Optimizer::Slots(DType dtype, const Shape& shape) const {
  const weft_slot_def_t* slots = nullptr;
  size_t count = 0;
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(table_->slots(state_, static_cast<weft_dtype_t>(dtype), shape.rank(),
                                                        shape.dims().data(), &slots, &count))
                           .WithContext(StrCat("optimizer '", name_, "'")));
  std::vector<SlotDef> out;
  if (count == 0) return out;
  if (slots == nullptr) return InternalError("optimizer '", name_, "' declared ", count, " slots but gave none");
  // The plugin may be built against a newer SDK whose weft_slot_def_t is
  // larger: step through the array by the size it reports.
  if (slots->struct_size < WEFT_SLOT_DEF_SIZE_V1_0) {
    return InternalError("optimizer '", name_, "': weft_slot_def_t.struct_size is ", slots->struct_size,
                         ", smaller than the ", WEFT_SLOT_DEF_SIZE_V1_0, " bytes of ABI 1.0");
  }
  for (size_t i = 0; i < count; ++i) {
    const weft_slot_def_t* slot = WEFT_ARRAY_AT(weft_slot_def_t, slots, i);
    if (slot->name == nullptr || *slot->name == '\0') {
      return InternalError("optimizer '", name_, "' declared a slot without a name");
    }
    for (const SlotDef& seen : out) {
      if (seen.name == slot->name) {
        return InternalError("optimizer '", name_, "' declared slot '", seen.name, "' twice");
      }
    }
    out.push_back({slot->name, slot->initial_value});
  }
  return out;
}

Status Optimizer::CheckArgs(const GraphBuilder& b, const UpdateArgs& args) const {
  // A tensor input: present, of a node with outputs, of |dtype|, and (when
  // |scalar|) of rank 0.
  auto check = [&b](const Output& value, std::string_view what, DType dtype, bool scalar) -> Status {
    if (!value.valid() || value.index() < 0) return InvalidArgumentError(what, " is missing");
    if (value.node() >= b.num_nodes()) return InvalidArgumentError(what, " is not a tensor of this graph");
    if (value.dtype() != dtype) {
      return InvalidArgumentError(what, " '", value.name(), "' is ", DTypeName(value.dtype()), ", not ",
                                  DTypeName(dtype));
    }
    if (scalar && !value.shape().unknown_rank() && value.shape().rank() != 0) {
      return InvalidArgumentError(what, " '", value.name(), "' must be a scalar, got shape ", value.shape().ToString());
    }
    return Status();
  };
  // The name scopes the update's nodes: empty, they would start with '/'.
  if (args.variable_name.empty()) return InvalidArgumentError("the variable has no name");
  WEFT_RETURN_IF_ERROR(check(args.variable, "the variable handle", DType::kResource, true));
  WEFT_RETURN_IF_ERROR(check(args.gradient, "the gradient", args.dtype, false));
  if (args.indices.valid()) {
    WEFT_RETURN_IF_ERROR(check(args.indices, "the gradient's row indices", DType::kI64, false));
    if (!args.indices.shape().unknown_rank() && args.indices.shape().rank() != 1) {
      return InvalidArgumentError("the gradient's row indices '", args.indices.name(), "' must be a vector, got shape ",
                                  args.indices.shape().ToString());
    }
  }
  WEFT_RETURN_IF_ERROR(check(args.learning_rate, "the learning rate", args.dtype, true));
  WEFT_RETURN_IF_ERROR(check(args.step, "the step", DType::kI64, true));
  const NodeDef& handle = b.node_def(args.variable.node());
  // The graph does not carry a handle's dtype; the VarHandle's attr does.
  if (auto it = handle.attrs.find("dtype"); handle.op == "VarHandle" && it != handle.attrs.end() &&
                                            it->second.holds<DType>() && it->second.get<DType>() != args.dtype) {
    return InvalidArgumentError("the variable '", handle.name, "' holds ", DTypeName(it->second.get<DType>()),
                                ", but the update is for ", DTypeName(args.dtype));
  }
  const auto& handle_shapes = b.node_types(args.variable.node()).output_handle_shapes;
  const auto index = static_cast<std::size_t>(args.variable.index());
  const Shape shape = index < handle_shapes.size() ? handle_shapes[index] : Shape::UnknownRank();
  Shape expected = shape;
  if (args.indices.valid() && !shape.unknown_rank()) {
    if (shape.rank() == 0) {
      return InvalidArgumentError("the variable '", handle.name, "' is a scalar; a sparse gradient needs rows");
    }
    std::vector<int64_t> dims = shape.dims();
    dims[0] = Shape::kUnknownDim;
    expected = Shape(dims);
  }
  if (!expected.IsCompatibleWith(args.gradient.shape())) {
    return InvalidArgumentError("the gradient '", args.gradient.name(), "' has shape ",
                                args.gradient.shape().ToString(), " but the variable '", handle.name, "' has shape ",
                                shape.ToString(), args.indices.valid() ? " (a sparse gradient has its rows)" : "");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<SlotDef> slots, Slots(args.dtype, shape));
  if (slots.size() != args.slots.size()) {
    std::vector<std::string> names;
    for (const SlotDef& slot : slots) names.push_back(slot.name);
    return InvalidArgumentError("the optimizer keeps ", slots.size(), " slot variables per variable (",
                                StrJoin(names, ", "), ") but ", args.slots.size(), " were given");
  }
  for (std::size_t i = 0; i < slots.size(); ++i) {
    WEFT_RETURN_IF_ERROR(check(args.slots[i], StrCat("slot '", slots[i].name, "'"), DType::kResource, true));
  }
  return Status();
}

bool Optimizer::has_sparse_update() const {
  return table_->struct_size >= WEFT_OPTIMIZER_PLUGIN_SIZE_V1_1 && table_->build_sparse_update != nullptr;
}

Expected<Output> Optimizer::BuildUpdate(GraphBuilder& b, const UpdateArgs& args, const HasKernelFn& has_kernel) const {
  WEFT_RETURN_IF_ERROR(
      CheckArgs(b, args).WithContext(StrCat("optimizer '", name_, "', update of variable '", args.variable_name, "'")));
  const bool sparse = args.indices.valid();
  weft_graph_builder_s graph;
  graph.b = &b;
  graph.has_kernel = &has_kernel;
  std::vector<weft_value_t> slots;
  for (const Output& s : args.slots) slots.push_back(graph.Hold(s));
  weft_update_args_t abi{};
  abi.struct_size = sizeof(abi);
  abi.variable_name = args.variable_name.c_str();
  abi.dtype = static_cast<weft_dtype_t>(args.dtype);
  abi.variable = graph.Hold(args.variable);
  abi.gradient = graph.Hold(args.gradient);
  abi.learning_rate = graph.Hold(args.learning_rate);
  abi.step = graph.Hold(args.step);
  abi.slots = slots.empty() ? nullptr : slots.data();
  abi.num_slots = slots.size();
  weft_value_t update = nullptr;
  Status status;
  {
    auto scope = b.NameScope(StrCat(args.variable_name, "/", name_));
    if (sparse && has_sparse_update()) {
      abi.indices = graph.Hold(args.indices);
      status = plugin::TakeStatus(table_->build_sparse_update(state_, &graph, &abi, &update));
    }
    if (status.ok() && update == nullptr && sparse) {
      // No sparse rule, or it declined: the rows added into zeros of the
      // variable's shape, made next to the variable (under its update's
      // scope), so only the rows travel to it.
      const auto& handle_shapes = b.node_types(args.variable.node()).output_handle_shapes;
      const auto index = static_cast<std::size_t>(args.variable.index());
      const Shape shape = index < handle_shapes.size() ? handle_shapes[index] : Shape::UnknownRank();
      if (shape.unknown_rank() || shape.rank() == 0 || shape.dim(0) < 0) {
        return InvalidArgumentError("optimizer '", name_, "', update of variable '", args.variable_name,
                                    "': a sparse gradient of a variable whose number of rows is unknown (",
                                    shape.ToString(), ") cannot be made dense");
      }
      Output rows = b.Const(Tensor::Scalar<int64_t>(shape.dim(0)), "dense_gradient/rows");
      Output dense = b.Op("UnsortedSegmentSum", {args.gradient, args.indices, rows}, {}, "dense_gradient");
      abi.indices = nullptr;
      abi.gradient = graph.Hold(dense);
    }
    if (status.ok() && update == nullptr) {
      status = plugin::TakeStatus(table_->build_update(state_, &graph, &abi, &update));
    }
  }
  if (!status.ok()) {
    return status.WithContext(StrCat("optimizer '", name_, "', update of variable '", args.variable_name, "'"));
  }
  if (update == nullptr || !update->output.valid()) {
    return InternalError("optimizer '", name_, "' returned no update for variable '", args.variable_name, "'");
  }
  return update->output;
}

}  // namespace weft::train
