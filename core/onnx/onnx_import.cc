// The ONNX importer's driver: reading and checking the model (ONNX's
// checker and strict shape inference), refusing unsupported ops all at
// once, deciding how initializers are stored, materialising values, and
// converting node by node and subgraph by subgraph (the converters are in
// onnx_ops.cc and the files it names; NodeContext is in
// onnx_node_context.cc, tensors and types in onnx_tensors.cc). See
// docs/onnx.md.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/base/file_util.h"
#include "core/base/strings.h"
#include "core/graph/serialize.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io {

std::string ConverterKey(const onnx::NodeProto& node) {
  if (node.domain().empty() || node.domain() == "ai.onnx") return node.op_type();
  return StrCat(node.domain(), "::", node.op_type());
}

std::string SanitiseName(std::string_view onnx_name) {
  std::string out;
  for (char c : onnx_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-' || c == '/';
    out.push_back(ok ? c : '_');
  }
  while (!out.empty() && out.front() == '/') out.erase(out.begin());
  while (!out.empty() && out.back() == '/') out.pop_back();
  // "a//b" would be an empty scope.
  for (std::size_t p; (p = out.find("//")) != std::string::npos;) out.erase(p, 1);
  return out.empty() ? std::string("node") : out;
}

// --- Importer ------------------------------------------------------------------------------

Importer::Importer(const onnx::ModelProto& model, std::string source, std::string base_dir,
                   const ImportOptions& options)
    : model_(model), source_(std::move(source)), base_dir_(std::move(base_dir)), options_(options) {}

Value* Importer::Find(const std::string& name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

Layout Importer::LayoutOf(const std::string& name) const {
  auto v = values_.find(name);
  if (v == values_.end() || v->second.initializer.empty()) return Layout::kAsIs;
  auto it = layouts_.find(v->second.initializer);
  return it == layouts_.end() ? Layout::kAsIs : it->second;
}

namespace {

// |t| rearranged for |layout|.
Expected<Tensor> Rearranged(const Tensor& t, Layout layout, int64_t group) {
  if (layout == Layout::kAsIs) return t;
  if (t.rank() != 4 || (t.dtype() != DType::kF32 && t.dtype() != DType::kF64)) {
    return InternalError("conv weights must be 4-D f32 or f64, got ", t.TypeString());
  }
  const int64_t o = t.dim(0), i = t.dim(1), kh = t.dim(2), kw = t.dim(3);
  const std::size_t es = DTypeSize(t.dtype());
  Shape shape;
  // Destination index of source element (oo, ii, y, x).
  std::function<int64_t(int64_t, int64_t, int64_t, int64_t)> dst;
  if (layout == Layout::kConvHwio) {
    shape = Shape{kh, kw, i, o};
    dst = [=](int64_t oo, int64_t ii, int64_t y, int64_t x) { return ((y * kw + x) * i + ii) * o + oo; };
  } else {
    const int64_t c = group, m = o / group;
    shape = Shape{kh, kw, c, m};
    dst = [=](int64_t oo, int64_t, int64_t y, int64_t x) { return ((y * kw + x) * c + oo / m) * m + oo % m; };
  }
  WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), shape));
  const char* src = static_cast<const char*>(t.raw_data());
  char* dest = static_cast<char*>(out.raw_data());
  int64_t s = 0;
  for (int64_t oo = 0; oo < o; ++oo) {
    for (int64_t ii = 0; ii < i; ++ii) {
      for (int64_t y = 0; y < kh; ++y) {
        for (int64_t x = 0; x < kw; ++x, ++s) {
          std::memcpy(dest + static_cast<std::size_t>(dst(oo, ii, y, x)) * es, src + static_cast<std::size_t>(s) * es,
                      es);
        }
      }
    }
  }
  return out;
}

}  // namespace

