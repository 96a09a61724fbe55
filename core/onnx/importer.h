// The ONNX importer's internals, shared by the driver (onnx_import.cc),
// NodeContext (onnx_node_context.cc), the type and tensor conversions
// (onnx_tensors.cc) and the op converters (onnx_ops.cc, converters.h). Not
// a public header: see core/onnx/onnx.h.
//
// The importer walks the (topologically sorted) ONNX graph once. Each ONNX
// tensor name maps to a Value: the Weft Output computing it, and, when it
// is known at import time, the tensor itself (initializers, Constant nodes
// and small integer shape arithmetic folded on the way). Converters ask
// for an input either as an Output (materialising a known tensor as a
// Const, or an initializer as a variable, on first use) or as a known
// tensor (for inputs that are attrs in Weft: axes, pads, shapes).
#ifndef WEFT_CORE_ONNX_IMPORTER_H_
#define WEFT_CORE_ONNX_IMPORTER_H_

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/builder.h"
#include "core/onnx/onnx.h"

namespace weft::onnx_io {

// How a floating-point initializer is stored when it becomes a variable
// or constant: as ONNX has it, or rearranged for the one kind of use it
// has (decided before conversion from every use).
enum class Layout {
  kAsIs,
  kConvHwio,       // Conv weights [O, I, kh, kw] -> Conv2D's [kh, kw, I, O]
  kDepthwiseHwcm,  // Conv weights [C*M, 1, kh, kw] (group = C) -> DepthwiseConv2D's [kh, kw, C, M]
};

struct Value {
  // The tensor as ONNX has it. For a rank-4 activation made by a
  // channels-last converter this is invalid until a converter that needs
  // NCHW asks (a Transpose of |nhwc| is made then, once).
  Output out;  // invalid until materialised
  // The same tensor channels-last (NHWC), when a converter made it so or
  // one asked for it (a Transpose of |out|, once).
  Output nhwc;
  Tensor known;                        // valid when the value is known at import time
  std::string initializer;             // the initializer it is (or is an Identity of), or ""
  Shape shape = Shape::UnknownRank();  // as declared (graph inputs, initializers)
  DType dtype = DType::kInvalid;
};

class Importer;

// The context a converter gets for one node.
class NodeContext {
 public:
  NodeContext(Importer& importer, const onnx::NodeProto& node, int64_t opset)
      : importer_(importer), node_(node), opset_(opset) {}

  const onnx::NodeProto& node() const { return node_; }
  const ImportOptions& options() const;
  int64_t opset() const { return opset_; }
  GraphBuilder& b();

  int num_inputs() const { return node_.input_size(); }
  // Whether input |i| is given (ONNX optional inputs may be "" or absent).
  bool has_input(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }
  bool has_output(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }
  // Input |i| as an Output, as ONNX lays it out (NCHW for images).
  Expected<Output> In(int i);
  // Input |i|, rank 4, channels-last: [N, H, W, C] (a Transpose is made
  // when it is NCHW only).
  Expected<Output> InNhwc(int i);
  // Whether input |i| exists channels-last already (so that a
  // layout-agnostic op should work on that form and keep it).
  bool IsNhwc(int i) const;
  // Input |i| as an Output of initializer |i| stored in |layout| (an
  // initializer with another layout, or a computed value, is an error the
  // caller avoids by asking LayoutOf first).
  Expected<Output> InWithLayout(int i, Layout layout);
  Layout LayoutOf(int i) const;
  // Input |i|'s value when known at import time, else an invalid Tensor.
  Tensor Known(int i) const;
  // Input |i|'s initial value when it is an initializer (trainable or
  // not), else Known(i).
  Tensor Initial(int i) const;
  // Whether input |i| is an initializer that becomes a variable.
  bool Trainable(int i) const;
  // A parameter derived from initializers (fused LSTM weights): a
  // variable initialised to |value|, or a Const when frozen or not floating.
  Expected<Output> Param(const Tensor& value, const std::string& name);
  // Input |i|'s value as integers; an error naming |what| when not known.
  Expected<std::vector<int64_t>> KnownInts(int i, std::string_view what) const;
  Expected<double> KnownScalar(int i, std::string_view what) const;
  // The best shape known for input |i| (Weft's, merged with ONNX's).
  Shape InShape(int i) const;
  DType InDType(int i) const;

  // Attributes, with defaults.
  bool HasAttr(std::string_view name) const;
  int64_t Int(std::string_view name, int64_t def) const;
  double Float(std::string_view name, double def) const;
  std::string Str(std::string_view name, std::string_view def) const;
  std::vector<int64_t> Ints(std::string_view name, std::vector<int64_t> def = {}) const;
  std::vector<double> Floats(std::string_view name) const;
  const onnx::AttributeProto* Attr(std::string_view name) const;

  // Output |out| is input |in| (Identity): the same value, known or not,
  // and the same initializer.
  void Alias(int out, int in);
  // Sets output |i|.
  void SetOut(int i, const Output& out);
  // Sets output |i| to |out|, the ONNX output's NHWC transpose.
  void SetOutNhwc(int i, const Output& out);
  void SetKnown(int i, const Tensor& value);
  // The Weft name for a new node: the ONNX node's name under "/" + |suffix|.
  std::string Name(std::string_view suffix = {}) const;

