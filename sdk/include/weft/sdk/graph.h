// Weft SDK for C++ optimizer plugins: building update ops through the
// host's graph services (weft_host_t.graph) with exceptions for errors.
//
//   weft_value_t Update(weft_graph_builder_t* graph, const weft_update_args_t* args, weft_value_t delta) {
//     weft::sdk::Graph g(graph);
//     const weft::sdk::Attr dtype = weft::sdk::Attr::Type("dtype", args->dtype);
//     weft_value_t m_read = g.Op("ReadVariable", "m_read", {args->slots[0]}, {dtype});
//     return g.Op("AssignSub", "update", {args->variable, g.Mul(m_read, delta)}, {dtype});
//   }
//
// Every call throws weft::sdk::Error when the host reports a problem (an
// unknown op, a wrong attr, mismatched shapes), with the host's message,
// which names the node.
#ifndef WEFT_SDK_GRAPH_H_
#define WEFT_SDK_GRAPH_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "weft/sdk/host.h"
#include "weft/sdk/status.h"
#include "weft/weft_optimizer.h"

namespace weft::sdk {

// One attr of a node under construction.
struct Attr {
  enum class Kind { kInt, kFloat, kBool, kType, kString };
  const char* name = nullptr;
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double f = 0;
  weft_dtype_t type = WEFT_DTYPE_INVALID;
  std::string s;

  static Attr Int(const char* name, int64_t v) {
    return Make(name, Kind::kInt, [&](Attr& a) { a.i = v; });
  }
  static Attr Float(const char* name, double v) {
    return Make(name, Kind::kFloat, [&](Attr& a) { a.f = v; });
  }
  static Attr Bool(const char* name, bool v) {
    return Make(name, Kind::kBool, [&](Attr& a) { a.i = v ? 1 : 0; });
  }
  static Attr Type(const char* name, weft_dtype_t v) {
    return Make(name, Kind::kType, [&](Attr& a) { a.type = v; });
  }
  static Attr String(const char* name, std::string v) {
    return Make(name, Kind::kString, [&](Attr& a) { a.s = std::move(v); });
  }

 private:
  template <class Fn>
  static Attr Make(const char* name, Kind kind, Fn&& set) {
    Attr a;
    a.name = name;
    a.kind = kind;
    set(a);
    return a;
  }
};

class Graph {
 public:
  explicit Graph(weft_graph_builder_t* graph) : graph_(graph) {
    if (host()->graph == nullptr) throw Error(WEFT_FAILED_PRECONDITION, "the host offers no graph services");
  }

  // Adds a node and returns its outputs. For a node without outputs the
  // result holds one value standing for the node itself (usable as a
  // control input and as build_update's result).
  std::vector<weft_value_t> Node(const char* op, const char* name, std::initializer_list<weft_value_t> inputs,
                                 std::initializer_list<Attr> attrs = {},
                                 std::initializer_list<weft_value_t> after = {}) {
    const weft_graph_api_t* api = host()->graph;
    weft_node_builder_t* node = api->node_begin(graph_, op, name);
    for (weft_value_t in : inputs) api->node_add_input(node, in);
    for (weft_value_t dep : after) api->node_add_control_input(node, dep);
    for (const Attr& a : attrs) {
      switch (a.kind) {
        case Attr::Kind::kInt: api->node_set_attr_int(node, a.name, a.i); break;
        case Attr::Kind::kFloat: api->node_set_attr_float(node, a.name, a.f); break;
        case Attr::Kind::kBool: api->node_set_attr_bool(node, a.name, a.i != 0); break;
        case Attr::Kind::kType: api->node_set_attr_dtype(node, a.name, a.type); break;
        case Attr::Kind::kString: api->node_set_attr_string(node, a.name, a.s.data(), a.s.size()); break;
      }
    }
    weft_value_t outputs[8] = {};
    size_t count = 0;
    ThrowIfError(api->node_finish(node, outputs, 8, &count));
    if (count == 0) return {outputs[0]};
    return std::vector<weft_value_t>(outputs, outputs + (count < 8 ? count : 8));
  }

  // Node() for a node with at most one output.
  weft_value_t Op(const char* op, const char* name, std::initializer_list<weft_value_t> inputs,
                  std::initializer_list<Attr> attrs = {}, std::initializer_list<weft_value_t> after = {}) {
    return Node(op, name, inputs, attrs, after)[0];
  }

  // A scalar constant of |dtype|.
  weft_value_t Scalar(weft_dtype_t dtype, double value) {
    weft_value_t out = nullptr;
    ThrowIfError(host()->graph->scalar(graph_, dtype, value, &out));
    return out;
  }

  // Whether the variable's device has a kernel for |op| with its type attr
  // |attr| bound to |dtype|.
  bool HasKernel(const char* op, const char* attr, weft_dtype_t dtype) {
    const char* attrs[] = {attr};
    const weft_dtype_t dtypes[] = {dtype};
    return host()->graph->has_kernel(graph_, op, attrs, dtypes, 1) != 0;
  }

  // Elementwise shorthands (inputs broadcast as in NumPy).
  weft_value_t Add(weft_value_t a, weft_value_t b, const char* name = "add") { return Op("Add", name, {a, b}); }
  weft_value_t Sub(weft_value_t a, weft_value_t b, const char* name = "sub") { return Op("Sub", name, {a, b}); }
  weft_value_t Mul(weft_value_t a, weft_value_t b, const char* name = "mul") { return Op("Mul", name, {a, b}); }
  weft_value_t Div(weft_value_t a, weft_value_t b, const char* name = "div") { return Op("Div", name, {a, b}); }
  weft_value_t Sqrt(weft_value_t a, const char* name = "sqrt") { return Op("Sqrt", name, {a}); }
  weft_value_t Square(weft_value_t a, const char* name = "square") { return Op("Square", name, {a}); }
  weft_value_t Read(weft_value_t variable, weft_dtype_t dtype, const char* name = "read") {
    return Op("ReadVariable", name, {variable}, {Attr::Type("dtype", dtype)});
  }
  // Stores |value| in |variable| and returns the node (a control value).
  weft_value_t Assign(weft_value_t variable, weft_value_t value, weft_dtype_t dtype, const char* name = "assign") {
    return Op("Assign", name, {variable, value}, {Attr::Type("dtype", dtype)});
  }

  weft_graph_builder_t* get() const { return graph_; }

 private:
  weft_graph_builder_t* graph_;
};

}  // namespace weft::sdk

#endif  // WEFT_SDK_GRAPH_H_