Expected<Output> Importer::Param(const Tensor& value, const std::string& name) {
  const bool variable = !options_.freeze && IsFloating(value.dtype());
  if (!variable) return b_.Const(value, name);
  if (subgraph_depth_ > 0) {
    // A variable and its initialising Assign would be inside the cond or
    // loop, out of reach of the init NoOp.
    return UnimplementedError("parameters derived from initializers (", Quote(name),
                              ") inside an If, Loop or Scan body can only be constants: import the model with "
                              "--freeze (weft run does), which makes it an inference graph");
  }
  Output handle =
      b_.Op("VarHandle", {}, {{"dtype", AttrValue(value.dtype())}, {"shape", AttrValue(value.shape())}}, name);
  {
    auto scope = b_.NameScope(handle.node_name());
    Output init_value = b_.Const(value, "value");
    inits_.push_back(b_.Op("Assign", {handle, init_value}, {}, "init"));
  }
  ++variables_;
  WEFT_RETURN_IF_ERROR(b_.status());
  return b_.Op("ReadVariable", {handle}, {{"dtype", AttrValue(value.dtype())}}, handle.node_name() + "/read");
}

Expected<Output> Importer::Materialise(const std::string& name, Layout layout) {
  Value* v = Find(name);
  if (v == nullptr) {
    return InvalidArgumentError("input ", Quote(name),
                                " is not a graph input, an initializer or an earlier node's "
                                "output (a dangling input)");
  }
  if (v->out.valid()) return v->out;
  if (v->nhwc.valid()) {
    v->out = b_.Op("Transpose", {v->nhwc}, {{"perm", AttrValue(std::vector<int64_t>{0, 3, 1, 2})}},
                   SanitiseName(name) + "/nchw");
    WEFT_RETURN_IF_ERROR(b_.status());
    return v->out;
  }
  if (!v->known.valid()) {
    auto it = unproduced_.find(name);
    if (it != unproduced_.end()) {
      return UnimplementedError("tensor ", Quote(name), " is an optional output that Weft does not compute (",
                                it->second, ")");
    }
    return InternalError("tensor ", Quote(name), " has no value yet");
  }
  if (!v->initializer.empty()) {
    const Layout stored = LayoutOf(name);
    if (stored != layout) return InternalError("initializer ", Quote(v->initializer), " requested in another layout");
    // An Identity of an initializer shares its node.
    Value* root = Find(v->initializer);
    if (root != nullptr && root != v && root->out.valid()) {
      v->out = root->out;
      return v->out;
    }
    int64_t group = 1;
    if (layout == Layout::kDepthwiseHwcm) {
      auto g = groups_.find(v->initializer);
      group = g == groups_.end() ? 1 : g->second;
    }
    WEFT_ASSIGN_OR_RETURN(Tensor stored_value, Rearranged(v->known, layout, group));
    WEFT_ASSIGN_OR_RETURN(v->out, Param(stored_value, SanitiseName(v->initializer)));
    if (root != nullptr) root->out = v->out;
    return v->out;
  }
  v->out = b_.Const(v->known, SanitiseName(name));
  WEFT_RETURN_IF_ERROR(b_.status());
  return v->out;
}

Expected<Output> Importer::MaterialiseNhwc(const std::string& name) {
  Value* v = Find(name);
  if (v != nullptr && v->nhwc.valid()) return v->nhwc;
  WEFT_ASSIGN_OR_RETURN(Output nchw, Materialise(name, LayoutOf(name)));
  if (nchw.shape().rank() != 4) {
    return InvalidArgumentError("tensor ", Quote(name), " of shape ", nchw.shape().ToString(),
                                " is not 4-D [N, C, H, W]");
  }
  v->nhwc =
      b_.Op("Transpose", {nchw}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}}, SanitiseName(name) + "/nhwc");
  WEFT_RETURN_IF_ERROR(b_.status());
  return v->nhwc;
}

Status Importer::CheckOpsSupported(const onnx::GraphProto& graph) {
  struct Missing {
    int count = 0;
    std::string first;
  };
  std::map<std::string, Missing> missing;
  std::function<void(const onnx::GraphProto&)> scan = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      const std::string key = ConverterKey(node);
      if (Converters().find(key) == Converters().end()) {
        Missing& m = missing[key];
        if (m.count++ == 0) m.first = node.name().empty() ? StrCat("#", &node - &g.node(0)) : node.name();
      }
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) scan(attr.g());
        for (const auto& sub : attr.graphs()) scan(sub);
      }
    }
  };
  scan(graph);
  if (missing.empty()) return Status();
  std::string list;
  int total = 0;
  for (const auto& [op, m] : missing) {
    list += StrCat("\n  ", op, " x", m.count, " (first: node ", Quote(m.first), ")");
    total += m.count;
  }
  return UnimplementedError(source_, ": ", missing.size(), " op type", missing.size() == 1 ? "" : "s", " (", total,
                            " node", total == 1 ? "" : "s",
                            ") cannot be imported, as Weft has no mapping for them:", list,
                            "\n(docs/onnx.md lists the ops Weft imports)");
}

