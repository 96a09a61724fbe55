#include "core/graph/graph.h"

#include <algorithm>
#include <deque>

#include "core/graph/graph_walk.h"
#include "core/graph/shape_inference.h"
#include "core/tensor/size.h"

namespace weft {
namespace {

std::string DescribeNode(const NodeDef& def) { return StrCat("node '", def.name, "' (", def.op, ")"); }

bool AttrTypeMatches(const AttrValue& value, AttrType type) {
  if (value.type() == type) return true;
  // An int literal is a fine float; an empty list is any list.
  if (type == AttrType::kFloat && value.type() == AttrType::kInt) return true;
  return false;
}

AttrValue Coerce(const AttrValue& value, AttrType type) {
  if (type == AttrType::kFloat && value.type() == AttrType::kInt) {
    return AttrValue(static_cast<double>(value.get<int64_t>()));
  }
  return value;
}

std::string Article(AttrType type) {
  const std::string_view name = AttrTypeName(type);
  const bool vowel = name[0] == 'i';
  return StrCat(vowel ? "an " : "a ", name);
}

std::vector<std::string> AttrNames(const OpDef& op) {
  std::vector<std::string> names;
  for (const AttrDef& a : op.attrs) names.push_back(a.name);
  return names;
}

// The number of tensors arg |arg| stands for under |attrs|.
// The most tensors one list arg (N inputs, num_split outputs) may have.
constexpr int64_t kMaxListArgs = int64_t{1} << 20;

int ArgCount(const ArgDef& arg, const AttrMap& attrs) {
  if (!arg.type_list_attr.empty()) {
    auto it = attrs.find(arg.type_list_attr);
    return it == attrs.end() || !it->second.holds<std::vector<DType>>()
               ? -1
               : static_cast<int>(it->second.get<std::vector<DType>>().size());
  }
  if (!arg.is_list()) return 1;
  auto it = attrs.find(arg.number_attr);
  if (it == attrs.end() || !it->second.holds<int64_t>()) return -1;
  const int64_t n = it->second.get<int64_t>();
  return n < 0 || n > kMaxListArgs ? -1 : static_cast<int>(n);
}

// The dtype of tensor |j| of arg |arg| under |attrs|; kInvalid when its
// type attr is unset.
DType ArgType(const ArgDef& arg, const AttrMap& attrs, int j = 0) {
  if (arg.fixed_type != DType::kInvalid) return arg.fixed_type;
  if (!arg.type_list_attr.empty()) {
    auto it = attrs.find(arg.type_list_attr);
    if (it == attrs.end() || !it->second.holds<std::vector<DType>>()) return DType::kInvalid;
    const auto& types = it->second.get<std::vector<DType>>();
    return j >= 0 && static_cast<std::size_t>(j) < types.size() ? types[static_cast<std::size_t>(j)] : DType::kInvalid;
  }
  auto it = attrs.find(arg.type_attr);
  return it == attrs.end() || !it->second.holds<DType>() ? DType::kInvalid : it->second.get<DType>();
}

// The attr that types arg |arg|, for messages ("" for a fixed dtype).
const std::string& ArgTypeAttr(const ArgDef& arg) {
  return arg.type_list_attr.empty() ? arg.type_attr : arg.type_list_attr;
}

}  // namespace

Expected<NodeTypes> InferNode(const OpDef& op, NodeDef& def, const std::vector<NodeInput>& inputs) {
  const std::string where = DescribeNode(def);
  AttrMap& attrs = def.attrs;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const NodeInput& in = inputs[k];
    if (in.index >= in.source_outputs) {
      return InvalidArgumentError(where, ": input ", k, " ", Quote(in.text), " but ", DescribeNode(*in.source), " has ",
                                  in.source_outputs, " output", in.source_outputs == 1 ? "" : "s");
    }
  }
  for (const auto& [name, value] : attrs) {
    // Attrs named with a leading '_' belong to the runtime, not the op
    // ("_colocate", a list of node names to share a device with).
    if (name.empty() || name[0] == '_') continue;
    if (op.FindAttr(name) == nullptr) {
      const std::string hint = ClosestMatch(name, AttrNames(op));
      return InvalidArgumentError(
          where, ": unknown attr ", Quote(name),
          hint.empty()
              ? StrCat("; ", op.name, " takes ", op.attrs.empty() ? std::string("none") : StrJoin(AttrNames(op), ", "))
              : StrCat("; did you mean ", Quote(hint), "?"));
    }
  }
  // Infer missing type and number attrs from the inputs.
  std::size_t input_at = 0;
  for (std::size_t a = 0; a < op.inputs.size(); ++a) {
    const ArgDef& arg = op.inputs[a];
    // A list arg takes every data input not claimed by the (single) args after it.
    const std::size_t later = op.inputs.size() - a - 1;
    if (!arg.number_attr.empty() && attrs.find(arg.number_attr) == attrs.end()) {
      if (inputs.size() >= input_at + later) {
        attrs[arg.number_attr] = AttrValue(static_cast<int64_t>(inputs.size() - input_at - later));
      }
    }
    if (!arg.type_list_attr.empty() && attrs.find(arg.type_list_attr) == attrs.end() &&
        inputs.size() >= input_at + later) {
      std::vector<DType> types;
      for (std::size_t k = input_at; k < inputs.size() - later; ++k) types.push_back(inputs[k].dtype);
      attrs[arg.type_list_attr] = AttrValue(std::move(types));
    }
    const int count = ArgCount(arg, attrs);
    if (!arg.type_attr.empty() && attrs.find(arg.type_attr) == attrs.end() && count > 0 && input_at < inputs.size() &&
        inputs[input_at].index < inputs[input_at].source_outputs) {
      attrs[arg.type_attr] = AttrValue(inputs[input_at].dtype);
    }
    input_at += count < 0 ? 0 : static_cast<std::size_t>(count);
  }
  // Defaults, required attrs, and attr types.
  for (const AttrDef& attr : op.attrs) {
    auto it = attrs.find(attr.name);
    if (it == attrs.end()) {
      if (!attr.default_value) {
        return InvalidArgumentError(where, ": missing attr ", Quote(attr.name), " (", attr.ToString(), ")");
      }
      attrs[attr.name] = *attr.default_value;
      continue;
    }
    if (!AttrTypeMatches(it->second, attr.type)) {
      return InvalidArgumentError(where, ": attr ", Quote(attr.name), " must be ", Article(attr.type), ", got ",
                                  it->second.ToString(), " (", Article(it->second.type()), ")");
    }
    it->second = Coerce(it->second, attr.type);
    if (attr.type == AttrType::kType && !attr.allowed_types.empty()) {
      const DType d = it->second.get<DType>();
      if (std::find(attr.allowed_types.begin(), attr.allowed_types.end(), d) == attr.allowed_types.end()) {
        std::vector<std::string> names;
        for (DType allowed : attr.allowed_types) names.emplace_back(DTypeName(allowed));
        return InvalidArgumentError(where, ": attr ", Quote(attr.name), " is ", DTypeName(d), ", which ", op.name,
                                    " does not accept (", StrJoin(names, ", "), ")");
      }
    }
    if (attr.type == AttrType::kString && !attr.allowed_strings.empty()) {
      const std::string& text = it->second.get<std::string>();
      if (std::find(attr.allowed_strings.begin(), attr.allowed_strings.end(), text) == attr.allowed_strings.end()) {
        std::vector<std::string> quoted;
        for (const auto& allowed : attr.allowed_strings) quoted.push_back(Quote(allowed));
        return InvalidArgumentError(where, ": attr ", Quote(attr.name), " is ", Quote(text), "; expected one of ",
                                    StrJoin(quoted, ", "));
      }
    }
    if (attr.minimum && it->second.get<int64_t>() < *attr.minimum) {
      return InvalidArgumentError(where, ": attr ", Quote(attr.name), " is ", it->second.get<int64_t>(),
                                  "; it must be >= ", *attr.minimum);
    }
  }
  // A count of inputs or outputs is bounded before anything is made per item.
  for (const auto* args : {&op.inputs, &op.outputs}) {
    for (const ArgDef& arg : *args) {
      if (arg.number_attr.empty()) continue;
      const int64_t n = attrs.find(arg.number_attr)->second.get<int64_t>();
      if (n > kMaxListArgs) {
        return InvalidArgumentError(where, ": attr ", Quote(arg.number_attr), " is ", n, "; '", arg.name,
                                    "' may hold at most ", kMaxListArgs, " tensors");
      }
    }
  }

