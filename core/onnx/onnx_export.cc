// The ONNX exporter: the part of a Weft graph that computes the chosen
// outputs, as an opset-17 ONNX model. Variables become initializers, with
// their values from a checkpoint or from the Consts their initialiser
// assigns; ops without an ONNX mapping are listed in one error. The model
// is checked by ONNX's checker and strict shape inference before it is
// returned. See docs/onnx.md.
//
// This file is the driver and the machinery the export functions share
// (core/onnx/exporter.h); the functions by op family are in
// onnx_export_elementwise.cc, onnx_export_nn.cc and onnx_export_shape.cc.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <unordered_set>

#include <map>
#include <set>
#include <utility>

#include "core/base/file_util.h"
#include "core/base/strings.h"
#include "core/checkpoint/manager.h"
#include "core/graph/graph.h"
#include "core/onnx/exporter.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io {

// --- ONNX attributes and tensors ----------------------------------------------------------

void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void AttrFloat(onnx::NodeProto* n, const std::string& name, double v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(static_cast<float>(v));
}

void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void AttrStr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

Status FillTensor(onnx::TensorProto* t, const std::string& name, const Tensor& value) {
  t->set_name(name);
  const int32_t type = DTypeToOnnx(value.dtype());
  if (type == onnx::TensorProto::UNDEFINED) return UnimplementedError("a ", DTypeName(value.dtype()), " tensor");
  t->set_data_type(type);
  for (int64_t d : value.shape().dims()) t->add_dims(d);
  if (value.dtype() == DType::kString) {
    for (int64_t i = 0; i < value.num_elements(); ++i) t->add_string_data(std::string(value.string_at(i)));
  } else if (value.num_elements() > 0) {
    t->set_raw_data(value.raw_data(), value.byte_size());
  }
  return Status();
}

const AttrValue* FindAttr(const Graph::Node& n, const char* name) {
  auto it = n.def.attrs.find(name);
  return it == n.def.attrs.end() ? nullptr : &it->second;
}

// --- Names and emission -------------------------------------------------------------------

std::string Exporter::Fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; used_.count(name) != 0; ++i) name = StrCat(base, "_", i);
  used_.insert(name);
  return name;
}

std::string Exporter::TensorName(const Endpoint& e) const {
  const std::string& n = g_.node(e.node).name();
  return e.index == 0 ? n : StrCat(n, ":", e.index);
}

