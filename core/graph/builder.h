// Building graphs in C++: the API tests, tools/modelgen, the gradient
// builder and the training loop use.
//
//   GraphBuilder b;
//   Output x = b.Placeholder(DType::kF32, Shape{-1, 784}, "x");
//   Output w = b.Const(weights, "dense1/kernel");
//   Output y;
//   {
//     auto scope = b.NameScope("dense1");
//     y = b.Op("Relu", {b.Op("MatMul", {x, w})});   // "dense1/MatMul", "dense1/Relu"
//   }
//   WEFT_ASSIGN_OR_RETURN(Graph g, b.Build());
//
// Every node is checked (attrs, dtypes, shapes) as it is added. The first
// error is kept and returned by status() and Build(); nodes added after it
// are ignored, so a sequence of calls needs one check at the end. Type
// attrs ("T") are inferred from the inputs. Typed wrappers for every op are
// generated from the registry into weft/ops.h (see tools/opgen).
#ifndef WEFT_CORE_GRAPH_BUILDER_H_
#define WEFT_CORE_GRAPH_BUILDER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/graph/graph.h"

namespace weft {

class GraphBuilder;

// One output of a node being built (or, with index -1, the node itself, for
// ops without outputs; usable only as a control dependency).
class Output {
 public:
  Output() = default;
  Output(const GraphBuilder* builder, int node, int index) : builder_(builder), node_(node), index_(index) {}

  bool valid() const { return builder_ != nullptr && node_ >= 0; }
  int node() const { return node_; }
  int index() const { return index_; }
  const std::string& node_name() const;
  // "node" or "node:k".
  std::string name() const;
  DType dtype() const;
  const Shape& shape() const;

 private:
  const GraphBuilder* builder_ = nullptr;
  int node_ = -1;
  int index_ = 0;
};

// A control-flow context: a branch of a cond, or a loop (see
// core/graph/control_flow.h). The builder keeps a stack of them and records
// the context each node was created in. When a node takes as input a tensor
// of an enclosing context, the builder asks each context on the way in to
// route it (a Switch for a branch, an Enter for a loop), once per tensor;
// a tensor made inside a context is not visible outside it except through
// the results its builder hands back. Nodes without data inputs created in
// a context get a control input on its pivot, so that they run only when
// (and as often as) the context does.
//
// Subclasses decide how a value crosses into them; the gradient builder's
// backward loops are meant to be one more kind (mapping forward-loop values
// to stack pops through CaptureForeign).
class ControlFlowContext {
 public:
  // |name| is the context's name scope ("cond", "outer/while_1"): capture
  // nodes are named under it.
  explicit ControlFlowContext(std::string name) : name_(std::move(name)) {}
  virtual ~ControlFlowContext() = default;
  ControlFlowContext(const ControlFlowContext&) = delete;
  ControlFlowContext& operator=(const ControlFlowContext&) = delete;

  const std::string& name() const { return name_; }
  // The enclosing context, or nullptr at the top level.
  ControlFlowContext* outer() const { return outer_; }
  // True when this context is |other| or nested in it (every context is
  // within the top level, nullptr).
  bool IsWithin(const ControlFlowContext* other) const;
  // For messages: "while loop 'while'", "cond 'cond' (true branch)".
  virtual std::string Describe() const = 0;
  // The node nodes without data inputs depend on (invalid: none).
  virtual Output pivot() const = 0;

  // Makes |value|, which is visible in outer(), visible in this context by
  // adding nodes through |b| (called with this context current, with
  // captures off, and the name scope set to name()). The builder keeps the
  // result, so each tensor is captured once.
  virtual Expected<Output> CaptureFromOuter(GraphBuilder& b, const Output& value) = 0;
  // Makes |value|, which lives in |from|, a context that does not enclose
  // this one, visible here. Return an invalid Output to refuse (the builder
  // then reports the tensor as not visible); the default refuses.
  virtual Expected<Output> CaptureForeign(GraphBuilder& b, const Output& value, const ControlFlowContext* from);

 private:
  friend class GraphBuilder;
  std::string name_;
  ControlFlowContext* outer_ = nullptr;
  std::map<std::pair<int, int>, Output> captured_;  // (node, index) -> value here
};

class GraphBuilder {
 public:
  explicit GraphBuilder(const OpRegistry& registry = OpRegistry::Global()) : registry_(registry) {}
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  // Adds a node of |op| and returns its outputs. |name| defaults to the op's
  // name; either way it is placed under the current name scope and made
  // unique ("dense1/MatMul_1").
  std::vector<Output> AddNode(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs = {},
                              std::string_view name = {});
  // AddNode for ops with exactly one output (for ops with none, returns the
  // node itself, usable as a control dependency).
  Output Op(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs = {}, std::string_view name = {});

  Output Const(const Tensor& value, std::string_view name = {});
  template <class T>
  Output Scalar(T value, std::string_view name = {}) {
    return Const(Tensor::Scalar<T>(value), name);
  }
  Output Placeholder(DType dtype, const Shape& shape, std::string_view name);

  // Scopes, undone when the returned object is destroyed.
  class Scope {
   public:
    explicit Scope(std::function<void()> undo) : undo_(std::move(undo)) {}
    Scope(Scope&& other) noexcept : undo_(std::exchange(other.undo_, nullptr)) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (undo_) undo_();
    }

