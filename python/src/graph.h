// weft.Graph and weft.Tensor of the Python module (docs/python.md).
#ifndef WEFT_PYTHON_SRC_GRAPH_H_
#define WEFT_PYTHON_SRC_GRAPH_H_

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/graph/builder.h"
#include "python/src/convert.h"

namespace weft::python {

class PyGraph;

// One output of a node (index -1: the node itself), with the graph that
// owns it kept alive.
struct PyTensor {
  std::shared_ptr<PyGraph> graph;
  Output output;
  std::string name() const;
};

class PyGraph : public std::enable_shared_from_this<PyGraph> {
 public:
  PyGraph() = default;
  PyGraph(const PyGraph&) = delete;
  PyGraph& operator=(const PyGraph&) = delete;

  const GraphBuilder& builder() const { return builder_; }

  // A node of |op| with |inputs| (tensors, or lists of tensors for list
  // arguments) and |attrs|; its outputs (or the node, for an op without).
  std::vector<PyTensor> AddNode(const std::string& op, const py::list& inputs, const py::dict& attrs,
                                const std::string& name);
  void PushNameScope(const std::string& scope);
  void PushDeviceScope(const std::string& device);
  void PushControlDependencies(const std::vector<PyTensor>& deps);
  void PopScope();
  PyTensor Find(const std::string& tensor);
  std::vector<PyTensor> Gradients(const std::vector<PyTensor>& ys, const std::vector<PyTensor>& xs,
                                  const std::vector<PyTensor>& grad_ys);
  py::tuple Cond(const PyTensor& pred, const py::function& true_fn, const py::function& false_fn,
                 const std::string& name);
  py::tuple WhileLoop(const py::function& cond_fn, const py::function& body_fn, const std::vector<PyTensor>& loop_vars,
                      std::optional<int64_t> maximum_iterations, int parallel_iterations, const std::string& name);
  // Every node of |graph| into this empty graph.
  void Import(const Graph& graph);
  void Save(const std::string& path) const;

  // The graph as built so far, checked as a whole.
  Graph Snapshot() const;
  PyTensor Wrap(const Output& output);
  // |t|'s output, when |t| belongs to this graph.
  const Output& Own(const PyTensor& t, std::string_view what) const;

 private:
  void CheckBuilder();

  GraphBuilder builder_;
  std::vector<GraphBuilder::Scope> scopes_;
};

void BindGraph(py::module_& m);

}  // namespace weft::python

#endif  // WEFT_PYTHON_SRC_GRAPH_H_