Status Importer::DecideLayouts(const onnx::GraphProto& graph) {
  // Every use of each floating initializer, through Identity nodes.
  std::map<std::string, std::string> alias;  // tensor -> initializer
  for (const auto& [name, proto] : initializers_) alias[name] = name;
  struct Use {
    const onnx::NodeProto* node;
    int input;
  };
  std::map<std::string, std::vector<Use>> uses;
  // Uses in subgraphs count: an If branch or Loop body may read any
  // initializer of the main graph.
  std::function<void(const onnx::GraphProto&)> scan = [&](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      for (int i = 0; i < node.input_size(); ++i) {
        auto it = alias.find(node.input(i));
        if (it == alias.end()) continue;
        if (node.op_type() == "Identity" && node.output_size() == 1) {
          alias[node.output(0)] = it->second;
          continue;
        }
        uses[it->second].push_back({&node, i});
      }
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) scan(attr.g());
        for (const auto& sub : attr.graphs()) scan(sub);
      }
    }
    // An output (of the model or of a subgraph) that is an initializer is
    // a use as ONNX lays it out.
    for (const auto& out : g.output()) {
      auto it = alias.find(out.name());
      if (it != alias.end()) uses[it->second].push_back({nullptr, -1});
    }
  };
  scan(graph);
  for (const auto& [init, list] : uses) {
    const onnx::TensorProto* proto = initializers_[init];
    if (proto->dims_size() != 4) continue;
    std::optional<Layout> layout;
    int64_t group = 1;
    bool same = true;
    for (const Use& use : list) {
      Layout l = Layout::kAsIs;
      int64_t g = 1;
      if (use.node != nullptr && use.node->op_type() == "Conv" && use.input == 1) {
        for (const auto& a : use.node->attribute()) {
          if (a.name() == "group") g = a.i();
        }
        if (g == 1) {
          l = Layout::kConvHwio;
        } else if (proto->dims(1) == 1 && g > 1 && proto->dims(0) % g == 0) {
          l = Layout::kDepthwiseHwcm;
        }
      }
      if (layout.has_value() && (*layout != l || g != group)) same = false;
      layout = l;
      group = g;
    }
    if (same && layout.has_value() && *layout != Layout::kAsIs) {
      layouts_[init] = *layout;
      groups_[init] = group;
    }
  }
  return Status();
}

Status Importer::ConvertNode(const onnx::NodeProto& node, int index, int count, const std::string& graph_name) {
  const auto& table = Converters();
  auto it = table.find(ConverterKey(node));
  // A subgraph's node is named inside its parent's context ("model: node
  // 'loop' (Loop, ...): node 'add' (Add, 1 of 3) of subgraph 'body'").
  const std::string where =
      StrCat(graph_name.empty() ? source_ + ": " : std::string(), "node ",
             Quote(node.name().empty() ? StrCat("#", index) : node.name()), " (", node.op_type(), ", ", index + 1,
             " of ", count, ")", graph_name.empty() ? std::string() : StrCat(" of subgraph ", Quote(graph_name)));
  for (const std::string& out : node.output()) {
    if (out.empty()) continue;
    if (values_.count(out) != 0) {
      return InvalidArgumentError(where, ": output ", Quote(out), " is already produced by another node");
    }
    Value v;
    values_.emplace(out, std::move(v));
  }
  for (const std::string& in : node.input()) {
    if (!in.empty() && values_.count(in) == 0) {
      return InvalidArgumentError(where, ": input ", Quote(in),
                                  " is not a graph input, an initializer or an earlier node's output (a dangling "
                                  "input)");
    }
  }
  NodeContext ctx(*this, node, opset_);
  Status status = it->second(ctx);
  if (status.ok()) status = b_.status();
  if (!status.ok()) return status.WithContext(where);
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const Value& v = values_[node.output(i)];
    if (!v.out.valid() && !v.nhwc.valid() && !v.known.valid()) {
      // An optional output this converter does not produce: an error only
      // when something reads it (see Materialise / the graph outputs).
      unproduced_[node.output(i)] = where;
    }
  }
  return Status();
}