onnx::NodeProto* Exporter::Emit(const std::string& op, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* n = graph_->add_node();
  n->set_op_type(op);
  n->set_name(Fresh(name));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

onnx::NodeProto* Exporter::Emit(const std::string& op, const std::vector<std::string>& inputs,
                                const std::vector<std::string>& outputs, const std::string& name,
                                const std::function<void(onnx::NodeProto*)>& attrs) {
  onnx::NodeProto* n = Emit(op, inputs, outputs, name);
  attrs(n);
  return n;
}

std::string Exporter::Emit1(const std::string& op, const std::vector<std::string>& inputs, const std::string& name,
                            const std::function<void(onnx::NodeProto*)>& attrs) {
  const std::string out = Fresh(name);
  onnx::NodeProto* n = Emit(op, inputs, {out}, name);
  if (attrs) attrs(n);
  return out;
}

Expected<std::string> Exporter::Initializer(const std::string& base, const Tensor& value) {
  const std::string name = Fresh(base);
  WEFT_RETURN_IF_ERROR(FillTensor(graph_->add_initializer(), name, value));
  ++initializers_;
  return name;
}

std::string Exporter::I64s(const std::string& base, const std::vector<int64_t>& v) {
  return *Initializer(base, Tensor::FromVector<int64_t>(v));
}

std::string Exporter::ScalarConst(const std::string& base, DType dtype, double v) {
  return *Initializer(base, *ScalarOf(dtype, v));
}

std::string Exporter::Transpose(const std::string& in, const std::vector<int64_t>& perm, const std::string& name) {
  return Emit1("Transpose", {in}, name, [&](onnx::NodeProto* n) { AttrInts(n, "perm", perm); });
}

// --- Inputs, outputs and sources ----------------------------------------------------------

const Tensor* Exporter::ConstInput(const Node& n, int i) const {
  const Node& src = g_.node(n.inputs[static_cast<std::size_t>(i)].node);
  if (src.op_name() == "Const") return &FindAttr(src, "value")->get<Tensor>();
  auto it = var_values_.find(n.inputs[static_cast<std::size_t>(i)].node);
  return it == var_values_.end() ? nullptr : &it->second;
}

std::string Exporter::In(const Node& n, int i) {
  if (i < 0 || static_cast<std::size_t>(i) >= n.inputs.size()) {
    deferred_error_ = InternalError("node ", Quote(n.name()), " (", n.op_name(), ") has no input ", i);
    return std::string();
  }
  const std::string& name = names_.at(n.inputs[static_cast<std::size_t>(i)]);
  auto pending = pending_.find(name);
  if (pending != pending_.end()) {
    Status s = FillTensor(graph_->add_initializer(), name, pending->second);
    if (!s.ok()) deferred_error_ = s;
    ++initializers_;
    pending_.erase(pending);
  }
  return name;
}

const Shape& Exporter::InShape(const Node& n, int i) const {
  const Endpoint& e = n.inputs[static_cast<std::size_t>(i)];
  return g_.node(e.node).output_shapes[static_cast<std::size_t>(e.index)];
}

const std::string* Exporter::FindOutputName(int id, int k) const {
  auto it = names_.find(Endpoint{id, k});
  return it == names_.end() ? nullptr : &it->second;
}

void Exporter::AddGraphInput(const std::string& name, DType dtype, const Shape& s) {
  onnx::ValueInfoProto* in = graph_->add_input();
  in->set_name(name);
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(DTypeToOnnx(dtype));
  if (!s.unknown_rank()) {
    auto* shape = tt->mutable_shape();
    for (int i = 0; i < s.rank(); ++i) {
      auto* d = shape->add_dim();
      if (s.dim(i) >= 0) {
        d->set_dim_value(s.dim(i));
      } else {
        d->set_dim_param(i == 0 ? "batch" : StrCat("d", i));
      }
    }
  }
  inputs_.push_back(name);
}

const Tensor* Exporter::VariableValue(int id) const {
  auto v = var_values_.find(id);
  return v == var_values_.end() ? nullptr : &v->second;
}

// --- The driver ---------------------------------------------------------------------------

Status Exporter::Collect() {
  if (options_.outputs.empty()) {
    // The sinks: data outputs nothing reads, of ops that compute.
    static const std::set<std::string> skip = {"Const",     "Placeholder", "NoOp",      "Assign",
                                               "AssignAdd", "AssignSub",   "VarHandle", "VarIsInitialized",
                                               "Save",      "SaveShard",   "Restore"};
    for (int id : g_.topological_order()) {
      const Node& n = g_.node(id);
      if (skip.count(n.op_name()) != 0 || n.op_name().rfind("ResourceApply", 0) == 0 || n.op_name()[0] == '_') continue;
      for (std::size_t k = 0; k < n.output_types.size(); ++k) {
        bool read = false;
        for (const auto& [consumer, input] : g_.consumers()[static_cast<std::size_t>(id)]) {
          if (input >= 0 && g_.node(consumer).inputs[static_cast<std::size_t>(input)].index == static_cast<int>(k)) {
            read = true;
          }
        }
        if (!read) outputs_.push_back({id, static_cast<int>(k)});
      }
    }
    if (outputs_.empty()) return InvalidArgumentError("the graph has no outputs to export; name them with --output");
  } else {
    for (const std::string& name : options_.outputs) {
      WEFT_ASSIGN_OR_RETURN(Endpoint e, g_.ResolveTensor(name));
      outputs_.push_back(e);
    }
  }
  // Every node the outputs need through data edges.
  std::vector<bool> need(g_.nodes().size(), false);
  std::vector<int> stack;
  for (const Endpoint& e : outputs_) stack.push_back(e.node);
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (need[static_cast<std::size_t>(id)]) continue;
    need[static_cast<std::size_t>(id)] = true;
    const Node& n = g_.node(id);
    if (n.op_name() == "ReadVariable") continue;  // a variable: its value is an initializer
    for (const Endpoint& in : n.inputs) stack.push_back(in.node);
  }
  for (int id : g_.topological_order()) {
    if (need[static_cast<std::size_t>(id)]) needed_.push_back(id);
  }
  return Status();
}

