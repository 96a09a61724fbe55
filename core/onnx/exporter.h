// The ONNX exporter's internals, shared by its driver (onnx_export.cc) and
// the export functions by op family. Not a public header: see
// core/onnx/onnx.h.
//
// The exporter walks the nodes the chosen outputs need, in topological
// order. Each output gets an ONNX name (the node's name, ":k" after the
// first), then the node's op is looked up in a table of export functions
// (Exports()), each of which emits the ONNX nodes computing the outputs
// under those names. An op with no entry is listed in one error at the
// end. One file per op family adds its entries to the table:
//   onnx_export.cc              Placeholder, Const, ReadVariable (and the table)
//   onnx_export_elementwise.cc  unary and binary maps, arithmetic, activations, Cast
//   onnx_export_nn.cc           MatMul, BiasAdd, convolutions and pools,
//                               normalisations, Softmax, LSTMCell
//   onnx_export_shape.cc        shapes, indexing, slices, reductions, TopK, Pad
//
// Conventions: an export function names the ONNX nodes it makes after the
// Weft node (c.name(), helpers under it: c.name() + "/nchw_in"), reads
// inputs through c.In(i) (a Const or variable becomes an initializer when
// first read so) and writes output k to c.OutName(k). Errors are plain
// (UNIMPLEMENTED for what ONNX cannot express); the driver adds the node.
#ifndef WEFT_CORE_ONNX_EXPORTER_H_
#define WEFT_CORE_ONNX_EXPORTER_H_

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph/graph.h"
#include "core/onnx/onnx.h"

namespace weft::onnx_io {

class ExportContext;

using ExportFn = std::function<Status(ExportContext&)>;
using ExportTable = std::map<std::string, ExportFn, std::less<>>;

// The export functions by Weft op name.
const ExportTable& Exports();

namespace exports {

void AddSourceExports(ExportTable& t);
void AddElementwiseExports(ExportTable& t);
void AddNnExports(ExportTable& t);
void AddShapeExports(ExportTable& t);
void AddDynamicExports(ExportTable& t);  // onnx_export_dynamic.cc

// 0.5 x (1 + erf(x / sqrt 2)) of |x| into |out| (the tanh form when
// |approximate|), named under the node: Gelu's export and the fused ops'
// activation.
void EmitGelu(ExportContext& c, const std::string& x, bool approximate, const std::string& out);

// An export function emitting ONNX op |onnx_op| of the node's first
// |inputs| inputs (ExportContext::Simple).
ExportFn Same(std::string onnx_op, int inputs);

}  // namespace exports

// Attributes of an ONNX node.
void AttrInt(onnx::NodeProto* n, const std::string& name, int64_t v);
void AttrFloat(onnx::NodeProto* n, const std::string& name, double v);  // stored as float
void AttrInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v);
void AttrStr(onnx::NodeProto* n, const std::string& name, const std::string& v);
// |t| named |name| holding |value| (raw data, or string data); UNIMPLEMENTED
// for an element type ONNX does not have.
Status FillTensor(onnx::TensorProto* t, const std::string& name, const Tensor& value);
// Attr |name| of a Weft node, or null.
const AttrValue* FindAttr(const Graph::Node& n, const char* name);

class Exporter {
 public:
  using Node = Graph::Node;

  Exporter(const Graph& graph, const ExportOptions& options) : g_(graph), options_(options) {}

  Expected<ExportedModel> Run();

  const Graph& graph() const { return g_; }

  // --- Names and emission ---
  // |base|, or |base|_1, _2, ...: a name no other node, tensor or
  // initializer of the model has yet.
  std::string Fresh(const std::string& base);
  onnx::NodeProto* Emit(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name);
  onnx::NodeProto* Emit(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name,
                        const std::function<void(onnx::NodeProto*)>& attrs);
  // A one-output node with a fresh output name; returns that name.
  std::string Emit1(const std::string& op, const std::vector<std::string>& inputs, const std::string& name,
                    const std::function<void(onnx::NodeProto*)>& attrs = nullptr);
  // An initializer named Fresh(|base|); returns its name.
  Expected<std::string> Initializer(const std::string& base, const Tensor& value);
  std::string I64s(const std::string& base, const std::vector<int64_t>& v);
  std::string ScalarConst(const std::string& base, DType dtype, double v);
  std::string Transpose(const std::string& in, const std::vector<int64_t>& perm, const std::string& name);