namespace {

// The names |graph| and its nested subgraphs read and define.
void CollectNames(const onnx::GraphProto& graph, std::set<std::string>& used, std::set<std::string>& defined) {
  for (const auto& input : graph.input()) defined.insert(input.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) {
    for (const std::string& in : node.input()) {
      if (!in.empty()) used.insert(in);
    }
    for (const std::string& out : node.output()) {
      if (!out.empty()) defined.insert(out);
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) CollectNames(attr.g(), used, defined);
      for (const auto& g : attr.graphs()) CollectNames(g, used, defined);
    }
  }
  for (const auto& output : graph.output()) used.insert(output.name());
}

// The outer values |graph| reads (ONNX subgraphs see every name of their
// enclosing graphs).
std::vector<std::string> Captures(const onnx::GraphProto& graph) {
  std::set<std::string> used, defined;
  CollectNames(graph, used, defined);
  std::vector<std::string> out;
  for (const std::string& name : used) {
    if (defined.count(name) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace

Status Importer::MaterialiseCaptures(const onnx::GraphProto& graph) {
  for (const std::string& name : Captures(graph)) {
    const Value* v = Find(name);
    if (v == nullptr || (!v->out.valid() && !v->nhwc.valid() && !v->known.valid())) continue;
    auto out = Materialise(name, LayoutOf(name));
    if (!out.ok()) return out.status().WithContext(StrCat("subgraph ", Quote(graph.name()), " reads ", Quote(name)));
  }
  return b_.status();
}

Expected<std::vector<Output>> Importer::ConvertSubgraph(const onnx::GraphProto& graph,
                                                        const std::vector<Output>& inputs, std::vector<Tensor>* known) {
  const std::string gname = graph.name().empty() ? std::string("subgraph") : graph.name();
  if (static_cast<std::size_t>(graph.input_size()) != inputs.size()) {
    return InvalidArgumentError("subgraph ", Quote(gname), " has ", graph.input_size(), " inputs; the op gives it ",
                                inputs.size());
  }
  // What the subgraph may change of the outer values it reads (a Transpose
  // cached in a branch) is undone when it is converted.
  std::map<std::string, Value> saved;
  for (const std::string& name : Captures(graph)) {
    if (const Value* v = Find(name)) saved.emplace(name, *v);
  }
  std::vector<std::string> locals;
  auto define = [&](const std::string& name, Value v) -> Status {
    if (values_.count(name) != 0) {
      return InvalidArgumentError("subgraph ", Quote(gname), " defines ", Quote(name),
                                  ", a name its enclosing graph already has");
    }
    values_.emplace(name, std::move(v));
    locals.push_back(name);
    return Status();
  };
  Status status;
  for (const auto& init : graph.initializer()) {
    // A subgraph's initializers are constants (a variable cannot be made
    // inside a cond or loop).
    auto t = TensorFromProto(init, base_dir_);
    if (!t.ok()) {
      status = t.status().WithContext(StrCat("subgraph ", Quote(gname)));
      break;
    }
    Value v;
    v.known = std::move(*t);
    v.shape = v.known.shape();
    v.dtype = v.known.dtype();
    status = define(init.name(), std::move(v));
    if (!status.ok()) break;
  }
  for (int k = 0; status.ok() && k < graph.input_size(); ++k) {
    Value v;
    v.out = inputs[static_cast<std::size_t>(k)];
    v.dtype = v.out.dtype();
    status = define(graph.input(k).name(), std::move(v));
  }
  const int count = graph.node_size();
  ++subgraph_depth_;
  for (int i = 0; status.ok() && i < count; ++i) {
    for (const std::string& out : graph.node(i).output()) {
      if (!out.empty() && values_.count(out) == 0) locals.push_back(out);
    }
    status = ConvertNode(graph.node(i), i, count, gname);
  }
  --subgraph_depth_;
  std::vector<Output> results;
  for (int k = 0; status.ok() && k < graph.output_size(); ++k) {
    const std::string& name = graph.output(k).name();
    auto value = Materialise(name, LayoutOf(name));
    if (!value.ok()) {
      status = value.status().WithContext(StrCat("subgraph ", Quote(gname), " output ", Quote(name)));
      break;
    }
    // Through an Identity made here, so that an outer value or a constant
    // returned by a branch or body belongs to it; a value whose shape Weft
    // only knows in part (a slice with fed bounds) takes the static shape
    // the subgraph declares, checked at run time by a Reshape, so that a
    // loop keeps its carried shapes.
    auto declared = ValueInfoType(graph.output(k));
    const bool narrow = declared.ok() && declared->first.IsFullyDefined() && !value->shape().IsFullyDefined() &&
                        value->shape().IsCompatibleWith(declared->first);
    results.push_back(
        narrow ? b_.Op("Reshape",
                       {*value, b_.Const(Int64s(declared->first.dims()), SanitiseName(name) + "/declared_shape")}, {},
                       SanitiseName(name))
               : b_.Op("Identity", {*value}, {}, SanitiseName(name)));
    status = b_.status();
    if (known != nullptr) {
      const Value* v = Find(name);
      known->push_back(v != nullptr ? v->known : Tensor());
    }
  }
  for (const std::string& name : locals) {
    values_.erase(name);
    unproduced_.erase(name);
  }
  for (auto& [name, v] : saved) values_[name] = std::move(v);
  if (!status.ok()) return status;
  return results;
}

namespace {

// Attribute values that ONNX 1.12's own shape inference divides by or
// indexes with unchecked (a model with stride 0 kills the process with
// SIGFPE inside libonnx, as the importer's fuzzer found): refused here
// first, naming the node.
Status PrecheckWindowAttrs(const onnx::GraphProto& graph, const std::string& source) {
  static const std::set<std::string> window_ops = {"Conv",        "ConvTranspose", "ConvInteger",
                                                   "QLinearConv", "MaxPool",       "AveragePool",
                                                   "LpPool",      "MaxUnpool",     "DeformConv"};
  for (const auto& node : graph.node()) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(attr.g(), source));
      for (const auto& sub : attr.graphs()) WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(sub, source));
    }
    if (window_ops.count(node.op_type()) == 0) continue;
    for (const auto& attr : node.attribute()) {
      const std::string& n = attr.name();
      const bool positive_list = n == "strides" || n == "dilations" || n == "kernel_shape";
      bool bad = false;
      if (positive_list) {
        for (int64_t v : attr.ints()) bad = bad || v < 1;
        if (attr.type() != onnx::AttributeProto::INTS) bad = true;
      } else if (n == "group") {
        bad = attr.i() < 1;
      } else if (n == "pads") {
        for (int64_t v : attr.ints()) bad = bad || v < 0;
      }
      if (bad) {
        return InvalidArgumentError(source, ": node ", Quote(node.name()), " (", node.op_type(), "): attr ", Quote(n),
                                    " must be ", n == "pads" ? "non-negative" : "positive", " integers");
      }
    }
  }
  return Status();
}