Status Exporter::ResolveVariables() {
  std::unique_ptr<checkpoint::BundleReader> reader;
  if (!options_.checkpoint.empty()) {
    auto opened = checkpoint::OpenNewestBundle(options_.checkpoint);
    if (!opened.ok()) return opened.status().WithContext(StrCat("--checkpoint ", options_.checkpoint));
    reader = std::move(*opened);
    have_checkpoint_ = true;
  }
  for (int id : needed_) {
    const Node& n = g_.node(id);
    if (n.op_name() != "ReadVariable") continue;
    const Node& handle = g_.node(n.inputs[0].node);
    if (handle.op_name() != "VarHandle") {
      return UnimplementedError("node ", Quote(n.name()), " reads a variable through ", handle.op_name(),
                                "; only VarHandle variables are exported");
    }
    if (reader != nullptr && reader->Find(handle.name()) != nullptr) {
      WEFT_ASSIGN_OR_RETURN(Tensor t, reader->Read(handle.name()));
      var_values_[id] = t;
      continue;
    }
    // The Const its initialiser assigns.
    bool found = false;
    for (const auto& [consumer, input] : g_.consumers()[static_cast<std::size_t>(n.inputs[0].node)]) {
      const Node& c = g_.node(consumer);
      if (c.op_name() != "Assign" || input != 0) continue;
      const Node& value = g_.node(c.inputs[1].node);
      if (value.op_name() == "Const") {
        var_values_[id] = FindAttr(value, "value")->get<Tensor>();
        found = true;
        break;
      }
    }
    if (!found) missing_.push_back(handle.name());
  }
  return Status();
}

Status Exporter::Convert(int id) {
  const Node& n = g_.node(id);
  // Output names: the node's name, ":k" after the first.
  for (std::size_t k = 0; k < n.output_types.size(); ++k) {
    const std::string name = Fresh(TensorName({id, static_cast<int>(k)}));
    names_[Endpoint{id, static_cast<int>(k)}] = name;
  }
  auto it = Exports().find(n.op_name());
  if (it == Exports().end()) {
    unsupported_[n.op_name()].push_back(n.name());
    return Status();
  }
  ExportContext c(*this, id);
  return it->second(c);
}

namespace {

// Adds every name the nodes of |graph| (and of their subgraphs) read to
// |read|: a branch or loop body reads names of the graph around it.
void AddReads(const onnx::GraphProto& graph, std::unordered_set<std::string>& read) {
  for (const onnx::NodeProto& n : graph.node()) {
    for (const std::string& in : n.input()) read.insert(in);
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) AddReads(a.g(), read);
      for (const onnx::GraphProto& g : a.graphs()) AddReads(g, read);
    }
  }
}

// Drops the nodes whose outputs nothing reads, and then the initializers
// nothing reads: an export function that reads an input's producer in its
// own way (a quantized filter, QuantizedConvWeights) leaves the producer
// unread. Nodes are in topological order. Returns the initializers dropped.
int RemoveUnread(onnx::GraphProto* graph) {
  std::unordered_set<std::string> read;
  for (const onnx::ValueInfoProto& o : graph->output()) read.insert(o.name());
  std::vector<bool> keep(static_cast<std::size_t>(graph->node_size()), false);
  for (int i = graph->node_size() - 1; i >= 0; --i) {
    const onnx::NodeProto& n = graph->node(i);
    bool used = false;
    for (const std::string& out : n.output()) used = used || read.contains(out);
    if (!used) continue;
    keep[static_cast<std::size_t>(i)] = true;
    onnx::GraphProto one;
    *one.add_node() = n;
    AddReads(one, read);
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < graph->node_size(); ++i) {
    if (keep[static_cast<std::size_t>(i)]) *nodes.Add() = std::move(*graph->mutable_node(i));
  }
  graph->mutable_node()->Swap(&nodes);
  google::protobuf::RepeatedPtrField<onnx::TensorProto> initializers;
  int dropped = 0;
  for (int i = 0; i < graph->initializer_size(); ++i) {
    if (read.contains(graph->initializer(i).name())) {
      *initializers.Add() = std::move(*graph->mutable_initializer(i));
    } else {
      ++dropped;
    }
  }
  graph->mutable_initializer()->Swap(&initializers);
  return dropped;
}

}  // namespace