  // Input count and dtypes against the signature.
  NodeTypes types;
  std::size_t expected_inputs = 0;
  for (const ArgDef& arg : op.inputs) expected_inputs += static_cast<std::size_t>(std::max(0, ArgCount(arg, attrs)));
  if (expected_inputs != inputs.size()) {
    return InvalidArgumentError(where, ": expects ", expected_inputs, " data input", expected_inputs == 1 ? "" : "s",
                                " (", op.Signature(), "), has ", inputs.size());
  }
  std::size_t k = 0;
  for (const ArgDef& arg : op.inputs) {
    for (int j = 0; j < ArgCount(arg, attrs); ++j, ++k) {
      const DType want = ArgType(arg, attrs, j);
      const NodeInput& in = inputs[k];
      if (in.dtype != want) {
        return InvalidArgumentError(
            where, ": input ", k, " ", Quote(in.text), " is ", DTypeName(in.dtype), ", but '", arg.name, "' must be ",
            DTypeName(want), ArgTypeAttr(arg).empty() ? std::string() : StrCat(" (attr ", ArgTypeAttr(arg), ")"));
      }
      types.input_types.push_back(in.dtype);
    }
  }
  for (const ArgDef& arg : op.outputs) {
    const int count = ArgCount(arg, attrs);
    for (int j = 0; j < count; ++j) types.output_types.push_back(ArgType(arg, attrs, j));
  }

