// A validated graph: every node's op is known, its attrs match the op's
// declaration (defaults filled in), every input names an existing output of
// the right dtype, there is no cycle, and every output has an inferred dtype
// and (partial) shape.
//
//   WEFT_ASSIGN_OR_RETURN(Graph g, Graph::FromGraphDef(std::move(def)));
//   for (const Graph::Node& n : g.nodes()) ...
//
// Every problem is reported with the node: "node 'dense1/matmul' (MatMul):
// inner dimensions differ: [128,784] x [512,10]".
#ifndef WEFT_CORE_GRAPH_GRAPH_H_
#define WEFT_CORE_GRAPH_GRAPH_H_

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/graph/graph_def.h"
#include "core/graph/op_def.h"

namespace weft {

// One output of one node.
struct Endpoint {
  int node = -1;
  int index = 0;
  friend bool operator==(const Endpoint& a, const Endpoint& b) { return a.node == b.node && a.index == b.index; }
};

class Graph {
 public:
  struct Node {
    int id = -1;
    NodeDef def;  // attrs include defaults
    const OpDef* op = nullptr;
    std::vector<Endpoint> inputs;     // data inputs, in order
    std::vector<int> control_inputs;  // nodes this one runs after
    std::vector<DType> input_types;
    std::vector<DType> output_types;
    std::vector<Shape> output_shapes;
    // For resource outputs: the declared shape of the variable they refer to.
    std::vector<Shape> output_handle_shapes;

    const std::string& name() const { return def.name; }
    const std::string& op_name() const { return def.op; }
    int num_outputs() const { return static_cast<int>(output_types.size()); }
    // "node 'x' (Op)"
    std::string Describe() const;
  };

  Graph() = default;

  // Validates |def| against |registry| (see the file comment).
  static Expected<Graph> FromGraphDef(GraphDef def, const OpRegistry& registry);
  static Expected<Graph> FromGraphDef(GraphDef def) { return FromGraphDef(std::move(def), OpRegistry::Global()); }

  const std::vector<Node>& nodes() const { return nodes_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int id) const { return nodes_[static_cast<std::size_t>(id)]; }
  // The node named |name|, or nullptr.
  const Node* Find(std::string_view name) const;
  // Parses "node" or "node:k" against this graph: NOT_FOUND naming what is
  // missing, with a "did you mean" hint.
  Expected<Endpoint> ResolveTensor(std::string_view name) const;

  // Node ids such that every node comes after its inputs.
  const std::vector<int>& topological_order() const { return order_; }
  // For each node, its consumers: (consumer id, consumer input index), and
  // -1 as the index for control consumers.
  const std::vector<std::vector<std::pair<int, int>>>& consumers() const { return consumers_; }

  const std::vector<FunctionDef>& library() const { return library_; }
  uint32_t producer() const { return producer_; }

  // The graph as a GraphDef (attrs with defaults filled in).
  GraphDef ToGraphDef() const;

 private:
  std::vector<Node> nodes_;
  std::unordered_map<std::string, int> index_;
  std::vector<int> order_;
  std::vector<std::vector<std::pair<int, int>>> consumers_;
  std::vector<FunctionDef> library_;
  uint32_t producer_ = kGraphVersion;
};

// Checks a node name: non-empty, letters, digits and "_.-/", not starting
// with '/'.
Status ValidateNodeName(std::string_view name);

// What node inference knows about one data input.
struct NodeInput {
  std::string text;                 // as written: "x:1"
  const NodeDef* source = nullptr;  // the producing node
  int source_outputs = 0;           // how many outputs it has
  int index = 0;                    // which one this is
  DType dtype = DType::kInvalid;
  Shape shape = Shape::UnknownRank();
  Shape handle_shape = Shape::UnknownRank();  // for resource inputs
  bool back_edge = false;                     // from a NextIteration not inferred yet
};

struct NodeTypes {
  std::vector<DType> input_types;
  std::vector<DType> output_types;
  std::vector<Shape> output_shapes;
  std::vector<Shape> output_handle_shapes;
};

// Checks |def| against |op| given its inputs and infers its outputs:
// unknown, missing and mistyped attrs, missing type and number attrs
// (inferred from the inputs), defaults (written into |def|), the input
// count and dtypes, and the shape function. Errors name the node.
Expected<NodeTypes> InferNode(const OpDef& op, NodeDef& def, const std::vector<NodeInput>& inputs);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_GRAPH_H_
