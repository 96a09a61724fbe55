// The ONNX exporter: the part of a Weft graph that computes the chosen
// outputs, as an opset-17 ONNX model. Variables become initializers, with
// their values from a checkpoint or from the Consts their initialiser
// assigns; ops without an ONNX mapping are listed in one error. The model
// is checked by ONNX's checker and strict shape inference before it is
// returned. See docs/onnx.md.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "core/base/file_util.h"
#include "core/base/strings.h"
#include "core/checkpoint/manager.h"
#include "core/graph/graph.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

class Exporter {
 public:
  Exporter(const Graph& graph, const ExportOptions& options) : g_(graph), options_(options) {}

  Expected<ExportedModel> Run();

 private:
  using Node = Graph::Node;

  // --- Names and emission ---
  std::string Fresh(const std::string& base) {
    std::string name = base;
    for (int i = 1; used_.count(name) != 0; ++i) name = StrCat(base, "_", i);
    used_.insert(name);
    return name;
  }
  std::string TensorName(const Endpoint& e) const {
    const std::string& n = g_.node(e.node).name();
    return e.index == 0 ? n : StrCat(n, ":", e.index);
  }
  onnx::NodeProto* Emit(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name) {
    onnx::NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(Fresh(name));
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  onnx::NodeProto* Emit(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name,
                        const std::function<void(onnx::NodeProto*)>& attrs) {
    onnx::NodeProto* n = Emit(op, inputs, outputs, name);
    attrs(n);
    return n;
  }
  // One-output node with a fresh output name.
  std::string Emit1(const std::string& op, const std::vector<std::string>& inputs, const std::string& name,
                    const std::function<void(onnx::NodeProto*)>& attrs = nullptr) {
    const std::string out = Fresh(name);
    onnx::NodeProto* n = Emit(op, inputs, {out}, name);
    if (attrs) attrs(n);
    return out;
  }
  static void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void AttrFloat(onnx::NodeProto* n, const std::string& name, double v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  static void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void AttrStr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static Status FillTensor(onnx::TensorProto* t, const std::string& name, const Tensor& value) {
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
  Expected<std::string> Initializer(const std::string& base, const Tensor& value) {
    const std::string name = Fresh(base);
    WEFT_RETURN_IF_ERROR(FillTensor(graph_->add_initializer(), name, value));
    ++initializers_;
    return name;
  }
  std::string I64s(const std::string& base, const std::vector<int64_t>& v) {
    return *Initializer(base, Tensor::FromVector<int64_t>(v));
  }
  std::string ScalarConst(const std::string& base, DType dtype, double v) {
    return *Initializer(base, *ScalarOf(dtype, v));
  }
  std::string Transpose(const std::string& in, const std::vector<int64_t>& perm, const std::string& name) {
    return Emit1("Transpose", {in}, name, [&](onnx::NodeProto* n) { AttrInts(n, "perm", perm); });
  }

  // --- Attributes of Weft nodes ---
  static const AttrValue* A(const Node& n, const char* name) {
    auto it = n.def.attrs.find(name);
    return it == n.def.attrs.end() ? nullptr : &it->second;
  }
  static int64_t AInt(const Node& n, const char* name, int64_t def = 0) {
    const AttrValue* a = A(n, name);
    return a != nullptr && a->holds<int64_t>() ? a->get<int64_t>() : def;
  }
  static double AFloat(const Node& n, const char* name, double def = 0) {
    const AttrValue* a = A(n, name);
    return a != nullptr && a->holds<double>() ? a->get<double>() : def;
  }
  static bool ABool(const Node& n, const char* name, bool def = false) {
    const AttrValue* a = A(n, name);
    return a != nullptr && a->holds<bool>() ? a->get<bool>() : def;
  }
  static std::string AStr(const Node& n, const char* name, const std::string& def = "") {
    const AttrValue* a = A(n, name);
    return a != nullptr && a->holds<std::string>() ? a->get<std::string>() : def;
  }
  static std::vector<int64_t> AInts(const Node& n, const char* name) {
    const AttrValue* a = A(n, name);
    return a != nullptr && a->holds<std::vector<int64_t>>() ? a->get<std::vector<int64_t>>() : std::vector<int64_t>{};
  }

  // The value of a node's input when it is a Const (or a frozen variable).
  const Tensor* ConstInput(const Node& n, int i) const {
    const Node& src = g_.node(n.inputs[static_cast<std::size_t>(i)].node);
    if (src.op_name() == "Const") return &A(src, "value")->get<Tensor>();
    auto it = var_values_.find(n.inputs[static_cast<std::size_t>(i)].node);
    return it == var_values_.end() ? nullptr : &it->second;
  }
  // The ONNX name of input |i|; a Const or variable becomes an initializer
  // when first read this way (a conv filter read through ConstInput only
  // is stored once, rearranged).
  std::string In(const Node& n, int i) {
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
  const Shape& InShape(const Node& n, int i) const {
    const Endpoint& e = n.inputs[static_cast<std::size_t>(i)];
    return g_.node(e.node).output_shapes[static_cast<std::size_t>(e.index)];
  }
  DType InType(const Node& n, int i) const { return n.input_types[static_cast<std::size_t>(i)]; }

  Status Collect();
  Status ResolveVariables();
  Status Convert(int id);
  Status ConvertWindow(const Node& n, const std::string& out);
  Status ConvertLstmCell(int id, const Node& n);

  const Graph& g_;
  const ExportOptions& options_;
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
  std::set<std::string> used_;
  std::map<Endpoint, std::string, bool (*)(const Endpoint&, const Endpoint&)> names_{
      [](const Endpoint& a, const Endpoint& b) { return a.node != b.node ? a.node < b.node : a.index < b.index; }};
  std::vector<Endpoint> outputs_;
  std::vector<std::string> inputs_;
  std::map<std::string, Tensor> pending_;  // Consts and variables not yet read
  Status deferred_error_;
  std::vector<std::string> missing_;  // variables without a value
  bool have_checkpoint_ = false;
  std::vector<int> needed_;                                      // in topological order
  std::map<int, Tensor> var_values_;                             // ReadVariable node -> value
  std::map<std::string, std::vector<std::string>> unsupported_;  // op -> nodes
  int64_t initializers_ = 0;
};

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
        var_values_[id] = A(value, "value")->get<Tensor>();
        found = true;
        break;
      }
    }
    if (!found) missing_.push_back(handle.name());
  }
  return Status();
}