  // Shapes.
  std::vector<Shape> in_shapes, in_handle_shapes;
  std::vector<const Tensor*> in_values;
  for (const NodeInput& in : inputs) {
    in_shapes.push_back(in.shape);
    in_handle_shapes.push_back(in.handle_shape);
    const Tensor* value = nullptr;
    if (in.source->op == "Const") {
      auto v = in.source->attrs.find("value");
      if (v != in.source->attrs.end() && v->second.holds<Tensor>()) value = &v->second.get<Tensor>();
    }
    in_values.push_back(value);
  }
  InferenceContext ctx(op, attrs, types.input_types, std::move(in_shapes), std::move(in_values),
                       static_cast<int>(types.output_types.size()));
  ctx.set_input_handle_shapes(in_handle_shapes);
  Status shaped = op.shape_fn(ctx);
  if (!shaped.ok()) return shaped.WithContext(where);
  types.output_shapes = ctx.output_shapes();
  // No shape that no tensor can have gets past inference (core/tensor/size.h).
  for (std::size_t i = 0; i < types.output_shapes.size(); ++i) {
    Status fits = CheckShapeFits(types.output_shapes[i], types.output_types[i]);
    if (!fits.ok()) return fits.WithContext(StrCat(where, ": output ", i));
  }
  // Resource handles carry their variable's (or gradient accumulator's)
  // declared shape along.
  types.output_handle_shapes.assign(types.output_types.size(), Shape::UnknownRank());
  if (def.op == "VarHandle" || def.op == "GradientAccumulator") {
    types.output_handle_shapes[0] = attrs.find("shape")->second.get<Shape>();
  } else if ((def.op == "Identity" || def.op == "Enter" || def.op == "Exit" || def.op == "Switch" ||
              def.op == "Merge") &&
             !in_handle_shapes.empty()) {
    // A handle that passes through, into or out of a loop or cond.
    for (Shape& shape : types.output_handle_shapes) shape = in_handle_shapes[0];
    if (def.op == "Merge" && types.output_handle_shapes.size() > 1)
      types.output_handle_shapes[1] = Shape::UnknownRank();
  }
  return types;
}

