// weft.Graph and weft.Tensor: a GraphBuilder behind a Python object, one
// node per op call, each call's error raised at once (docs/python.md).
#include "python/src/graph.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/grad/gradients.h"
#include "core/graph/control_flow.h"
#include "core/graph/serialize.h"
#include "core/onnx/onnx.h"

namespace weft::python {

void PyGraph::CheckBuilder() {
  Status error = builder_.TakeError();
  if (!error.ok()) Raise(error);
}

PyTensor PyGraph::Wrap(const Output& output) { return PyTensor{shared_from_this(), output}; }

const Output& PyGraph::Own(const PyTensor& t, std::string_view what) const {
  if (t.graph.get() != this) {
    Raise(InvalidArgumentError(what, ": tensor ", Quote(t.output.name()),
                               " belongs to another graph; build every node of a graph in it"));
  }
  return t.output;
}

std::vector<PyTensor> PyGraph::AddNode(const std::string& op, const py::list& inputs, const py::dict& attrs,
                                       const std::string& name) {
  const OpDef* def = OpRegistry::Global().Find(op);
  if (def == nullptr) Raise(NotFoundError("no op ", Quote(op), " is registered"));
  const std::string what = StrCat("op ", op, name.empty() ? "" : StrCat(" '", name, "'"));
  std::vector<Output> flat;
  for (const py::handle& in : inputs) {
    if (py::isinstance<py::list>(in) || py::isinstance<py::tuple>(in)) {
      for (const py::handle& item : in) flat.push_back(Own(item.cast<const PyTensor&>(), what));
    } else {
      flat.push_back(Own(in.cast<const PyTensor&>(), what));
    }
  }
  AttrMap attr_map;
  for (const auto& [key, value] : attrs) {
    const std::string attr = key.cast<std::string>();
    const AttrDef* attr_def = def->FindAttr(attr);
    if (attr_def == nullptr) {
      std::vector<std::string> names;
      for (const AttrDef& a : def->attrs) names.push_back(a.name);
      Raise(InvalidArgumentError(what, " has no attr ", Quote(attr),
                                 " (its attrs: ", names.empty() ? std::string("none") : StrJoin(names, ", "), ")"));
    }
    attr_map[attr] = ToAttr(*attr_def, value, StrCat(what, ": attr '", attr, "'"));
  }
  std::vector<Output> outputs = builder_.AddNode(op, flat, std::move(attr_map), name);
  CheckBuilder();
  std::vector<PyTensor> result;
  if (def->outputs.empty()) {
    // The node itself, for control dependencies and targets.
    result.push_back(Wrap(Output(&builder_, builder_.num_nodes() - 1, -1)));
    return result;
  }
  for (const Output& o : outputs) result.push_back(Wrap(o));
  return result;
}

void PyGraph::PushNameScope(const std::string& scope) {
  // "a/b/" names the whole prefix, as in TensorFlow: to add nodes beside
  // ones made earlier ("" after stripping: the top level).
  if (!scope.empty() && scope.back() == '/') {
    scopes_.push_back(builder_.AbsoluteNameScope(std::string_view(scope).substr(0, scope.size() - 1)));
    return;
  }
  scopes_.push_back(builder_.NameScope(scope));
}
void PyGraph::PushDeviceScope(const std::string& device) { scopes_.push_back(builder_.DeviceScope(device)); }
void PyGraph::PushControlDependencies(const std::vector<PyTensor>& deps) {
  std::vector<Output> outs;
  for (const PyTensor& d : deps) outs.push_back(Own(d, "control_dependencies"));
  scopes_.push_back(builder_.ControlDependencies(outs));
}
void PyGraph::PopScope() {
  if (scopes_.empty()) Raise(FailedPreconditionError("no scope of this graph is open"));
  scopes_.pop_back();
}

PyTensor PyGraph::Find(const std::string& tensor) {
  if (tensor.find(':') == std::string::npos) {
    const Output node = builder_.Find(tensor);
    if (node.valid() && builder_.Outputs(node.node()).empty()) return Wrap(Output(&builder_, node.node(), -1));
  }
  return Wrap(Check(builder_.Resolve(tensor)));
}

Graph PyGraph::Snapshot() const {
  auto graph = builder_.Build();
  if (!graph.ok()) Raise(graph.status());
  return std::move(*graph);
}

void PyGraph::Import(const Graph& graph) {
  if (builder_.num_nodes() > 0) Raise(FailedPreconditionError("a graph is read into an empty weft.Graph only"));
  Status imported = builder_.Import(graph);
  builder_.TakeError().IgnoreError();  // reported below, from the result
  Check(imported);
}

std::vector<PyTensor> PyGraph::Gradients(const std::vector<PyTensor>& ys, const std::vector<PyTensor>& xs,
                                         const std::vector<PyTensor>& grad_ys) {
  std::vector<Output> y, x, gy;
  for (const PyTensor& t : ys) y.push_back(Own(t, "gradients: ys"));
  for (const PyTensor& t : xs) x.push_back(Own(t, "gradients: xs"));
  for (const PyTensor& t : grad_ys) gy.push_back(Own(t, "gradients: grad_ys"));
  auto grads = grad::AddGradients(builder_, y, x, gy);
  builder_.TakeError().IgnoreError();  // reported below, from the result
  if (!grads.ok()) Raise(grads.status());
  std::vector<PyTensor> out;
  for (const Output& g : *grads) out.push_back(Wrap(g));
  return out;
}

namespace {

// Calls a Python function that builds part of a graph, turning what it
// returns into outputs of |graph|; a Python exception inside propagates.
std::vector<Output> BuiltBy(PyGraph& graph, const py::function& fn, const py::args& args, const char* what) {
  py::object result = fn(*args);
  std::vector<Output> outs;
  auto add = [&](const py::handle& h) {
    if (!py::isinstance<PyTensor>(h)) {
      Raise(InvalidArgumentError(what, " returned a ", py::str(py::type::of(h).attr("__name__")).cast<std::string>(),
                                 "; return weft tensors (make constants with weft.constant)"));
    }
    outs.push_back(graph.Own(h.cast<const PyTensor&>(), what));
  };
  if (py::isinstance<py::list>(result) || py::isinstance<py::tuple>(result)) {
    for (const py::handle& h : result) add(h);
  } else {
    add(result);
  }
  return outs;
}

py::tuple Wrapped(PyGraph& graph, const std::vector<Output>& outs) {
  py::tuple t(outs.size());
  for (std::size_t i = 0; i < outs.size(); ++i) t[i] = py::cast(graph.Wrap(outs[i]));
  return t;
}

}  // namespace

py::tuple PyGraph::Cond(const PyTensor& pred, const py::function& true_fn, const py::function& false_fn,
                        const std::string& name) {
  const Output p = Own(pred, "cond: pred");
  // A Python exception in a branch is kept and raised once the builder has
  // unwound its context.
  std::optional<py::error_already_set> error;
  auto branch = [&](const py::function& fn, const char* what) -> Expected<std::vector<Output>> {
    try {
      return BuiltBy(*this, fn, py::args(), what);
    } catch (py::error_already_set& e) {
      error.emplace(std::move(e));
      return CancelledError("a Python exception in ", what);
    }
  };
  auto outs = weft::Cond(
      builder_, p, [&] { return branch(true_fn, "cond's true_fn"); },
      [&] { return branch(false_fn, "cond's false_fn"); }, name.empty() ? "cond" : name);
  builder_.TakeError().IgnoreError();  // reported below, from the result
  if (error) throw std::move(*error);
  if (!outs.ok()) Raise(outs.status());
  return Wrapped(*this, *outs);
}

py::tuple PyGraph::WhileLoop(const py::function& cond_fn, const py::function& body_fn,
                             const std::vector<PyTensor>& loop_vars, std::optional<int64_t> maximum_iterations,
                             int parallel_iterations, const std::string& name) {
  std::vector<Output> vars;
  for (const PyTensor& t : loop_vars) vars.push_back(Own(t, "while_loop: loop_vars"));
  std::optional<py::error_already_set> error;
  auto as_args = [&](const std::vector<Output>& outs) {
    py::tuple t = Wrapped(*this, outs);
    return py::args(t);
  };
  WhileOptions options;
  options.maximum_iterations = maximum_iterations;
  options.parallel_iterations = parallel_iterations;
  if (!name.empty()) options.name = name;
  auto outs = weft::WhileLoop(
      builder_,
      [&](const std::vector<Output>& v) -> Expected<Output> {
        try {
          std::vector<Output> r = BuiltBy(*this, cond_fn, as_args(v), "while_loop's cond");
          if (r.size() != 1) return InvalidArgumentError("while_loop's cond returned ", r.size(), " tensors, not 1");
          return r[0];
        } catch (py::error_already_set& e) {
          error.emplace(std::move(e));
          return CancelledError("a Python exception in while_loop's cond");
        }
      },
      [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
        try {
          return BuiltBy(*this, body_fn, as_args(v), "while_loop's body");
        } catch (py::error_already_set& e) {
          error.emplace(std::move(e));
          return CancelledError("a Python exception in while_loop's body");
        }
      },
      vars, options);
  builder_.TakeError().IgnoreError();  // reported below, from the result
  if (error) throw std::move(*error);
  if (!outs.ok()) Raise(outs.status());
  return Wrapped(*this, *outs);
}

void PyGraph::Save(const std::string& path) const { Check(WriteGraphFile(path, Snapshot().ToGraphDef())); }

std::string PyTensor::name() const { return output.index() < 0 ? output.node_name() : output.name(); }

void BindGraph(py::module_& m) {
  py::class_<PyTensor>(m, "Tensor", "An output of a node of a weft.Graph (or, with index -1, the node itself).")
      .def_property_readonly("name", &PyTensor::name, "'node:k', or 'node' for output 0 and for a node")
      .def_property_readonly(
          "op", [](const PyTensor& t) { return t.output.node_name(); }, "the node's name")
      .def_property_readonly(
          "type", [](const PyTensor& t) { return t.graph->builder().node_def(t.output.node()).op; }, "the node's op")
      .def_property_readonly(
          "index", [](const PyTensor& t) { return t.output.index(); }, "which output of the node (-1: the node)")
      .def_property_readonly(
          "graph", [](const PyTensor& t) { return t.graph; }, "the weft.Graph it belongs to")
      .def_property_readonly(
          "dtype",
          [](const PyTensor& t) -> py::object {
            if (t.output.index() < 0) return py::none();
            return py::str(std::string(DTypeName(t.output.dtype())));
          },
          "its dtype (\"f32\"), known when it is made; None for a node")
      .def_property_readonly(
          "shape",
          [](const PyTensor& t) -> py::object {
            if (t.output.index() < 0) return py::none();
            return FromShape(t.output.shape());
          },
          "its shape as far as it is known when it is made: a tuple with None for an unknown dimension, or None "
          "for an unknown rank")
      .def("__repr__",
           [](const PyTensor& t) {
             if (t.output.index() < 0) {
               return StrCat("<weft.Tensor node '", t.output.node_name(), "' (",
                             t.graph->builder().node_def(t.output.node()).op, ")>");
             }
             return StrCat("<weft.Tensor '", t.output.name(), "' ", DTypeName(t.output.dtype()),
                           t.output.shape().ToString(), ">");
           })
      .def("__hash__", [](const PyTensor& t) { return std::hash<std::string>()(t.output.name()); })
      .def("_same", [](const PyTensor& a, const PyTensor& b) {
        return a.graph == b.graph && a.output.node() == b.output.node() && a.output.index() == b.output.index();
      });

  py::class_<PyGraph, std::shared_ptr<PyGraph>>(m, "Graph", py::dynamic_attr())
      .def(py::init<>())
      .def("_add_node", &PyGraph::AddNode, py::arg("op"), py::arg("inputs"), py::arg("attrs"), py::arg("name") = "")
      .def("_push_name_scope", &PyGraph::PushNameScope)
      .def("_push_device_scope", &PyGraph::PushDeviceScope)
      .def("_push_control_dependencies", &PyGraph::PushControlDependencies)
      .def("_pop_scope", &PyGraph::PopScope)
      .def("_gradients", &PyGraph::Gradients)
      .def("_cond", &PyGraph::Cond)
      .def("_while_loop", &PyGraph::WhileLoop)
      .def("_import",
           [](PyGraph& g, const std::string& path) {
             auto def = ReadGraphFile(path);
             if (!def.ok()) Raise(def.status());
             auto graph = Graph::FromGraphDef(std::move(*def));
             if (!graph.ok()) Raise(graph.status().WithContext(path));
             g.Import(*graph);
           })
      .def("_import_onnx",
           [](PyGraph& g, const std::string& path, bool freeze) {
             onnx_io::ImportOptions options;
             options.freeze = freeze;
             auto imported = onnx_io::ImportOnnxFile(path, options);
             if (!imported.ok()) Raise(imported.status());
             auto graph = Graph::FromGraphDef(std::move(imported->def));
             if (!graph.ok()) Raise(graph.status().WithContext(path));
             g.Import(*graph);
             py::dict io;
             io["inputs"] = imported->inputs;
             io["outputs"] = imported->outputs;
             return io;
           })
      .def("get_tensor", &PyGraph::Find, py::arg("name"),
           "The tensor 'node:k' or 'node' (output 0), or a node without outputs; NotFoundError with a guess "
           "otherwise.")
      .def("save", &PyGraph::Save, py::arg("path"), "Writes the graph to a .wg (binary) or .wgt (text) file.")
      .def_property_readonly(
          "num_nodes", [](const PyGraph& g) { return g.builder().num_nodes(); }, "How many nodes the graph has.")
      .def(
          "node_names",
          [](const PyGraph& g) {
            std::vector<std::string> names;
            for (const NodeDef& n : g.builder().def().nodes) names.push_back(n.name);
            return names;
          },
          "The names of the graph's nodes, in the order they were added.")
      .def(
          "as_text", [](const PyGraph& g) { return SerializeGraphDef(g.builder().def(), GraphFormat::kText); },
          "The graph in the .wgt text format.");
}

}  // namespace weft::python