// ONNX's checker: onnx::checker::check_model, with the model's folder as
// the one its external data files are in (the library's default is the
// current directory).
Status CheckWithOnnx(const onnx::ModelProto& model, const std::string& source, const std::string& base_dir) {
  try {
    if (!model.has_ir_version() || model.ir_version() <= 0) {
      return InvalidArgumentError(source, ": the model has no ir_version; is it an ONNX ModelProto?");
    }
    if (model.ir_version() > onnx::Version::IR_VERSION) {
      return UnimplementedError(source, ": the model's IR version ", model.ir_version(), " is newer than the ",
                                static_cast<int64_t>(onnx::Version::IR_VERSION),
                                " of the ONNX library Weft is built with");
    }
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto& op : model.opset_import()) opsets[op.domain()] = static_cast<int>(op.version());
    ctx.set_opset_imports(opsets);
    ctx.set_model_dir(base_dir.empty() ? std::string(".") : base_dir);
    onnx::checker::LexicalScopeContext lex;
    onnx::checker::check_model_local_functions(model, ctx, lex);
    onnx::checker::check_graph(model.graph(), ctx, lex);
  } catch (const std::exception& e) {
    return InvalidArgumentError(source, ": ONNX's checker refuses the model: ", e.what());
  }
  return Status();
}

}  // namespace