std::string Graph::Node::Describe() const { return DescribeNode(def); }

Status ValidateNodeName(std::string_view name) {
  if (name.empty()) return InvalidArgumentError("a node has an empty name");
  if (name[0] == '/') return InvalidArgumentError("node name ", Quote(name), " starts with '/'");
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-' || c == '/';
    if (!ok) {
      return InvalidArgumentError("node name ", Quote(name), " contains ", Quote(std::string(1, c)),
                                  "; names use letters, digits and _ . - /");
    }
  }
  return Status();
}

const Graph::Node* Graph::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &nodes_[static_cast<std::size_t>(it->second)];
}

Expected<Endpoint> Graph::ResolveTensor(std::string_view name) const {
  WEFT_ASSIGN_OR_RETURN(InputRef ref, ParseInputRef(name));
  if (ref.control()) return InvalidArgumentError(Quote(name), " names a node, not a tensor");
  const Node* node = Find(ref.node);
  if (node == nullptr) {
    std::vector<std::string> names;
    for (const Node& n : nodes_) names.push_back(n.name());
    const std::string hint = ClosestMatch(ref.node, names);
    return NotFoundError("the graph has no node ", Quote(ref.node),
                         hint.empty() ? std::string() : StrCat("; did you mean ", Quote(hint), "?"));
  }
  if (ref.index >= node->num_outputs()) {
    return NotFoundError(node->Describe(), " has ", node->num_outputs(), " output", node->num_outputs() == 1 ? "" : "s",
                         "; there is no output ", ref.index);
  }
  return Endpoint{node->id, ref.index};
}

namespace {

using NodeIndex = std::unordered_map<std::string, int>;
using Consumers = std::vector<std::vector<std::pair<int, int>>>;

// An edge out of a NextIteration is a loop's back edge: it closes a cycle
// on purpose and does not count for the order.
bool IsBackEdgeSource(const std::vector<Graph::Node>& nodes, int src) {
  return nodes[static_cast<std::size_t>(src)].def.op == "NextIteration";
}

// Names, ops and attrs: moves def's nodes into |nodes| (sized already).
Status ReadNodes(GraphDef& def, const OpRegistry& registry, std::vector<Graph::Node>& nodes, NodeIndex& index) {
  std::vector<std::string> op_names;
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    Graph::Node& node = nodes[i];
    node.id = static_cast<int>(i);
    node.def = std::move(def.nodes[i]);
    WEFT_RETURN_IF_ERROR(ValidateNodeName(node.def.name).WithContext(StrCat("node #", i)));
    auto [it, inserted] = index.emplace(node.def.name, node.id);
    if (!inserted) {
      return InvalidArgumentError("node ", Quote(node.def.name), " is defined twice (nodes #", it->second, " and #", i,
                                  ")");
    }
    node.op = registry.Find(node.def.op);
    if (node.op == nullptr) {
      if (op_names.empty()) {
        for (const OpDef* op : registry.All()) op_names.push_back(op->name);
      }
      const std::string hint = ClosestMatch(node.def.op, op_names);
      return InvalidArgumentError(DescribeNode(node.def), ": unknown op ", Quote(node.def.op),
                                  hint.empty() ? "" : StrCat("; did you mean ", Quote(hint), "?"),
                                  " (`weft ops` lists them)");
    }
  }
  return Status();
}