// Conv2D, DepthwiseConv2D, MaxPool, AvgPool: ONNX's are NCHW.
Status Exporter::ConvertWindow(const Node& n, const std::string& out) {
  const std::string& op = n.op_name();
  const bool nchw = AStr(n, "data_format", "NHWC") == "NCHW";
  const Shape& xs = InShape(n, 0);
  if (xs.rank() != 4) return UnimplementedError(op, " of an input of rank ", xs.rank());
  const int h = nchw ? 2 : 1, w = nchw ? 3 : 2;
  auto spatial = [&](const char* attr) {
    const std::vector<int64_t> v = AInts(n, attr);
    return v.size() == 4 ? std::vector<int64_t>{v[static_cast<std::size_t>(h)], v[static_cast<std::size_t>(w)]}
                         : std::vector<int64_t>{1, 1};
  };
  std::string x = In(n, 0);
  if (!nchw) x = Transpose(x, {0, 3, 1, 2}, n.name() + "/nchw_in");
  const bool conv = op == "Conv2D" || op == "DepthwiseConv2D";
  std::string y = nchw ? out : Fresh(n.name() + "/nchw_out");
  onnx::NodeProto* node = nullptr;
  if (conv) {
    const Shape& fs = InShape(n, 1);
    if (fs.rank() != 4 || !fs.IsFullyDefined())
      return UnimplementedError(op, " with a filter of shape ", fs.ToString());
    const int64_t kh = fs.dim(0), kw = fs.dim(1), ci = fs.dim(2), co = fs.dim(3);
    std::string weights;
    const Tensor* filter = ConstInput(n, 1);
    const bool depthwise = op == "DepthwiseConv2D";
    if (filter != nullptr) {
      // HWIO [kh, kw, I, O] -> OIHW; depthwise HWCM [kh, kw, C, M] -> [C*M, 1, kh, kw].
      const Shape oihw = depthwise ? Shape{ci * co, 1, kh, kw} : Shape{co, ci, kh, kw};
      WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(filter->dtype(), oihw));
      const std::size_t es = DTypeSize(filter->dtype());
      const char* src = static_cast<const char*>(filter->raw_data());
      char* dst = static_cast<char*>(t.raw_data());
      for (int64_t y0 = 0; y0 < kh; ++y0) {
        for (int64_t x0 = 0; x0 < kw; ++x0) {
          for (int64_t i = 0; i < ci; ++i) {
            for (int64_t o = 0; o < co; ++o) {
              const int64_t s = ((y0 * kw + x0) * ci + i) * co + o;
              const int64_t d = depthwise ? (((i * co + o) * kh + y0) * kw + x0) : (((o * ci + i) * kh + y0) * kw + x0);
              std::memcpy(dst + static_cast<std::size_t>(d) * es, src + static_cast<std::size_t>(s) * es, es);
            }
          }
        }
      }
      WEFT_ASSIGN_OR_RETURN(weights, Initializer(g_.node(n.inputs[1].node).name(), t));
    } else if (!depthwise) {
      weights = Transpose(In(n, 1), {3, 2, 0, 1}, n.name() + "/oihw");
    } else {
      // [kh, kw, C, M] -> [C, M, kh, kw] -> [C*M, 1, kh, kw]
      const std::string t = Transpose(In(n, 1), {2, 3, 0, 1}, n.name() + "/cmhw");
      weights = Emit1("Reshape", {t, I64s(n.name() + "/oihw_shape", {ci * co, 1, kh, kw})}, n.name() + "/oihw");
    }
    node = Emit("Conv", {x, weights}, {y}, n.name());
    AttrInts(node, "kernel_shape", {kh, kw});
    AttrInts(node, "dilations", spatial("dilations"));
    if (depthwise) AttrInt(node, "group", ci);
  } else {
    node = Emit(op == "MaxPool" ? "MaxPool" : "AveragePool", {x}, {y}, n.name());
    AttrInts(node, "kernel_shape", spatial("ksize"));
  }
  AttrInts(node, "strides", spatial("strides"));
  AttrStr(node, "auto_pad", AStr(n, "padding") == "SAME" ? "SAME_UPPER" : "VALID");
  if (!nchw)
    Emit("Transpose", {y}, {out}, n.name() + "/nhwc_out", [](onnx::NodeProto* p) {
      AttrInts(p, "perm", {0, 2, 3, 1});
    });
  return Status();
}

