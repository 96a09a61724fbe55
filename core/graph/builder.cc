#include "core/graph/builder.h"

namespace weft {

const std::string& Output::node_name() const {
  static const std::string kNone;
  return valid() ? builder_->node_def(node_).name : kNone;
}

std::string Output::name() const { return InputRefString(node_name(), index_); }

// An invalid Output (what a failed AddNode returns) has no dtype and an
// unknown shape, so that code building on it reaches the builder's error
// instead of a null builder.
DType Output::dtype() const {
  if (!valid()) return DType::kInvalid;
  const auto& types = builder_->node_types(node_).output_types;
  return index_ >= 0 && static_cast<std::size_t>(index_) < types.size() ? types[static_cast<std::size_t>(index_)]
                                                                        : DType::kInvalid;
}

const Shape& Output::shape() const {
  static const Shape kUnknown = Shape::UnknownRank();
  if (!valid()) return kUnknown;
  const auto& shapes = builder_->node_types(node_).output_shapes;
  return index_ >= 0 && static_cast<std::size_t>(index_) < shapes.size() ? shapes[static_cast<std::size_t>(index_)]
                                                                         : kUnknown;
}

std::string GraphBuilder::UniqueName(std::string_view base) {
  std::string prefix;
  for (const std::string& scope : scopes_) prefix += scope + "/";
  std::string name = prefix + std::string(base);
  if (index_.count(name) == 0 && name_counts_.count(name) == 0) {
    name_counts_[name] = 0;
    return name;
  }
  int& count = name_counts_[name];
  std::string candidate;
  do {
    candidate = StrCat(name, "_", ++count);
  } while (index_.count(candidate) != 0);
  return candidate;
}

std::vector<Output> GraphBuilder::AddNode(std::string_view op_name, const std::vector<Output>& inputs, AttrMap attrs,
                                          std::string_view name) {
  if (!status_.ok()) return {};
  const OpDef* op = registry_.Find(op_name);
  NodeDef def;
  def.op = std::string(op_name);
  def.name = UniqueName(name.empty() ? op_name : name);
  if (op == nullptr) {
    status_ = InvalidArgumentError("node '", def.name, "': unknown op ", Quote(op_name));
    return {};
  }
  if (Status valid = ValidateNodeName(def.name); !valid.ok()) {
    status_ = valid;
    return {};
  }
  def.attrs = std::move(attrs);
  if (!devices_.empty()) def.device = devices_.back();
  // Inputs from enclosing control-flow contexts are routed in first: that
  // may add nodes, which must happen before pointers into def_ are taken.
  std::vector<Output> mapped = inputs;
  for (std::size_t i = 0; i < mapped.size(); ++i) {
    const Output& in = mapped[i];
    if (!in.valid() || in.index() < 0) {
      status_ = InvalidArgumentError("node '", def.name, "' (", op_name, "): input ", i,
                                     in.valid() ? " is a node without outputs" : " is not a valid output");
      return {};
    }
    if (raw_) continue;
    auto visible = CaptureInto(context_, in, StrCat("node '", def.name, "' (", op_name, "): input ", i));
    if (!visible.ok()) {
      status_ = visible.status();
      return {};
    }
    mapped[i] = *visible;
  }
  std::vector<NodeInput> node_inputs;
  for (const Output& in : mapped) {
    def.inputs.push_back(in.name());
    NodeInput ni;
    ni.text = in.name();
    ni.source = &def_.nodes[static_cast<std::size_t>(in.node())];
    const NodeTypes& src = types_[static_cast<std::size_t>(in.node())];
    ni.source_outputs = static_cast<int>(src.output_types.size());
    ni.index = in.index();
    if (in.index() < ni.source_outputs) {
      ni.dtype = src.output_types[static_cast<std::size_t>(in.index())];
      ni.shape = src.output_shapes[static_cast<std::size_t>(in.index())];
      ni.handle_shape = src.output_handle_shapes[static_cast<std::size_t>(in.index())];
    }
    node_inputs.push_back(std::move(ni));
  }
  for (const auto& deps : control_deps_) {
    for (const Output& dep : deps) {
      if (dep.valid()) def.inputs.push_back(InputRefString(dep.node_name(), -1));
    }
  }
  if (!raw_ && context_ != nullptr && inputs.empty()) {
    const Output pivot = context_->pivot();
    if (pivot.valid()) def.inputs.push_back(InputRefString(pivot.node_name(), -1));
  }
  auto types = InferNode(*op, def, node_inputs);
  if (!types.ok()) {
    status_ = types.status();
    return {};
  }
  const int id = static_cast<int>(def_.nodes.size());
  index_[def.name] = id;
  def_.nodes.push_back(std::move(def));
  types_.push_back(std::move(*types));
  node_contexts_.push_back(context_);
  std::vector<Output> outputs;
  for (std::size_t i = 0; i < types_.back().output_types.size(); ++i)
    outputs.emplace_back(this, id, static_cast<int>(i));
  return outputs;
}

Status GraphBuilder::SetInput(int node, int index, const Output& value) {
  WEFT_RETURN_IF_ERROR(status_);
  if (node < 0 || node >= num_nodes()) return InvalidArgumentError("SetInput: no node ", node);
  NodeDef& def = def_.nodes[static_cast<std::size_t>(node)];
  const NodeTypes& types = types_[static_cast<std::size_t>(node)];
  if (index < 0 || static_cast<std::size_t>(index) >= types.input_types.size()) {
    return InvalidArgumentError("node '", def.name, "' (", def.op, ") has no data input ", index);
  }
  if (!value.valid() || value.index() < 0) {
    return InvalidArgumentError("node '", def.name, "': the new input ", index, " is not a valid output");
  }
  if (value.dtype() != types.input_types[static_cast<std::size_t>(index)]) {
    return InvalidArgumentError("node '", def.name, "': input ", index, " is ",
                                DTypeName(types.input_types[static_cast<std::size_t>(index)]), "; ",
                                Quote(value.name()), " is ", DTypeName(value.dtype()));
  }
  def.inputs[static_cast<std::size_t>(index)] = value.name();
  return Status();
}

Output GraphBuilder::Op(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs, std::string_view name) {
  std::vector<Output> outputs = AddNode(op, inputs, std::move(attrs), name);
  if (!status_.ok()) return Output();
  if (outputs.empty()) return Output(this, static_cast<int>(def_.nodes.size()) - 1, -1);
  if (outputs.size() > 1) {
    status_ = InvalidArgumentError("node '", def_.nodes.back().name, "' (", op, ") has ", outputs.size(),
                                   " outputs; use AddNode");
    return Output();
  }
  return outputs[0];
}

Output GraphBuilder::Const(const Tensor& value, std::string_view name) {
  return Op("Const", {}, {{"value", AttrValue(value)}, {"dtype", AttrValue(value.dtype())}},
            name.empty() ? "Const" : name);
}

Output GraphBuilder::Placeholder(DType dtype, const Shape& shape, std::string_view name) {
  return Op("Placeholder", {}, {{"dtype", AttrValue(dtype)}, {"shape", AttrValue(shape)}}, name);
}

GraphBuilder::Scope GraphBuilder::NameScope(std::string_view scope) {
  // A scope name is made unique like a node name, so that two "dense"
  // scopes become "dense" and "dense_1".
  std::string unique = UniqueName(scope);
  std::string prefix;
  for (const std::string& s : scopes_) prefix += s + "/";
  scopes_.push_back(unique.substr(prefix.size()));
  return Scope([this] { scopes_.pop_back(); });
}

GraphBuilder::Scope GraphBuilder::AbsoluteNameScope(std::string_view scope) {
  std::vector<std::string> saved = std::move(scopes_);
  scopes_.clear();
  if (!scope.empty()) scopes_.emplace_back(scope);
  return Scope([this, saved = std::move(saved)]() mutable { scopes_ = std::move(saved); });
}

std::string GraphBuilder::CurrentScope() const {
  std::string scope;
  for (const std::string& s : scopes_) scope += (scope.empty() ? "" : "/") + s;
  return scope;
}

Status GraphBuilder::Fail(Status error) {
  if (status_.ok()) status_ = std::move(error);
  return status_;
}

bool ControlFlowContext::IsWithin(const ControlFlowContext* other) const {
  for (const ControlFlowContext* c = this; c != nullptr; c = c->outer_) {
    if (c == other) return true;
  }
  return other == nullptr;
}

Expected<Output> ControlFlowContext::CaptureForeign(GraphBuilder&, const Output&, const ControlFlowContext*) {
  return Output();
}

ControlFlowContext* GraphBuilder::AddContext(std::unique_ptr<ControlFlowContext> context) {
  context->outer_ = context_;
  contexts_.push_back(std::move(context));
  return contexts_.back().get();
}

GraphBuilder::Scope GraphBuilder::EnterContext(ControlFlowContext* context) {
  ControlFlowContext* saved = std::exchange(context_, context);
  auto saved_deps = std::make_shared<std::vector<std::vector<Output>>>(std::exchange(control_deps_, {}));
  return Scope([this, saved, saved_deps] {
    context_ = saved;
    control_deps_ = std::move(*saved_deps);
  });
}

GraphBuilder::Scope GraphBuilder::RawContext(ControlFlowContext* context, bool keep_control_dependencies) {
  ControlFlowContext* saved = std::exchange(context_, context);
  const bool saved_raw = std::exchange(raw_, true);
  auto saved_deps = std::make_shared<std::vector<std::vector<Output>>>(
      keep_control_dependencies ? control_deps_ : std::exchange(control_deps_, {}));
  return Scope([this, saved, saved_raw, saved_deps] {
    context_ = saved;
    raw_ = saved_raw;
    control_deps_ = std::move(*saved_deps);
  });
}

GraphBuilder::Scope GraphBuilder::AllowInnerTensors() {
  const bool saved = std::exchange(allow_inner_, true);
  return Scope([this, saved] { allow_inner_ = saved; });
}

Expected<Output> GraphBuilder::Capture(const Output& value, std::string_view consumer) {
  WEFT_RETURN_IF_ERROR(status_);
  if (!value.valid() || value.index() < 0) return Fail(InvalidArgumentError("Capture: not a valid output"));
  auto visible = CaptureInto(context_, value, consumer);
  if (!visible.ok()) return Fail(visible.status());
  return visible;
}

Expected<Output> GraphBuilder::CaptureInto(ControlFlowContext* context, const Output& value,
                                           std::string_view consumer) {
  ControlFlowContext* from = node_contexts_[static_cast<std::size_t>(value.node())];
  if (from == context) return value;
  if (allow_inner_ && from != nullptr && from->IsWithin(context)) return value;
  if (context != nullptr) {
    auto it = context->captured_.find({value.node(), value.index()});
    if (it != context->captured_.end()) return it->second;
  }
  const std::string where = consumer.empty() ? std::string() : StrCat(consumer, ": ");
  // Captures run with this context current, the name scope of the context,
  // no control dependencies of the caller, and raw inputs (a Switch or
  // Enter takes its input from outside on purpose).
  auto capture = [&](auto&& add) -> Expected<Output> {
    std::vector<std::string> saved_scopes = std::exchange(scopes_, {});
    if (!context->name().empty()) scopes_.push_back(context->name());
    std::vector<std::vector<Output>> saved_deps = std::exchange(control_deps_, {});
    ControlFlowContext* saved_context = std::exchange(context_, context);
    const bool saved_raw = std::exchange(raw_, true);
    Expected<Output> result = add();
    scopes_ = std::move(saved_scopes);
    control_deps_ = std::move(saved_deps);
    context_ = saved_context;
    raw_ = saved_raw;
    if (!result.ok()) return result;
    WEFT_RETURN_IF_ERROR(status_);
    return result;
  };
  if (context != nullptr && context->IsWithin(from)) {
    WEFT_ASSIGN_OR_RETURN(Output outer, CaptureInto(context->outer(), value, consumer));
    WEFT_ASSIGN_OR_RETURN(Output inner, capture([&] { return context->CaptureFromOuter(*this, outer); }));
    context->captured_[{value.node(), value.index()}] = inner;
    return inner;
  }
  if (context != nullptr) {
    WEFT_ASSIGN_OR_RETURN(Output inner, capture([&] { return context->CaptureForeign(*this, value, from); }));
    if (inner.valid()) {
      context->captured_[{value.node(), value.index()}] = inner;
      return inner;
    }
  }
  // Name the outermost context that holds |value| and not the consumer.
  const ControlFlowContext* culprit = from;
  while (culprit->outer() != nullptr && !(context != nullptr && context->IsWithin(culprit->outer()))) {
    culprit = culprit->outer();
  }
  return InvalidArgumentError(
      where, "tensor '", value.name(), "' is made inside ", culprit->Describe(), " and is not visible ",
      context == nullptr ? std::string("outside it") : StrCat("in ", context->Describe()), "; use the results of the ",
      culprit->Describe().substr(0, culprit->Describe().find(" '")), " instead");
}

GraphBuilder::Scope GraphBuilder::DeviceScope(std::string_view device) {
  devices_.emplace_back(device);
  return Scope([this] { devices_.pop_back(); });
}

GraphBuilder::Scope GraphBuilder::ControlDependencies(const std::vector<Output>& deps) {
  control_deps_.push_back(deps);
  return Scope([this] { control_deps_.pop_back(); });
}

Expected<Graph> GraphBuilder::Build() const {
  WEFT_RETURN_IF_ERROR(status_);
  return Graph::FromGraphDef(def_, registry_);
}

Status GraphBuilder::Import(const Graph& graph) {
  WEFT_RETURN_IF_ERROR(status_);
  for (int id : graph.topological_order()) {
    const Graph::Node& n = graph.node(id);
    if (index_.count(n.name()) != 0) {
      status_ = AlreadyExistsError("cannot import node '", n.name(), "': the graph being built already has one");
      return status_;
    }
    index_[n.name()] = static_cast<int>(def_.nodes.size());
    def_.nodes.push_back(n.def);
    node_contexts_.push_back(nullptr);
    types_.push_back(NodeTypes{n.input_types, n.output_types, n.output_shapes, n.output_handle_shapes});
  }
  def_.library.insert(def_.library.end(), graph.library().begin(), graph.library().end());
  return Status();
}

std::vector<Output> GraphBuilder::Inputs(int id) const {
  std::vector<Output> inputs;
  for (const std::string& text : node_def(id).inputs) {
    auto ref = ParseInputRef(text);
    if (!ref.ok() || ref->control()) continue;
    auto it = index_.find(ref->node);
    if (it != index_.end()) inputs.emplace_back(this, it->second, ref->index);
  }
  return inputs;
}

std::vector<Output> GraphBuilder::Outputs(int id) const {
  std::vector<Output> outputs;
  for (std::size_t i = 0; i < node_types(id).output_types.size(); ++i) {
    outputs.emplace_back(this, id, static_cast<int>(i));
  }
  return outputs;
}

Expected<Output> GraphBuilder::Resolve(std::string_view tensor) const {
  WEFT_ASSIGN_OR_RETURN(InputRef ref, ParseInputRef(tensor));
  if (ref.control()) return InvalidArgumentError(Quote(tensor), " names a control dependency, not a tensor");
  auto it = index_.find(ref.node);
  if (it == index_.end()) {
    std::vector<std::string> names;
    names.reserve(def_.nodes.size());
    for (const NodeDef& n : def_.nodes) names.push_back(n.name);
    const std::string hint = ClosestMatch(ref.node, names);
    return NotFoundError("the graph has no node ", Quote(ref.node),
                         hint.empty() ? std::string() : StrCat("; did you mean ", Quote(hint), "?"));
  }
  const int outputs = static_cast<int>(node_types(it->second).output_types.size());
  if (ref.index >= outputs) {
    return NotFoundError("node ", Quote(ref.node), " has ", outputs, " output", outputs == 1 ? "" : "s",
                         "; there is no output ", ref.index);
  }
  return Output(this, it->second, ref.index);
}

Output GraphBuilder::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? Output() : Output(this, it->second, 0);
}

}  // namespace weft