// Inputs: resolve names; data inputs before control inputs.
Status ResolveInputs(std::vector<Graph::Node>& nodes, const NodeIndex& index) {
  for (Graph::Node& node : nodes) {
    bool seen_control = false;
    for (std::size_t k = 0; k < node.def.inputs.size(); ++k) {
      const std::string& text = node.def.inputs[k];
      auto ref = ParseInputRef(text);
      if (!ref.ok()) return ref.status().WithContext(node.Describe());
      auto it = index.find(ref->node);
      if (it == index.end()) {
        return InvalidArgumentError(node.Describe(), ": input ", k, " ", Quote(text), " names no node in the graph");
      }
      if (ref->control()) {
        seen_control = true;
        node.control_inputs.push_back(it->second);
      } else {
        if (seen_control) {
          return InvalidArgumentError(node.Describe(), ": data input ", Quote(text),
                                      " comes after a control input; list '^' inputs last");
        }
        node.inputs.push_back(Endpoint{it->second, ref->index});
      }
    }
  }
  return Status();
}

// Fills |consumers| and counts each node's inputs that are not back edges
// into |pending|.
Status CountEdges(const std::vector<Graph::Node>& nodes, Consumers& consumers, std::vector<int>& pending) {
  for (const Graph::Node& node : nodes) {
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      consumers[static_cast<std::size_t>(node.inputs[k].node)].push_back({node.id, static_cast<int>(k)});
      if (IsBackEdgeSource(nodes, node.inputs[k].node)) {
        if (node.def.op != "Merge") {
          return InvalidArgumentError(node.Describe(), ": input ", k, " comes from NextIteration ",
                                      Quote(nodes[static_cast<std::size_t>(node.inputs[k].node)].name()),
                                      ", which may only feed a Merge (the head of its loop)");
        }
      } else {
        ++pending[static_cast<std::size_t>(node.id)];
      }
    }
    for (int c : node.control_inputs) {
      consumers[static_cast<std::size_t>(c)].push_back({node.id, -1});
      if (IsBackEdgeSource(nodes, c)) {
        return InvalidArgumentError(node.Describe(), ": has a control input from NextIteration ",
                                    Quote(nodes[static_cast<std::size_t>(c)].name()),
                                    "; a NextIteration may only feed a Merge");
      }
      ++pending[static_cast<std::size_t>(node.id)];
    }
  }
  return Status();
}

// The error for a graph whose nodes with |pending| inputs left lie on a
// cycle, which it prints.
Status CycleError(const std::vector<Graph::Node>& nodes, const std::vector<int>& pending) {
  const std::size_t n = nodes.size();
  // Walk back from a node on the cycle to print it.
  int start = -1;
  for (std::size_t i = 0; i < n && start < 0; ++i) {
    if (pending[i] > 0) start = static_cast<int>(i);
  }
  std::vector<int> path;
  std::vector<int> position(n, -1);
  int at = start;
  while (position[static_cast<std::size_t>(at)] < 0) {
    position[static_cast<std::size_t>(at)] = static_cast<int>(path.size());
    path.push_back(at);
    const Graph::Node& node = nodes[static_cast<std::size_t>(at)];
    int next = -1;
    for (const Endpoint& e : node.inputs) {
      if (pending[static_cast<std::size_t>(e.node)] > 0 && !IsBackEdgeSource(nodes, e.node)) next = e.node;
    }
    for (int c : node.control_inputs) {
      if (next < 0 && pending[static_cast<std::size_t>(c)] > 0) next = c;
    }
    at = next;
  }
  // The walk followed inputs; reverse it into data-flow order and start
  // from the cycle's first node in the file, for a stable message.
  std::vector<int> cycle(path.begin() + position[static_cast<std::size_t>(at)], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  std::vector<std::string> names;
  for (int id : cycle) names.push_back(StrCat("'", nodes[static_cast<std::size_t>(id)].name(), "'"));
  names.push_back(names.front());
  return InvalidArgumentError("the graph has a cycle: ", StrJoin(names, " -> "),
                              " (loops need the control-flow ops Enter/NextIteration)");
}

// Topological order (Kahn) into |order|, and |consumers|; what is left
// over lies on a cycle.
Status OrderNodes(const std::vector<Graph::Node>& nodes, Consumers& consumers, std::vector<int>& order) {
  const std::size_t n = nodes.size();
  std::vector<int> pending(n, 0);
  consumers.assign(n, {});
  WEFT_RETURN_IF_ERROR(CountEdges(nodes, consumers, pending));
  std::deque<int> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  }
  while (!ready.empty()) {
    const int id = ready.front();
    ready.pop_front();
    order.push_back(id);
    if (IsBackEdgeSource(nodes, id)) continue;
    for (const auto& [consumer, index] : consumers[static_cast<std::size_t>(id)]) {
      if (--pending[static_cast<std::size_t>(consumer)] == 0) ready.push_back(consumer);
    }
  }
  if (order.size() != n) return CycleError(nodes, pending);
  return Status();
}