// LSTMCell from primitive ONNX ops (opset 17 has no single-step cell).
Status Exporter::ConvertLstmCell(int id, const Node& n) {
  const std::string base = n.name();
  const std::string xh =
      Emit1("Concat", {In(n, 0), In(n, 2)}, base + "/xh", [](onnx::NodeProto* p) { AttrInt(p, "axis", 1); });
  const std::string z = Emit1("Add", {Emit1("MatMul", {xh, In(n, 3)}, base + "/matmul"), In(n, 4)}, base + "/z");
  const std::vector<std::string> parts = {Fresh(base + "/zi"), Fresh(base + "/zf"), Fresh(base + "/zg"),
                                          Fresh(base + "/zo")};
  onnx::NodeProto* split = Emit("Split", {z}, parts, base + "/split");
  AttrInt(split, "axis", 1);
  const DType dt = n.output_types[0];
  const std::string i = Emit1("Sigmoid", {parts[0]}, base + "/i");
  std::string zf = parts[1];
  const double fb = AFloat(n, "forget_bias", 1.0);
  if (fb != 0) zf = Emit1("Add", {zf, ScalarConst(base + "/forget_bias", dt, fb)}, base + "/zf_biased");
  const std::string f = Emit1("Sigmoid", {zf}, base + "/f");
  const std::string gg = Emit1("Tanh", {parts[2]}, base + "/g");
  const std::string o = Emit1("Sigmoid", {parts[3]}, base + "/o");
  const std::string c_name = names_.at(Endpoint{id, 0}), h_name = names_.at(Endpoint{id, 1});
  Emit("Add", {Emit1("Mul", {f, In(n, 1)}, base + "/fc"), Emit1("Mul", {i, gg}, base + "/ig")}, {c_name}, base + "/c");
  Emit("Mul", {o, Emit1("Tanh", {c_name}, base + "/tanh_c")}, {h_name}, base + "/h");
  // gates, output 2, as LSTMCell has it.
  Emit("Concat", {i, f, gg, o}, {names_.at(Endpoint{id, 2})}, base + "/gates",
       [](onnx::NodeProto* p) { AttrInt(p, "axis", 1); });
  return Status();
}