Expected<ExportedModel> Exporter::Run() {
  WEFT_RETURN_IF_ERROR(Collect());
  WEFT_RETURN_IF_ERROR(ResolveVariables());
  model_.set_ir_version(8);
  model_.set_producer_name("weft");
  auto* opset = model_.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpset);
  graph_ = model_.mutable_graph();
  graph_->set_name(options_.graph_name);
  for (int id : needed_) {
    Status s = Convert(id);
    if (!s.ok()) return s.WithContext(StrCat("node ", Quote(g_.node(id).name()), " (", g_.node(id).op_name(), ")"));
  }
  if (!unsupported_.empty()) {
    std::string list;
    for (const auto& [op, nodes] : unsupported_) {
      list += StrCat("\n  ", op, " x", nodes.size(), " (first: node ", Quote(nodes[0]), ")");
    }
    std::string chosen;
    if (options_.outputs.empty()) {
      std::vector<std::string> names;
      for (const Endpoint& e : outputs_) names.push_back(TensorName(e));
      chosen = StrCat("\n(with no --output, every tensor nothing reads is exported: ", StrJoin(names, ", "),
                      "; name the ones to export with --output)");
    }
    return UnimplementedError(unsupported_.size(), " op type", unsupported_.size() == 1 ? "" : "s",
                              " of the graph cannot be exported to ONNX:", list,
                              "\n(docs/onnx.md lists the ops Weft exports)", chosen);
  }
  if (!missing_.empty()) {
    return FailedPreconditionError(
        missing_.size(), " variable", missing_.size() == 1 ? " has" : "s have", " no value to export (",
        StrJoin(missing_, ", "), "): ",
        have_checkpoint_ ? "the checkpoint does not have them"
                         : "the initialiser does not assign constants; give the checkpoint of the trained model "
                           "(--checkpoint DIR)");
  }
  WEFT_RETURN_IF_ERROR(deferred_error_);
  ExportedModel result;
  for (const Endpoint& e : outputs_) {
    if (auto pending = pending_.find(names_.at(e)); pending != pending_.end()) {  // a constant output
      WEFT_RETURN_IF_ERROR(FillTensor(graph_->add_initializer(), pending->first, pending->second));
      ++initializers_;
      pending_.erase(pending);
    }
    const Node& n = g_.node(e.node);
    // The graph output is named after the node (":k" dropped for output 0),
    // and an Identity gives it that name when the tensor has another.
    std::string want = TensorName(e);
    for (char& ch : want) {
      if (ch == ':') ch = '_';
    }
    const std::string have = names_.at(e);
    std::string name = have;
    if (have != want && used_.count(want) == 0) {
      name = Fresh(want);
      Emit("Identity", {have}, {name}, name);
    }
    onnx::ValueInfoProto* o = graph_->add_output();
    o->set_name(name);
    auto* tt = o->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(DTypeToOnnx(n.output_types[static_cast<std::size_t>(e.index)]));
    const Shape& s = n.output_shapes[static_cast<std::size_t>(e.index)];
    if (!s.unknown_rank()) {
      auto* shape = tt->mutable_shape();
      for (int i = 0; i < s.rank(); ++i) {
        auto* d = shape->add_dim();
        if (s.dim(i) >= 0) d->set_dim_value(s.dim(i));
      }
    }
    result.outputs.push_back(name);
  }
  initializers_ -= RemoveUnread(graph_);
  try {
    onnx::checker::check_model(model_);
    onnx::ModelProto inferred = model_;
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
  } catch (const std::exception& e) {
    return InternalError("the exported model fails ONNX's checks (a bug in Weft's exporter): ", e.what());
  }
  result.inputs = inputs_;
  result.initializers = initializers_;
  if (!model_.SerializeToString(&result.bytes)) {
    return ResourceExhaustedError("the model does not serialize (a protobuf message holds at most 2 GiB)");
  }
  return result;
}