// What shape inference knows of |node|'s inputs (its sources' types are
// inferred already, but for back edges).
std::vector<NodeInput> InputsOf(const std::vector<Graph::Node>& nodes, const Graph::Node& node) {
  std::vector<NodeInput> inputs;
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    const Endpoint& src = node.inputs[k];
    const Graph::Node& from = nodes[static_cast<std::size_t>(src.node)];
    NodeInput in;
    in.text = node.def.inputs[k];
    in.source = &from.def;
    in.source_outputs = from.num_outputs();
    in.index = src.index;
    if (src.index < from.num_outputs()) {
      in.dtype = from.output_types[static_cast<std::size_t>(src.index)];
      in.shape = from.output_shapes[static_cast<std::size_t>(src.index)];
      in.handle_shape = from.output_handle_shapes[static_cast<std::size_t>(src.index)];
    } else if (IsBackEdgeSource(nodes, src.node) && from.output_types.empty()) {
      // A back edge, not inferred yet: the Merge's shape comes from the
      // values entering the loop; the NextIteration is checked against it
      // below.
      in.back_edge = true;
      in.source_outputs = 1;
      if (auto t = node.def.attrs.find("T"); t != node.def.attrs.end() && t->second.holds<DType>()) {
        in.dtype = t->second.get<DType>();
      }
    }
    inputs.push_back(std::move(in));
  }
  for (NodeInput& in : inputs) {
    if (!in.back_edge) continue;
    for (const NodeInput& other : inputs) {
      if (!other.back_edge) in.shape = other.shape;
    }
  }
  return inputs;
}

// Attrs, types and shapes, in topological order so inputs are known.
Status InferTypes(std::vector<Graph::Node>& nodes, const std::vector<int>& order) {
  for (int id : order) {
    Graph::Node& node = nodes[static_cast<std::size_t>(id)];
    std::vector<NodeInput> inputs = InputsOf(nodes, node);
    WEFT_ASSIGN_OR_RETURN(NodeTypes types, InferNode(*node.op, node.def, inputs));
    node.input_types = std::move(types.input_types);
    node.output_types = std::move(types.output_types);
    node.output_shapes = std::move(types.output_shapes);
    node.output_handle_shapes = std::move(types.output_handle_shapes);
  }
  return Status();
}