Expected<ImportedModel> Importer::Run() {
  ImportedModel result;
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
  }
  bool training_only = false;  // a model of the training domain's optimizers alone
  for (const auto& op : model_.opset_import()) training_only = training_only || op.domain() == kTrainingDomain;
  if (opset_ == 0 && !training_only) {
    return InvalidArgumentError(source_, ": the model imports no opset of the default ONNX domain");
  }
  if (opset_ != 0 && (opset_ < kMinOpset || opset_ > kMaxOpset)) {
    return UnimplementedError(source_, ": ONNX opset ", opset_, " is not supported; Weft imports opsets ", kMinOpset,
                              " to ", kMaxOpset, " (convert the model with onnx.version_converter)");
  }
  result.opset = opset_;
  result.producer =
      StrCat(model_.producer_name(), model_.producer_version().empty() ? "" : " ", model_.producer_version());
  const onnx::GraphProto& graph = model_.graph();

  // ONNX's checker (strict shape inference comes after the conversion).
  WEFT_RETURN_IF_ERROR(CheckWithOnnx(model_, source_, base_dir_));
  WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(graph, source_));
  WEFT_RETURN_IF_ERROR(CheckOpsSupported(graph));

  for (const auto& init : graph.initializer()) initializers_[init.name()] = &init;
  for (const auto& [name, proto] : initializers_) {
    Value v;
    auto t = TensorFromProto(*proto, base_dir_);
    if (!t.ok()) return t.status().WithContext(source_);
    v.known = std::move(*t);
    v.initializer = name;
    v.shape = v.known.shape();
    v.dtype = v.known.dtype();
    values_.emplace(name, std::move(v));
  }
  WEFT_RETURN_IF_ERROR(DecideLayouts(graph));

  for (const auto& input : graph.input()) {
    if (initializers_.count(input.name()) != 0) continue;  // an initializer listed as an input (IR < 4)
    auto type = ValueInfoType(input);
    if (!type.ok()) return type.status().WithContext(StrCat(source_, ": graph input ", Quote(input.name())));
    Output p = b_.Placeholder(type->second, type->first, SanitiseName(input.name()));
    WEFT_RETURN_IF_ERROR(b_.status().WithContext(StrCat(source_, ": graph input ", Quote(input.name()))));
    Value v;
    v.out = p;
    v.shape = type->first;
    v.dtype = type->second;
    values_.emplace(input.name(), std::move(v));
    result.inputs.push_back(p.node_name());
    result.input_names.push_back(input.name());
  }

  const int count = graph.node_size();
  for (int i = 0; i < count; ++i) WEFT_RETURN_IF_ERROR(ConvertNode(graph.node(i), i, count));

  // ONNX's strict shape inference, on a model whose every node Weft's own
  // shape functions have accepted: it then finds what contradicts the
  // model's declared shapes and types. Not before: ONNX 1.12's inference
  // reads out of bounds on some malformed models (a Conv whose input rank
  // is not its weights', as the importer's fuzzer found), which Weft's
  // shape functions refuse with a message.
  {
    onnx::ModelProto inferred = model_;
    try {
      onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict_mode=*/1));
    } catch (const std::exception& e) {
      return InvalidArgumentError(source_, ": ONNX's shape inference refuses the model: ", e.what());
    }
  }

  for (const auto& output : graph.output()) {
    const std::string where = StrCat(source_, ": graph output ", Quote(output.name()));
    if (values_.count(output.name()) == 0) {
      return InvalidArgumentError(where, " is produced by no node");
    }
    auto value = Materialise(output.name(), LayoutOf(output.name()));
    if (!value.ok()) return value.status().WithContext(where);
    Output out = b_.Op("Identity", {*value}, {}, SanitiseName(output.name()));
    WEFT_RETURN_IF_ERROR(b_.status().WithContext(where));
    result.outputs.push_back(out.node_name());
    result.output_names.push_back(output.name());
  }
  if (!inits_.empty()) {
    auto deps = b_.ControlDependencies(inits_);
    result.init = b_.Op("NoOp", {}, {}, options_.init_name).node_name();
  }
  WEFT_RETURN_IF_ERROR(b_.status().WithContext(source_));
  WEFT_RETURN_IF_ERROR(b_.Build().status());
  result.def = b_.def();
  result.variables = variables_;
  return result;
}

// --- Entry points ------------------------------------------------------------------------