Status Exporter::Convert(int id) {
  const Node& n = g_.node(id);
  const std::string& op = n.op_name();
  // Output names: the node's name, ":k" after the first.
  for (std::size_t k = 0; k < n.output_types.size(); ++k) {
    const std::string name = Fresh(TensorName({id, static_cast<int>(k)}));
    names_[Endpoint{id, static_cast<int>(k)}] = name;
  }
  const std::string out = n.output_types.empty() ? std::string() : names_.at(Endpoint{id, 0});
  const DType dt = n.output_types.empty() ? DType::kInvalid : n.output_types[0];
  auto simple = [&](const std::string& onnx_op, int inputs) {
    std::vector<std::string> ins;
    for (int i = 0; i < inputs; ++i) ins.push_back(In(n, i));
    return Emit(onnx_op, ins, {out}, n.name());
  };
  static const std::map<std::string, std::string> unary = {
      {"Relu", "Relu"},      {"Sigmoid", "Sigmoid"},   {"Tanh", "Tanh"},
      {"Exp", "Exp"},        {"Log", "Log"},           {"Abs", "Abs"},
      {"Neg", "Neg"},        {"Sqrt", "Sqrt"},         {"Reciprocal", "Reciprocal"},
      {"Floor", "Floor"},    {"Ceil", "Ceil"},         {"Sin", "Sin"},
      {"Cos", "Cos"},        {"Erf", "Erf"},           {"Round", "Round"},
      {"Sign", "Sign"},      {"Softplus", "Softplus"}, {"Elu", "Elu"},
      {"Selu", "Selu"},      {"IsNan", "IsNaN"},       {"IsInf", "IsInf"},
      {"LogicalNot", "Not"}, {"Identity", "Identity"}, {"StopGradient", "Identity"},
  };
  static const std::map<std::string, std::string> binary = {
      {"Add", "Add"},
      {"Sub", "Sub"},
      {"Mul", "Mul"},
      {"RealDiv", "Div"},
      {"Maximum", "Max"},
      {"Minimum", "Min"},
      {"Pow", "Pow"},
      {"Equal", "Equal"},
      {"Less", "Less"},
      {"Greater", "Greater"},
      {"LessEqual", "LessOrEqual"},
      {"GreaterEqual", "GreaterOrEqual"},
      {"LogicalAnd", "And"},
      {"LogicalOr", "Or"},
  };
  if (auto u = unary.find(op); u != unary.end()) {
    simple(u->second, 1);
    return Status();
  }
  if (auto bi = binary.find(op); bi != binary.end()) {
    simple(bi->second, 2);
    return Status();
  }
  if (op == "Placeholder") {
    onnx::ValueInfoProto* in = graph_->add_input();
    in->set_name(out);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(DTypeToOnnx(dt));
    const Shape& s = n.output_shapes[0];
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
    inputs_.push_back(out);
    return Status();
  }
  if (op == "Const") {
    pending_[out] = A(n, "value")->get<Tensor>();
    return Status();
  }
  if (op == "ReadVariable") {
    if (auto v = var_values_.find(id); v != var_values_.end()) pending_[out] = v->second;
    return Status();
  }
  if (op == "Div") {
    simple("Div", 2);  // integers truncate in both
    return Status();
  }
  if (op == "NotEqual") {
    Emit("Not", {Emit1("Equal", {In(n, 0), In(n, 1)}, n.name() + "/equal")}, {out}, n.name());
    return Status();
  }
  if (op == "Rsqrt") {
    Emit("Reciprocal", {Emit1("Sqrt", {In(n, 0)}, n.name() + "/sqrt")}, {out}, n.name());
    return Status();
  }
  if (op == "Square") {
    Emit("Mul", {In(n, 0), In(n, 0)}, {out}, n.name());
    return Status();
  }
  if (op == "SquaredDifference") {
    const std::string d = Emit1("Sub", {In(n, 0), In(n, 1)}, n.name() + "/diff");
    Emit("Mul", {d, d}, {out}, n.name());
    return Status();
  }
  if (op == "Expm1" || op == "Log1p") {
    const std::string one = ScalarConst(n.name() + "/one", dt, 1);
    if (op == "Expm1") {
      Emit("Sub", {Emit1("Exp", {In(n, 0)}, n.name() + "/exp"), one}, {out}, n.name());
    } else {
      Emit("Log", {Emit1("Add", {In(n, 0), one}, n.name() + "/plus_one")}, {out}, n.name());
    }
    return Status();
  }
  if (op == "Relu6") {
    Emit("Clip", {In(n, 0), ScalarConst(n.name() + "/min", dt, 0), ScalarConst(n.name() + "/max", dt, 6)}, {out},
         n.name());
    return Status();
  }
  if (op == "ClipByValue") {
    if (InShape(n, 1).rank() == 0 && InShape(n, 2).rank() == 0) {
      simple("Clip", 3);
    } else {
      Emit("Min", {Emit1("Max", {In(n, 0), In(n, 1)}, n.name() + "/lower"), In(n, 2)}, {out}, n.name());
    }
    return Status();
  }
  if (op == "Gelu") {
    // x * Phi(x): 0.5 x (1 + erf(x / sqrt 2)); the tanh form when approximate.
    const std::string x = In(n, 0);
    std::string inner;
    if (ABool(n, "approximate")) {
      const std::string x3 = Emit1("Mul", {x, Emit1("Mul", {x, x}, n.name() + "/x2")}, n.name() + "/x3");
      const std::string poly =
          Emit1("Add", {x, Emit1("Mul", {x3, ScalarConst(n.name() + "/c", dt, 0.044715)}, n.name() + "/cx3")},
                n.name() + "/poly");
      inner = Emit1(
          "Tanh", {Emit1("Mul", {poly, ScalarConst(n.name() + "/k", dt, std::sqrt(2.0 / M_PI))}, n.name() + "/scaled")},
          n.name() + "/tanh");
    } else {
      inner = Emit1("Erf", {Emit1("Mul", {x, ScalarConst(n.name() + "/rsqrt2", dt, M_SQRT1_2)}, n.name() + "/scaled")},
                    n.name() + "/erf");
    }
    const std::string one_plus = Emit1("Add", {inner, ScalarConst(n.name() + "/one", dt, 1)}, n.name() + "/one_plus");
    Emit("Mul", {Emit1("Mul", {x, ScalarConst(n.name() + "/half", dt, 0.5)}, n.name() + "/half_x"), one_plus}, {out},
         n.name());
    return Status();
  }
  if (op == "AddN") {
    simple("Sum", static_cast<int>(n.inputs.size()));
    return Status();
  }
  if (op == "Select") {
    simple("Where", 3);
    return Status();
  }
  if (op == "MatMul") {
    const bool ta = ABool(n, "transpose_a"), tb = ABool(n, "transpose_b");
    if (dt == DType::kF32 || dt == DType::kF64) {
      onnx::NodeProto* p = simple("Gemm", 2);
      if (ta) AttrInt(p, "transA", 1);
      if (tb) AttrInt(p, "transB", 1);
    } else {
      const std::string a = ta ? Transpose(In(n, 0), {1, 0}, n.name() + "/a_t") : In(n, 0);
      const std::string b = tb ? Transpose(In(n, 1), {1, 0}, n.name() + "/b_t") : In(n, 1);
      Emit("MatMul", {a, b}, {out}, n.name());
    }
    return Status();
  }
  if (op == "BatchMatMul") {
    auto adj = [&](int i, const char* attr) {
      const int r = InShape(n, i).rank();
      if (!ABool(n, attr) || r < 2) return In(n, i);
      std::vector<int64_t> perm(static_cast<std::size_t>(r));
      for (int k = 0; k < r; ++k) perm[static_cast<std::size_t>(k)] = k;
      std::swap(perm[static_cast<std::size_t>(r - 1)], perm[static_cast<std::size_t>(r - 2)]);
      return Transpose(In(n, i), perm, n.name() + "/adj");
    };
    Emit("MatMul", {adj(0, "adj_x"), adj(1, "adj_y")}, {out}, n.name());
    return Status();
  }
  if (op == "BiasAdd") {
    if (AStr(n, "data_format", "NHWC") == "NCHW" && InShape(n, 0).rank() > 2) {
      const int r = InShape(n, 0).rank();
      std::vector<int64_t> shape(static_cast<std::size_t>(r - 1), 1);
      shape[0] = -1;
      const std::string b = Emit1("Reshape", {In(n, 1), I64s(n.name() + "/bias_shape", shape)}, n.name() + "/bias");
      Emit("Add", {In(n, 0), b}, {out}, n.name());
    } else {
      simple("Add", 2);
    }
    return Status();
  }
  if (op == "Conv2D" || op == "DepthwiseConv2D" || op == "MaxPool" || op == "AvgPool") {
    return ConvertWindow(n, out);
  }
  if (op == "FusedBatchNorm") {
    if (ABool(n, "is_training", true)) {
      return UnimplementedError("FusedBatchNorm in training mode (is_training = true) has no inference form");
    }
    const bool nchw = AStr(n, "data_format", "NHWC") == "NCHW" || InShape(n, 0).rank() == 2;
    std::string x = nchw ? In(n, 0) : Transpose(In(n, 0), {0, 3, 1, 2}, n.name() + "/nchw_in");
    const std::string y = nchw ? out : Fresh(n.name() + "/nchw_out");
    onnx::NodeProto* p = Emit("BatchNormalization", {x, In(n, 1), In(n, 2), In(n, 3), In(n, 4)}, {y}, n.name());
    AttrFloat(p, "epsilon", AFloat(n, "epsilon", 1e-3));
    // In inference, batch_mean and batch_variance are the inputs passed through.
    for (int k = 1; k <= 2; ++k) {
      auto it = names_.find(Endpoint{id, k});
      if (it != names_.end())
        Emit("Identity", {In(n, 2 + k)}, {it->second}, n.name() + (k == 1 ? "/mean" : "/variance"));
    }
    if (!nchw) {
      Emit("Transpose", {y}, {out}, n.name() + "/nhwc_out", [](onnx::NodeProto* q) {
        AttrInts(q, "perm", {0, 2, 3, 1});
      });
    }
    return Status();
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    AttrInt(simple(op, 1), "axis", AInt(n, "axis", -1));
    return Status();
  }
  if (op == "LayerNorm") {
    onnx::NodeProto* p = simple("LayerNormalization", 3);
    AttrInt(p, "axis", AInt(n, "begin_norm_axis", -1));
    AttrFloat(p, "epsilon", AFloat(n, "epsilon", 1e-5));
    return Status();
  }
  if (op == "Reshape" || op == "BroadcastTo" || op == "Tile" || op == "Fill") {
    // Shapes are int64 in ONNX.
    if (op == "Tile") {  // one input: the repeats are an attr
      Emit("Tile", {In(n, 0), I64s(n.name() + "/repeats", AInts(n, "multiples"))}, {out}, n.name());
      return Status();
    }
    const int shape_input = op == "Fill" ? 0 : 1;
    std::string shape = In(n, shape_input);
    if (InType(n, shape_input) != DType::kI64) {
      shape = Emit1("Cast", {shape}, n.name() + "/shape64",
                    [](onnx::NodeProto* p) { AttrInt(p, "to", onnx::TensorProto::INT64); });
    }
    if (op == "Reshape") {
      Emit("Reshape", {In(n, 0), shape}, {out}, n.name());
    } else if (op == "BroadcastTo") {
      Emit("Expand", {In(n, 0), shape}, {out}, n.name());
    } else {
      Emit("Expand", {In(n, 1), shape}, {out}, n.name());
    }
    return Status();
  }
  if (op == "Transpose") {
    onnx::NodeProto* p = simple("Transpose", 1);
    if (!AInts(n, "perm").empty()) AttrInts(p, "perm", AInts(n, "perm"));
    return Status();
  }
  if (op == "Squeeze") {
    const std::vector<int64_t> axes = AInts(n, "axis");
    if (axes.empty()) {
      simple("Squeeze", 1);
    } else {
      Emit("Squeeze", {In(n, 0), I64s(n.name() + "/axes", axes)}, {out}, n.name());
    }
    return Status();
  }
  if (op == "ExpandDims") {
    Emit("Unsqueeze", {In(n, 0), I64s(n.name() + "/axes", {AInt(n, "axis")})}, {out}, n.name());
    return Status();
  }
  if (op == "Concat") {
    AttrInt(simple("Concat", static_cast<int>(n.inputs.size())), "axis", AInt(n, "axis"));
    return Status();
  }
  if (op == "Pack") {
    const int64_t axis = AInt(n, "axis");
    std::vector<std::string> parts;
    const std::string axes = I64s(n.name() + "/axes", {axis});
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      parts.push_back(Emit1("Unsqueeze", {In(n, static_cast<int>(i)), axes}, n.name() + "/expand"));
    }
    Emit("Concat", parts, {out}, n.name(), [axis](onnx::NodeProto* p) { AttrInt(p, "axis", axis); });
    return Status();
  }
  if (op == "Split") {
    std::vector<std::string> outs;
    for (std::size_t k = 0; k < n.output_types.size(); ++k)
      outs.push_back(names_.at(Endpoint{id, static_cast<int>(k)}));
    AttrInt(Emit("Split", {In(n, 0)}, outs, n.name()), "axis", AInt(n, "axis"));
    return Status();
  }
  if (op == "Mean" || op == "Sum" || op == "Max" || op == "Min" || op == "Prod") {
    const std::vector<int64_t> axes = AInts(n, "axis");
    const bool keep = ABool(n, "keep_dims");
    if (op == "Sum") {
      std::vector<std::string> ins = {In(n, 0)};
      if (!axes.empty()) ins.push_back(I64s(n.name() + "/axes", axes));
      AttrInt(Emit("ReduceSum", ins, {out}, n.name()), "keepdims", keep ? 1 : 0);
    } else {
      onnx::NodeProto* p = simple("Reduce" + op, 1);
      if (!axes.empty()) AttrInts(p, "axes", axes);
      AttrInt(p, "keepdims", keep ? 1 : 0);
    }
    return Status();
  }
  if (op == "ArgMax" || op == "ArgMin") {
    const bool i32 = dt == DType::kI32;
    const std::string y = i32 ? Fresh(n.name() + "/i64") : out;
    onnx::NodeProto* p = Emit(op, {In(n, 0)}, {y}, n.name());
    AttrInt(p, "axis", AInt(n, "axis"));
    AttrInt(p, "keepdims", 0);
    if (i32) AttrInt(Emit("Cast", {y}, {out}, n.name() + "/i32"), "to", onnx::TensorProto::INT32);
    return Status();
  }
  if (op == "Cast") {
    AttrInt(simple("Cast", 1), "to", DTypeToOnnx(dt));
    return Status();
  }
  if (op == "Shape" || op == "Size") {
    const bool i32 = dt == DType::kI32;
    const std::string y = i32 ? Fresh(n.name() + "/i64") : out;
    Emit(op, {In(n, 0)}, {y}, n.name());
    if (i32) AttrInt(Emit("Cast", {y}, {out}, n.name() + "/i32"), "to", onnx::TensorProto::INT32);
    return Status();
  }
  if (op == "Gather") {
    AttrInt(simple("Gather", 2), "axis", AInt(n, "axis"));
    return Status();
  }
  if (op == "FloorMod") {
    if (IsInteger(dt)) {
      simple("Mod", 2);  // fmod = 0: the result has the divisor's sign, as FloorMod
      return Status();
    }
    // Floats: ONNX's Mod takes them only with fmod = 1 (C's fmod, exact);
    // a remainder of the other sign than y then moves by y, as FloorMod.
    const std::string x = In(n, 0), y = In(n, 1);
    const std::string r = Emit1("Mod", {x, y}, n.name() + "/fmod", [](onnx::NodeProto* m) { AttrInt(m, "fmod", 1); });
    const std::string zero = ScalarConst(n.name() + "/zero", dt, 0);
    const std::string nonzero = Emit1("Not", {Emit1("Equal", {r, zero}, n.name() + "/is_zero")}, n.name() + "/nonzero");
    const std::string signs_differ = Emit1(
        "Xor", {Emit1("Less", {r, zero}, n.name() + "/r_negative"), Emit1("Less", {y, zero}, n.name() + "/y_negative")},
        n.name() + "/signs_differ");
    const std::string shift = Emit1("And", {nonzero, signs_differ}, n.name() + "/shift");
    Emit("Where", {shift, Emit1("Add", {r, y}, n.name() + "/shifted"), r}, {out}, n.name());
    return Status();
  }
  if (op == "Reverse") {
    // A Slice with step -1 along each axis.
    const std::vector<int64_t> axes = AInts(n, "axis");
    const std::vector<int64_t> starts(axes.size(), -1), steps(axes.size(), -1);
    const std::vector<int64_t> ends(axes.size(), std::numeric_limits<int64_t>::min());
    Emit("Slice",
         {In(n, 0), I64s(n.name() + "/starts", starts), I64s(n.name() + "/ends", ends), I64s(n.name() + "/axes", axes),
          I64s(n.name() + "/steps", steps)},
         {out}, n.name());
    return Status();
  }
  if (op == "GatherElements") {
    AttrInt(simple("GatherElements", 2), "axis", AInt(n, "axis"));
    return Status();
  }
  if (op == "ScatterElements") {
    onnx::NodeProto* p = simple("ScatterElements", 3);
    AttrInt(p, "axis", AInt(n, "axis"));
    const std::string reduction = AStr(n, "reduction", "none");
    if (reduction != "none") AttrStr(p, "reduction", reduction);
    return Status();
  }
  if (op == "NonZero") {
    simple("NonZero", 1);
    return Status();
  }
  if (op == "TopK") {
    // ONNX's K is an i64 tensor of shape [1].
    std::string k = In(n, 1);
    if (InType(n, 1) != DType::kI64) {
      k = Emit1("Cast", {k}, n.name() + "/k64", [](onnx::NodeProto* c) { AttrInt(c, "to", onnx::TensorProto::INT64); });
    }
    k = Emit1("Reshape", {k, I64s(n.name() + "/k_shape", {1})}, n.name() + "/k");
    onnx::NodeProto* p = Emit("TopK", {In(n, 0), k}, {out, names_.at(Endpoint{id, 1})}, n.name());
    AttrInt(p, "axis", AInt(n, "axis", -1));
    AttrInt(p, "largest", ABool(n, "largest", true) ? 1 : 0);
    AttrInt(p, "sorted", ABool(n, "sorted", true) ? 1 : 0);
    return Status();
  }
  if (op == "Pad") {
    const std::string mode = AStr(n, "mode", "CONSTANT");
    if (mode == "SYMMETRIC") return UnimplementedError("Pad mode SYMMETRIC has no ONNX equivalent");
    const std::vector<int64_t> p = AInts(n, "paddings");
    const std::size_t r = p.size() / 2;
    std::vector<int64_t> pads(p.size());
    for (std::size_t i = 0; i < r; ++i) {
      pads[i] = p[2 * i];
      pads[i + r] = p[2 * i + 1];
    }
    std::vector<std::string> ins = {In(n, 0), I64s(n.name() + "/pads", pads)};
    if (mode == "CONSTANT") ins.push_back(ScalarConst(n.name() + "/value", dt, AFloat(n, "constant_value")));
    AttrStr(Emit("Pad", ins, {out}, n.name()), "mode", mode == "CONSTANT" ? "constant" : "reflect");
    return Status();
  }
  if (op == "Slice") {
    const std::vector<int64_t> begin = AInts(n, "begin"), size = AInts(n, "size");
    std::vector<int64_t> end(begin.size());
    for (std::size_t i = 0; i < begin.size(); ++i) end[i] = size[i] < 0 ? kInt64Max : begin[i] + size[i];
    Emit("Slice", {In(n, 0), I64s(n.name() + "/starts", begin), I64s(n.name() + "/ends", end)}, {out}, n.name());
    return Status();
  }
  if (op == "StridedSlice") {
    if (AInt(n, "ellipsis_mask") != 0 || AInt(n, "new_axis_mask") != 0) {
      return UnimplementedError("StridedSlice with ellipsis_mask or new_axis_mask");
    }
    std::vector<int64_t> begin = AInts(n, "begin"), end = AInts(n, "end"), strides = AInts(n, "strides");
    const int64_t bm = AInt(n, "begin_mask"), em = AInt(n, "end_mask"), sm = AInt(n, "shrink_axis_mask");
    std::vector<int64_t> axes, shrink;
    for (std::size_t i = 0; i < begin.size(); ++i) {
      axes.push_back(static_cast<int64_t>(i));
      const bool forward = strides[i] > 0;
      if (bm & (int64_t{1} << i)) begin[i] = forward ? 0 : kInt64Max;
      if (em & (int64_t{1} << i)) end[i] = forward ? kInt64Max : std::numeric_limits<int64_t>::min();
      if (sm & (int64_t{1} << i)) {
        end[i] = begin[i] == -1 ? kInt64Max : begin[i] + 1;
        strides[i] = 1;
        shrink.push_back(static_cast<int64_t>(i));
      }
    }
    const std::string y = shrink.empty() ? out : Fresh(n.name() + "/sliced");
    Emit("Slice",
         {In(n, 0), I64s(n.name() + "/starts", begin), I64s(n.name() + "/ends", end), I64s(n.name() + "/axes", axes),
          I64s(n.name() + "/steps", strides)},
         {y}, n.name());
    if (!shrink.empty()) Emit("Squeeze", {y, I64s(n.name() + "/shrink", shrink)}, {out}, n.name() + "/shrink");
    return Status();
  }
  if (op == "Range") {
    simple("Range", 3);
    return Status();
  }
  if (op == "Cumsum") {
    onnx::NodeProto* p = simple("CumSum", 2);
    if (ABool(n, "exclusive")) AttrInt(p, "exclusive", 1);
    if (ABool(n, "reverse")) AttrInt(p, "reverse", 1);
    return Status();
  }
  if (op == "ZerosLike" || op == "OnesLike") {
    const std::string shape = Emit1("Shape", {In(n, 0)}, n.name() + "/shape");
    onnx::NodeProto* p = Emit("ConstantOfShape", {shape}, {out}, n.name());
    auto* a = p->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    WEFT_ASSIGN_OR_RETURN(Tensor v, ScalarOf(dt, op == "OnesLike" ? 1 : 0));
    WEFT_ASSIGN_OR_RETURN(Tensor v1, v.Reshaped(Shape{1}));
    WEFT_RETURN_IF_ERROR(FillTensor(a->mutable_t(), "value", v1));
    return Status();
  }
  if (op == "LSTMCell") return ConvertLstmCell(id, n);
  unsupported_[op].push_back(n.name());
  return Status();
}

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

}  // namespace

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
