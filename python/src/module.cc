// The weft Python module's native half, _weft: the op registry, graphs,
// sessions, configs and errors. The package weft (python/weft) builds the
// Python API on it (docs/python.md).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/base/version.h"
#include "core/config/config.h"
#include "core/graph/op_def.h"
#include "python/src/convert.h"
#include "python/src/graph.h"
#include "python/src/session.h"

namespace weft::python {
namespace {

py::dict ArgInfo(const ArgDef& arg) {
  py::dict d;
  d["name"] = arg.name;
  d["fixed_type"] = arg.fixed_type == DType::kInvalid ? py::object(py::none())
                                                      : py::object(py::str(std::string(DTypeName(arg.fixed_type))));
  d["type_attr"] = arg.type_attr;
  d["is_list"] = arg.is_list();
  return d;
}

// Every op of the registry, for weft.ops to make a function of each.
py::list OpDefs() {
  py::list out;
  for (const OpDef* op : OpRegistry::Global().All()) {
    py::dict d;
    d["name"] = op->name;
    py::list inputs, outputs, attrs;
    for (const ArgDef& a : op->inputs) inputs.append(ArgInfo(a));
    for (const ArgDef& a : op->outputs) outputs.append(ArgInfo(a));
    for (const AttrDef& a : op->attrs) {
      py::dict attr;
      attr["name"] = a.name;
      attr["type"] = std::string(AttrTypeName(a.type));
      attr["has_default"] = a.default_value.has_value();
      attr["spec"] = a.ToString();
      attrs.append(attr);
    }
    d["inputs"] = inputs;
    d["outputs"] = outputs;
    d["attrs"] = attrs;
    d["stateful"] = op->stateful;
    d["doc"] = op->doc;
    d["signature"] = op->Signature();
    out.append(d);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_weft, m) {
  m.doc() = "Weft's native module; use the weft package (docs/python.md).";
  MainThread();  // the importing thread
  m.attr("__version__") = kVersion;
  m.def("_set_error_classes", &SetErrorClasses);
  m.def("_op_defs", &OpDefs);
  m.def("_dtype_names", [] {
    std::vector<std::string> names;
    for (DType d : AllDTypes()) names.emplace_back(DTypeName(d));
    return names;
  });
  m.def("_canonical_dtype", [](const py::handle& value) { return std::string(DTypeName(ToDType(value, "dtype"))); });
  py::class_<config::Config>(m, "_Config");
  m.def("_default_config", [] { return Check(config::DefaultConfig()); });
  m.def("_load_config", [](const std::string& path) { return Check(config::LoadConfigFile(path)); });
  m.def("_parse_config", [](const std::string& text, const std::string& source, const std::string& base_dir) {
    return Check(config::ParseConfig(text, source, base_dir));
  });

  BindGraph(m);
  BindSession(m);
  BindTrain(m);
}

}  // namespace weft::python