   private:
    std::function<void()> undo_;
  };
  // Names of nodes added in the scope get the prefix "<scope>/".
  [[nodiscard]] Scope NameScope(std::string_view scope);
  // Names of nodes added in the scope get the prefix "<scope>/", |scope|
  // being the whole prefix ("dense1/kernel/init"), neither under the
  // current scope nor made unique: to add nodes beside ones made earlier,
  // as TensorFlow's name_scope("a/b/") does. "" is the top level.
  [[nodiscard]] Scope AbsoluteNameScope(std::string_view scope);
  // Nodes added in the scope request |device| ("/device:CPU:1").
  [[nodiscard]] Scope DeviceScope(std::string_view device);
  // Nodes added in the scope run after every node of |deps|.
  [[nodiscard]] Scope ControlDependencies(const std::vector<Output>& deps);

  // The first error, or OK.
  const Status& status() const { return status_; }
  // Returns the first error and forgets it, so that building goes on: for
  // interactive builders (the Python API, docs/python.md) that report each
  // node's error as it happens. The node that failed was not added.
  Status TakeError() { return std::exchange(status_, Status()); }
  // The graph, validated as a whole.
  Expected<Graph> Build() const;
  // What was built so far (attrs with defaults filled in).
  const GraphDef& def() const { return def_; }

  // Information about node |id| of the graph being built.
  const NodeDef& node_def(int id) const { return def_.nodes[static_cast<std::size_t>(id)]; }
  const NodeTypes& node_types(int id) const { return types_[static_cast<std::size_t>(id)]; }
  // The node named |name|, as an Output of index 0 (invalid when absent).
  Output Find(std::string_view name) const;
  // "node" or "node:k": NOT_FOUND (with a "did you mean") when there is no
  // such output.
  Expected<Output> Resolve(std::string_view tensor) const;
  // The data inputs of node |id|, in order.
  std::vector<Output> Inputs(int id) const;
  // The outputs of node |id|.
  std::vector<Output> Outputs(int id) const;
  int num_nodes() const { return static_cast<int>(def_.nodes.size()); }

  // Adds every node of |graph| under its own name (no scope, no renaming),
  // so that a graph read from a file can be extended: the training loop
  // adds gradients and updates to a model this way. Fails if a name is
  // taken.
  Status Import(const Graph& graph);

  // Replaces data input |index| of node |node| with |value|, which must
  // have the input's dtype: how a loop's Merge gets its back edge from the
  // NextIteration built after it. The node's inferred shapes stay as they
  // were (the graph checks the back edge when it is built).
  Status SetInput(int node, int index, const Output& value);

  // A unique name under the current scope for a node called |base|.
  std::string UniqueName(std::string_view base);
  // The current name scope, "" or "a/b" (without a trailing '/').
  std::string CurrentScope() const;

  // Records |error| as the builder's error unless it already has one, and
  // returns the builder's error (for builders of structures, such as
  // Cond, that check more than single nodes).
  Status Fail(Status error);

  // --- Control-flow contexts (see ControlFlowContext) ---
  // Takes ownership of |context|, nested in the current context, and
  // returns it; it lives as long as the builder.
  ControlFlowContext* AddContext(std::unique_ptr<ControlFlowContext> context);
  // Makes |context| (from AddContext) the current context in the scope.
  // Control dependencies opened outside it do not apply inside (an edge
  // from outside into a loop frame must go through its Enter nodes).
  [[nodiscard]] Scope EnterContext(ControlFlowContext* context);
  // Nodes added in the scope take their inputs as given, without captures,
  // pivots or visibility checks, and are recorded in |context|: for
  // control-flow builders wiring edges across contexts themselves (a
  // Merge joining two branches, an Exit leaving a loop). The control
  // dependencies opened so far apply only with |keep_control_dependencies|
  // (a loop's Enter nodes keep them: they are where the loop starts).
  [[nodiscard]] Scope RawContext(ControlFlowContext* context, bool keep_control_dependencies = false);
  // In the scope, a node may take as input a tensor made in a context
  // nested in the current one, as it is (no error): for the gradient
  // builder, whose backward ops read forward values from inside conds.
  [[nodiscard]] Scope AllowInnerTensors();
  // The current context (nullptr at the top level).
  ControlFlowContext* current_context() const { return context_; }
  // The context node |id| was created in (nullptr: the top level).
  ControlFlowContext* node_context(int id) const { return node_contexts_[static_cast<std::size_t>(id)]; }
  // |value| made visible in the current context: itself when it already
  // is, else routed through each context on the way in. Errors (recorded
  // in the builder) when |value| was made inside a context that does not
  // enclose the current one; |consumer| ("node 'y' (Neg): input 0") starts
  // the message. AddNode does this for every input.
  Expected<Output> Capture(const Output& value, std::string_view consumer = {});

 private:
  const OpRegistry& registry_;
  GraphDef def_;
  std::vector<NodeTypes> types_;
  std::unordered_map<std::string, int> index_;
  std::unordered_map<std::string, int> name_counts_;
  std::vector<std::string> scopes_;
  std::vector<std::string> devices_;
  std::vector<std::vector<Output>> control_deps_;
  std::vector<ControlFlowContext*> node_contexts_;  // one per node
  std::vector<std::unique_ptr<ControlFlowContext>> contexts_;
  ControlFlowContext* context_ = nullptr;
  bool raw_ = false;
  bool allow_inner_ = false;
  Status status_;

  Expected<Output> CaptureInto(ControlFlowContext* context, const Output& value, std::string_view consumer);
};

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_BUILDER_H_