  // --- Inputs of Weft nodes ---
  // The value of |n|'s input |i| when it is a Const (or a frozen variable).
  const Tensor* ConstInput(const Node& n, int i) const;
  // The ONNX name of input |i|; a Const or variable becomes an initializer
  // when first read this way (a conv filter read through ConstInput only
  // is stored once, rearranged).
  std::string In(const Node& n, int i);
  const Shape& InShape(const Node& n, int i) const;
  DType InType(const Node& n, int i) const { return n.input_types[static_cast<std::size_t>(i)]; }

  // --- Outputs and sources ---
  // The ONNX name of output |k| of node |id| (std::out_of_range before it
  // is named), and FindOutputName's null then.
  const std::string& OutputName(int id, int k) const { return names_.at(Endpoint{id, k}); }
  const std::string* FindOutputName(int id, int k) const;
  // A graph input |name| of |dtype| and |shape| (unknown dims are named
  // "batch" for the first, "d<i>" after).
  void AddGraphInput(const std::string& name, DType dtype, const Shape& shape);
  // |value| becomes initializer |name| when something reads it.
  void SetPending(const std::string& name, const Tensor& value) { pending_[name] = value; }
  // The value of ReadVariable node |id|, or null when it has none.
  const Tensor* VariableValue(int id) const;

 private:
  std::string TensorName(const Endpoint& e) const;
  Status Collect();
  Status ResolveVariables();
  Status Convert(int id);

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

// The context an export function gets for one Weft node, whose outputs
// have their ONNX names already.
class ExportContext {
 public:
  using Node = Graph::Node;

  ExportContext(Exporter& exporter, int id);

  Exporter& exporter() { return e_; }
  const Node& node() const { return n_; }
  int id() const { return id_; }
  const std::string& name() const { return n_.name(); }
  const std::string& op() const { return n_.op_name(); }
  int num_inputs() const { return static_cast<int>(n_.inputs.size()); }
  int num_outputs() const { return n_.num_outputs(); }
  // The ONNX name of output 0 ("" without outputs) and its type.
  const std::string& out() const { return out_; }
  DType dtype() const { return dtype_; }
  // The ONNX name of output |k|, and FindOutName's null when |k| is not
  // an output.
  const std::string& OutName(int k) const { return e_.OutputName(id_, k); }
  const std::string* FindOutName(int k) const { return e_.FindOutputName(id_, k); }

  // Inputs (Exporter::In and the others, for this node).
  std::string In(int i) { return e_.In(n_, i); }
  const Tensor* ConstInput(int i) const { return e_.ConstInput(n_, i); }
  const Shape& InShape(int i) const { return e_.InShape(n_, i); }
  DType InType(int i) const { return e_.InType(n_, i); }

  // The node's attributes, with defaults.
  int64_t Int(const char* name, int64_t def = 0) const;
  double Float(const char* name, double def = 0) const;
  bool Bool(const char* name, bool def = false) const;
  std::string Str(const char* name, const std::string& def = "") const;
  std::vector<int64_t> Ints(const char* name) const;

  // Emission (the Exporter's).
  std::string Fresh(const std::string& base) { return e_.Fresh(base); }
  onnx::NodeProto* Emit(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name) {
    return e_.Emit(op, inputs, outputs, name);
  }
  onnx::NodeProto* Emit(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name,
                        const std::function<void(onnx::NodeProto*)>& attrs) {
    return e_.Emit(op, inputs, outputs, name, attrs);
  }
  std::string Emit1(const std::string& op, const std::vector<std::string>& inputs, const std::string& name,
                    const std::function<void(onnx::NodeProto*)>& attrs = nullptr) {
    return e_.Emit1(op, inputs, name, attrs);
  }
  Expected<std::string> Initializer(const std::string& base, const Tensor& value) {
    return e_.Initializer(base, value);
  }
  std::string I64s(const std::string& base, const std::vector<int64_t>& v) { return e_.I64s(base, v); }
  std::string ScalarConst(const std::string& base, DType dtype, double v) { return e_.ScalarConst(base, dtype, v); }
  std::string Transpose(const std::string& in, const std::vector<int64_t>& perm, const std::string& name) {
    return e_.Transpose(in, perm, name);
  }
  // ONNX op |onnx_op| of the node's first |inputs| inputs, computing
  // output 0, named after the node.
  onnx::NodeProto* Simple(const std::string& onnx_op, int inputs);

 private:
  Exporter& e_;
  int id_;
  const Node& n_;
  std::string out_;
  DType dtype_;
};

}  // namespace weft::onnx_io

#endif  // WEFT_CORE_ONNX_EXPORTER_H_