  // Subgraphs (If branches, Loop and Scan bodies). MaterialiseCaptures
  // makes, in the current context, every outer value |graph| reads (so
  // that variables and constants are made outside a cond or loop and
  // routed in); call it before Cond or WhileLoop. Subgraph converts
  // |graph| in the builder's current context with its inputs bound to
  // |inputs| and returns its outputs.
  Status MaterialiseCaptures(const onnx::GraphProto& graph);
  // |known|, when given, gets each output's value known at import (or an
  // invalid Tensor).
  Expected<std::vector<Output>> Subgraph(const onnx::GraphProto& graph, const std::vector<Output>& inputs,
                                         std::vector<Tensor>* known = nullptr);

  // An error about this node (the driver adds the node's name and type).
  template <class... Args>
  Status Error(const Args&... args) const {
    return InvalidArgumentError(args...);
  }
  template <class... Args>
  Status Unsupported(const Args&... args) const {
    return UnimplementedError(args...);
  }

 private:
  Importer& importer_;
  const onnx::NodeProto& node_;
  int64_t opset_;
};

using Converter = std::function<Status(NodeContext&)>;

// The converters by ONNX op type (default domain), or "domain::type" for
// another domain's (kTrainingDomain's optimizers), from onnx_ops.cc.
const std::map<std::string, Converter, std::less<>>& Converters();
inline constexpr const char* kTrainingDomain = "ai.onnx.preview.training";
// The key of |node|'s converter: its op type, "domain::type" outside the
// default domain.
std::string ConverterKey(const onnx::NodeProto& node);

// Conversions between ONNX's and Weft's element types.
Expected<DType> DTypeFromOnnx(int32_t onnx_type);
int32_t DTypeToOnnx(DType dtype);  // 0 (UNDEFINED) for none

// The shape and type a ValueInfoProto declares (UNIMPLEMENTED for
// sequences, maps and optionals).
Expected<std::pair<Shape, DType>> ValueInfoType(const onnx::ValueInfoProto& info);

// A tensor from a TensorProto (raw or typed fields, or external data under
// |base_dir|).
Expected<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir);

// Small helpers for converters.
Tensor Int64s(const std::vector<int64_t>& values);
Tensor Int64s(const std::vector<int64_t>& values, const Shape& shape);
std::vector<int64_t> ToInts(const Tensor& t);  // integer or float tensor, as int64
// A scalar of |dtype|; integers saturate at the type's range (+inf is the
// largest value, NaN is 0), f16 and bf16 round to nearest.
Expected<Tensor> ScalarOf(DType dtype, double value);
// The lowest and highest values of |dtype| (-inf and +inf for floats).
std::pair<double, double> DTypeRange(DType dtype);

class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string source, std::string base_dir, const ImportOptions& options);
  Expected<ImportedModel> Run();

  GraphBuilder& b() { return b_; }
  Value* Find(const std::string& name);
  Expected<Output> Materialise(const std::string& name, Layout layout);
  Expected<Output> MaterialiseNhwc(const std::string& name);
  Layout LayoutOf(const std::string& name) const;
  const ImportOptions& options() const { return options_; }
  Expected<Output> Param(const Tensor& value, const std::string& name);
  Status MaterialiseCaptures(const onnx::GraphProto& graph);
  // Converts |graph| (a subgraph) with its inputs bound to |inputs|; the
  // values it defines are forgotten afterwards and the outer values it
  // reads are restored as they were, so that nothing made inside a cond
  // branch or loop body is used outside it.
  Expected<std::vector<Output>> ConvertSubgraph(const onnx::GraphProto& graph, const std::vector<Output>& inputs,
                                                std::vector<Tensor>* known = nullptr);

 private:
  Status CheckOpsSupported(const onnx::GraphProto& graph);
  Status DecideLayouts(const onnx::GraphProto& graph);
  // |graph_name| is "" for the main graph, else the subgraph's name.
  Status ConvertNode(const onnx::NodeProto& node, int index, int count, const std::string& graph_name = "");
  Expected<Tensor> InitializerValue(const std::string& name, Layout layout);

  const onnx::ModelProto& model_;
  std::string source_;
  std::string base_dir_;
  ImportOptions options_;
  int64_t opset_ = 0;
  GraphBuilder b_;
  std::map<std::string, Value> values_;
  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, Layout> layouts_;
  std::map<std::string, int64_t> groups_;          // of depthwise initializers
  std::map<std::string, std::string> unproduced_;  // optional outputs not produced -> the node
  std::vector<Output> inits_;
  int64_t variables_ = 0;
  // How deep in subgraphs the conversion is (0: the main graph).
  int subgraph_depth_ = 0;
};

// A Weft node name for an ONNX name: "/layer1/conv/Conv" -> "layer1/conv/Conv",
// characters Weft does not take replaced by '_'.
std::string SanitiseName(std::string_view onnx_name);

}  // namespace weft::onnx_io

#endif  // WEFT_CORE_ONNX_IMPORTER_H_