namespace {

// Every name |graph| reads is defined before it is read (by a graph input,
// an initializer, an earlier node, or the enclosing graphs' |outer|), and
// every output is defined: ONNX's version converter dereferences them
// unchecked (a graph output no node makes crashes it, as the importer's
// fuzzer found), and ONNX's checker does not check them all.
Status CheckNamesDefined(const onnx::GraphProto& graph, std::set<std::string> defined, const std::string& source) {
  for (const auto& input : graph.input()) defined.insert(input.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) {
    for (const std::string& in : node.input()) {
      if (!in.empty() && defined.count(in) == 0) {
        return InvalidArgumentError(source, ": node ", Quote(node.name()), " (", node.op_type(), ") reads ", Quote(in),
                                    ", which no graph input, initializer or earlier node defines");
      }
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) WEFT_RETURN_IF_ERROR(CheckNamesDefined(attr.g(), defined, source));
      for (const auto& sub : attr.graphs()) WEFT_RETURN_IF_ERROR(CheckNamesDefined(sub, defined, source));
    }
    for (const std::string& out : node.output()) {
      if (!out.empty()) defined.insert(out);
    }
  }
  for (const auto& output : graph.output()) {
    if (defined.count(output.name()) == 0) {
      return InvalidArgumentError(source, ": graph output ", Quote(output.name()), " is produced by no node");
    }
  }
  return Status();
}

// A model of a default-domain opset before kConvertedMinOpset, converted
// to that opset by ONNX's version converter (the converters know the
// operators' forms from opset 7 on).
Status UpgradeOldOpset(onnx::ModelProto& model, const std::string& source, const std::string& base_dir) {
  int64_t opset = 0;
  for (const auto& op : model.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  }
  if (opset < kMinOpset || opset >= kConvertedMinOpset) return Status();
  // ONNX's version converter trusts its input (a node without an op type
  // crashes it, as the importer's fuzzer found): the checker and the window
  // attributes' checks come first.
  WEFT_RETURN_IF_ERROR(CheckWithOnnx(model, source, base_dir));
  WEFT_RETURN_IF_ERROR(PrecheckWindowAttrs(model.graph(), source));
  WEFT_RETURN_IF_ERROR(CheckNamesDefined(model.graph(), {}, source));
  try {
    model = onnx::version_conversion::ConvertVersion(model, static_cast<int>(kConvertedMinOpset));
  } catch (const std::exception& e) {
    return UnimplementedError(source, ": the model's ONNX opset ", opset, " is older than the ", kConvertedMinOpset,
                              " Weft's converters read, and ONNX's version converter cannot bring it to ",
                              kConvertedMinOpset, ": ", e.what());
  }
  return Status();
}

}  // namespace

bool IsOnnxPath(std::string_view path) { return path.size() > 5 && path.substr(path.size() - 5) == ".onnx"; }

Expected<ImportedModel> ImportOnnxBytes(std::string_view bytes, const std::string& source, const std::string& base_dir,
                                        const ImportOptions& options) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    return UnimplementedError(source, ": ", bytes.size(),
                              " bytes; a protobuf message holds at most 2 GiB, so larger "
                              "models keep their weights in external data files");
  }
  if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return InvalidArgumentError(
        source, ": not an ONNX model (",
        bytes.empty() ? "the file is empty" : "its bytes do not parse as an ONNX ModelProto; is the file truncated?",
        ")");
  }
  if (!model.has_graph()) return InvalidArgumentError(source, ": the ONNX model has no graph");
  // An empty |base_dir| is a model that has no folder (read from memory):
  // it cannot have external data files.
  if (base_dir.empty()) {
    for (const onnx::TensorProto& init : model.graph().initializer()) {
      if (init.data_location() == onnx::TensorProto::EXTERNAL) {
        return InvalidArgumentError(source, ": initializer ", Quote(init.name()),
                                    " keeps its data in an external file, and a model read from memory has no "
                                    "folder to find it in: load the .onnx file from its folder");
      }
    }
  }
  WEFT_RETURN_IF_ERROR(UpgradeOldOpset(model, source, base_dir));
  Importer importer(model, source, base_dir, options);
  return importer.Run();
}

Expected<ImportedModel> ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  const std::string folder = std::filesystem::path(path).parent_path().string();
  return ImportOnnxBytes(bytes, path, folder.empty() ? "." : folder, options);
}

Expected<GraphDef> ReadModelFile(const std::string& path, const ImportOptions& options) {
  if (!IsOnnxPath(path)) return ReadGraphFile(path);
  WEFT_ASSIGN_OR_RETURN(ImportedModel model, ImportOnnxFile(path, options));
  return std::move(model.def);
}

}  // namespace weft::onnx_io