// --- ExportContext ------------------------------------------------------------------------

ExportContext::ExportContext(Exporter& exporter, int id)
    : e_(exporter),
      id_(id),
      n_(exporter.graph().node(id)),
      out_(n_.output_types.empty() ? std::string() : exporter.OutputName(id, 0)),
      dtype_(n_.output_types.empty() ? DType::kInvalid : n_.output_types[0]) {}

int64_t ExportContext::Int(const char* name, int64_t def) const {
  const AttrValue* a = FindAttr(n_, name);
  return a != nullptr && a->holds<int64_t>() ? a->get<int64_t>() : def;
}

double ExportContext::Float(const char* name, double def) const {
  const AttrValue* a = FindAttr(n_, name);
  return a != nullptr && a->holds<double>() ? a->get<double>() : def;
}

bool ExportContext::Bool(const char* name, bool def) const {
  const AttrValue* a = FindAttr(n_, name);
  return a != nullptr && a->holds<bool>() ? a->get<bool>() : def;
}

std::string ExportContext::Str(const char* name, const std::string& def) const {
  const AttrValue* a = FindAttr(n_, name);
  return a != nullptr && a->holds<std::string>() ? a->get<std::string>() : def;
}

std::vector<int64_t> ExportContext::Ints(const char* name) const {
  const AttrValue* a = FindAttr(n_, name);
  return a != nullptr && a->holds<std::vector<int64_t>>() ? a->get<std::vector<int64_t>>() : std::vector<int64_t>{};
}

onnx::NodeProto* ExportContext::Simple(const std::string& onnx_op, int inputs) {
  std::vector<std::string> ins;
  for (int i = 0; i < inputs; ++i) ins.push_back(In(i));
  return Emit(onnx_op, ins, {out_}, name());
}

// --- The table ----------------------------------------------------------------------------

namespace exports {

ExportFn Same(std::string onnx_op, int inputs) {
  return [onnx_op = std::move(onnx_op), inputs](ExportContext& c) {
    c.Simple(onnx_op, inputs);
    return Status();
  };
}

// Graph inputs, and the values that become initializers when read.
void AddSourceExports(ExportTable& t) {
  t["Placeholder"] = [](ExportContext& c) {
    c.exporter().AddGraphInput(c.out(), c.dtype(), c.node().output_shapes[0]);
    return Status();
  };
  t["Const"] = [](ExportContext& c) {
    c.exporter().SetPending(c.out(), FindAttr(c.node(), "value")->get<Tensor>());
    return Status();
  };
  t["ReadVariable"] = [](ExportContext& c) {
    if (const Tensor* v = c.exporter().VariableValue(c.id())) c.exporter().SetPending(c.out(), *v);
    return Status();
  };
}

}  // namespace exports

const ExportTable& Exports() {
  static const ExportTable* table = [] {
    auto* t = new ExportTable;
    exports::AddSourceExports(*t);
    exports::AddElementwiseExports(*t);
    exports::AddNnExports(*t);
    exports::AddShapeExports(*t);
    exports::AddDynamicExports(*t);
    return t;
  }();
  return *table;
}

Expected<ExportedModel> ExportOnnx(const GraphDef& def, const ExportOptions& options) {
  WEFT_ASSIGN_OR_RETURN(Graph graph, Graph::FromGraphDef(def));
  Exporter exporter(graph, options);
  return exporter.Run();
}

Expected<ExportedModel> ExportOnnxFile(const GraphDef& def, const std::string& path, const ExportOptions& options) {
  WEFT_ASSIGN_OR_RETURN(ExportedModel model, ExportOnnx(def, options));
  WEFT_RETURN_IF_ERROR(WriteFileAtomically(path, model.bytes));
  return model;
}

}  // namespace weft::onnx_io