// Every back edge carries what the Merge promised: the same dtype, and a
// shape at least as specific as the Merge's (a loop variable may not
// change shape across iterations beyond its shape invariant).
Status CheckBackEdges(const std::vector<Graph::Node>& nodes) {
  for (const Graph::Node& node : nodes) {
    if (node.def.op != "Merge") continue;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const Graph::Node& from = nodes[static_cast<std::size_t>(node.inputs[k].node)];
      if (from.def.op != "NextIteration") continue;
      const Shape& want = node.output_shapes[0];
      const Shape& got = from.output_shapes[0];
      bool fits = from.output_types[0] == node.output_types[0];
      if (fits && !want.unknown_rank()) {
        fits = !got.unknown_rank() && got.rank() == want.rank();
        for (int d = 0; fits && d < want.rank(); ++d) {
          const int64_t w = want.dims()[static_cast<std::size_t>(d)];
          fits = w < 0 || got.dims()[static_cast<std::size_t>(d)] == w;
        }
      }
      if (!fits) {
        return InvalidArgumentError(
            node.Describe(), ": the loop variable enters as ", DTypeName(node.output_types[0]),
            node.output_shapes[0].ToString(), " but comes back from ", Quote(from.name()), " as ",
            DTypeName(from.output_types[0]), from.output_shapes[0].ToString(),
            "; a loop variable keeps its dtype, and its shape may only change where its shape invariant has "
            "unknown dimensions (while_loop shape_invariants)");
      }
    }
  }
  return Status();
}

}  // namespace

Expected<Graph> Graph::FromGraphDef(GraphDef def, const OpRegistry& registry) {
  if (def.min_consumer > kGraphVersion) {
    return InvalidArgumentError("the graph needs a reader of graph format v", def.min_consumer,
                                " or newer (it was written by v", def.producer, "); this weft reads up to v",
                                kGraphVersion, ": upgrade weft");
  }
  Graph g;
  g.producer_ = def.producer;
  g.library_ = std::move(def.library);
  g.nodes_.resize(def.nodes.size());
  g.index_.reserve(def.nodes.size());  // no rehash of a million names
  WEFT_RETURN_IF_ERROR(ReadNodes(def, registry, g.nodes_, g.index_));
  WEFT_RETURN_IF_ERROR(ResolveInputs(g.nodes_, g.index_));
  WEFT_RETURN_IF_ERROR(OrderNodes(g.nodes_, g.consumers_, g.order_));
  WEFT_RETURN_IF_ERROR(InferTypes(g.nodes_, g.order_));
  WEFT_RETURN_IF_ERROR(CheckBackEdges(g.nodes_));
  return g;
}

GraphDef Graph::ToGraphDef() const {
  GraphDef def;
  def.producer = kGraphVersion;
  def.min_consumer = kGraphMinConsumer;
  for (const Node& node : nodes_) def.nodes.push_back(node.def);
  def.library = library_;
  return def;
}

std::vector<bool> AncestorsOf(const Graph& graph, const std::vector<int>& roots) {
  std::vector<bool> seen(static_cast<std::size_t>(graph.num_nodes()), false);
  std::vector<int> stack = roots;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (seen[static_cast<std::size_t>(id)]) continue;
    seen[static_cast<std::size_t>(id)] = true;
    const Graph::Node& n = graph.node(id);
    for (const Endpoint& e : n.inputs) stack.push_back(e.node);
    for (int c : n.control_inputs) stack.push_back(c);
  }
  return seen;
}

std::vector<std::string> UnreadOutputs(const Graph& graph) {
  std::vector<std::string> out;
  for (const Graph::Node& n : graph.nodes()) {
    if (n.op->stateful || n.num_outputs() == 0 || n.op_name() == "Placeholder" || n.op_name() == "Const") continue;
    if (!graph.consumers()[static_cast<std::size_t>(n.id)].empty()) continue;
    if (n.output_types[0] == DType::kResource) continue;
    out.push_back(n.name());
  }
  return out;
}

std::vector<std::string> PlaceholdersFeeding(const Graph& graph, const std::vector<Endpoint>& ends) {
  std::vector<int> roots;
  for (const Endpoint& e : ends) roots.push_back(e.node);
  const std::vector<bool> seen = AncestorsOf(graph, roots);
  std::vector<std::string> out;
  for (const Graph::Node& n : graph.nodes()) {
    if (n.op_name() == "Placeholder" && seen[static_cast<std::size_t>(n.id)]) out.push_back(n.name());
  }
  return out;
}

}  // namespace weft
