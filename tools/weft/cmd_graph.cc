// Commands that read graph files: inspect, dot, convert, ops.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "core/graph/graph.h"
#include "core/graph/serialize.h"
#include "core/runtime/device_set.h"
#include "core/runtime/op_kernel.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

Expected<Graph> LoadGraph(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(GraphDef def, ReadTrainableModel(path));
  auto graph = Graph::FromGraphDef(std::move(def));
  if (!graph.ok()) return graph.status().WithContext(path);
  return graph;
}

int Inspect(const std::string& path, bool json) {
  auto graph = LoadGraph(path);
  if (!graph.ok()) return ReportError(graph.status());
  std::map<std::string, int> op_counts;
  std::vector<const Graph::Node*> inputs;
  std::vector<std::string> outputs;
  int64_t variable_count = 0, variable_params = 0, variable_bytes = 0;
  int64_t const_count = 0, const_params = 0, const_bytes = 0;
  for (const Graph::Node& n : graph->nodes()) {
    op_counts[n.op_name()]++;
    if (n.op_name() == "Placeholder") inputs.push_back(&n);
    if (n.op_name() == "VarHandle") {
      ++variable_count;
      const Shape& s = n.def.attrs.at("shape").get<Shape>();
      const int64_t count = std::max<int64_t>(0, s.num_elements());
      variable_params += count;
      variable_bytes += count * static_cast<int64_t>(DTypeSize(n.def.attrs.at("dtype").get<DType>()));
    }
    if (n.op_name() == "Const") {
      const Tensor& t = n.def.attrs.at("value").get<Tensor>();
      ++const_count;
      const_params += t.num_elements();
      const_bytes += static_cast<int64_t>(t.byte_size());
    }
    // Outputs: data outputs nobody consumes.
    std::set<int> consumed;
    for (const auto& [consumer, index] : graph->consumers()[static_cast<std::size_t>(n.id)]) {
      if (index < 0) continue;
      const Graph::Node& c = graph->node(consumer);
      for (std::size_t k = 0; k < c.inputs.size(); ++k) {
        if (c.inputs[k].node == n.id) consumed.insert(c.inputs[k].index);
      }
    }
    for (int i = 0; i < n.num_outputs(); ++i) {
      if (consumed.count(i) == 0 && n.output_types[static_cast<std::size_t>(i)] != DType::kResource) {
        outputs.push_back(InputRefString(n.name(), i));
      }
    }
  }
  auto describe = [&](const std::string& name) {
    auto e = graph->ResolveTensor(name);
    const Graph::Node& n = graph->node(e->node);
    return StrCat(DTypeName(n.output_types[static_cast<std::size_t>(e->index)]),
                  n.output_shapes[static_cast<std::size_t>(e->index)].ToString());
  };
  if (json) {
    JsonWriter j(std::cout);
    j.BeginObject();
    j.Int("nodes", graph->num_nodes());
    j.Key("inputs");
    j.BeginArray();
    for (const Graph::Node* n : inputs) {
      j.BeginObject();
      j.String("name", n->name());
      j.String("type", describe(n->name()));
      j.EndObject();
    }
    j.EndArray();
    j.Key("outputs");
    j.BeginArray();
    for (const std::string& o : outputs) {
      j.BeginObject();
      j.String("name", o);
      j.String("type", describe(o));
      j.EndObject();
    }
    j.EndArray();
    j.Key("ops");
    j.BeginObject();
    for (const auto& [op, count] : op_counts) {
      j.Int(op, count);
    }
    j.EndObject();
    j.Key("variables");
    j.BeginObject();
    j.Int("count", variable_count);
    j.Int("parameters", variable_params);
    j.Int("bytes", variable_bytes);
    j.EndObject();
    j.Key("constants");
    j.BeginObject();
    j.Int("count", const_count);
    j.Int("elements", const_params);
    j.Int("bytes", const_bytes);
    j.EndObject();
    j.EndObject();
    return kExitOk;
  }
  std::cout << path << ": " << graph->num_nodes() << " nodes, graph format v" << graph->producer() << "\n\nInputs:\n";
  if (inputs.empty()) std::cout << "  (none)\n";
  for (const Graph::Node* n : inputs) std::cout << "  " << n->name() << "  " << describe(n->name()) << "\n";
  std::cout << "\nOutputs:\n";
  if (outputs.empty()) std::cout << "  (none)\n";
  for (const std::string& o : outputs) std::cout << "  " << o << "  " << describe(o) << "\n";
  std::cout << "\nOps:\n";
  Table ops({"  OP", "COUNT"});
  for (const auto& [op, count] : op_counts) ops.AddRow({"  " + op, StrCat(count)});
  ops.Print(std::cout);
  std::cout << "\nParameters:\n"
            << "  variables  " << variable_count << " holding " << variable_params << " parameters ("
            << HumanBytes(static_cast<uint64_t>(variable_bytes)) << ")\n"
            << "  constants  " << const_count << " holding " << const_params << " elements ("
            << HumanBytes(static_cast<uint64_t>(const_bytes)) << ")\n";
  return kExitOk;
}

std::string DotId(const std::string& name) { return Quote(name); }

// The loop frame of each node, "" for the top level: the frame its outputs
// live in. An Enter's outputs are in the frame it names (a child of its
// input's frame), an Exit's in the parent of its input's frame, and every
// other node's in the frame of its inputs (back edges from NextIteration
// aside, which stay in their frame). |parents| gets each frame's parent.
std::vector<std::string> AssignFrames(const Graph& graph, std::map<std::string, std::string>& parents) {
  std::vector<std::string> frames(static_cast<std::size_t>(graph.num_nodes()));
  for (int id : graph.topological_order()) {
    const Graph::Node& n = graph.node(id);
    std::string input_frame;
    bool found = false;
    for (const Endpoint& e : n.inputs) {
      if (graph.node(e.node).op_name() == "NextIteration") continue;
      input_frame = frames[static_cast<std::size_t>(e.node)];
      found = true;
      break;
    }
    if (!found && !n.control_inputs.empty()) input_frame = frames[static_cast<std::size_t>(n.control_inputs[0])];
    std::string& frame = frames[static_cast<std::size_t>(id)];
    if (n.op_name() == "Enter") {
      frame = n.def.attrs.at("frame_name").get<std::string>();
      parents.emplace(frame, input_frame);
    } else if (n.op_name() == "Exit") {
      auto it = parents.find(input_frame);
      frame = it == parents.end() ? std::string() : it->second;
    } else {
      frame = input_frame;
    }
  }
  return frames;
}

// Graphviz: nodes labelled with name and op, name scopes as nested
// clusters, loop frames as clusters (dashed, blue) holding the scopes of
// their nodes, edges with dtype and shape, control edges dashed.
int Dot(const std::string& path) {
  auto graph = LoadGraph(path);
  if (!graph.ok()) return ReportError(graph.status());
  struct Scope {
    std::map<std::string, Scope> children;
    std::vector<const Graph::Node*> nodes;
  };
  std::map<std::string, std::string> parents;
  const std::vector<std::string> frame_of = AssignFrames(*graph, parents);
  std::map<std::string, Scope> frame_scopes;  // frame -> its nodes by scope
  std::map<std::string, std::vector<std::string>> child_frames;
  for (const auto& [frame, parent] : parents) child_frames[parent].push_back(frame);
  frame_scopes[""];
  for (const Graph::Node& n : graph->nodes()) {
    Scope* s = &frame_scopes[frame_of[static_cast<std::size_t>(n.id)]];
    const std::vector<std::string> parts = StrSplit(n.name(), '/');
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) s = &s->children[parts[i]];
    s->nodes.push_back(&n);
  }
  std::cout << "digraph weft {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n";
  int cluster = 0;
  std::function<void(const Scope&, const std::string&, int)> emit = [&](const Scope& s, const std::string& prefix,
                                                                        int depth) {
    const std::string indent(static_cast<std::size_t>(2 * depth + 2), ' ');
    for (const Graph::Node* n : s.nodes) {
      const std::string shortname =
          n->name().substr(n->name().rfind('/') == std::string::npos ? 0 : n->name().rfind('/') + 1);
      std::cout << indent << DotId(n->name()) << " [label=" << Quote(StrCat(shortname, "\\n", n->op_name())) << "];\n";
    }
    for (const auto& [name, child] : s.children) {
      const std::string full = prefix.empty() ? name : prefix + "/" + name;
      std::cout << indent << "subgraph cluster_" << cluster++ << " {\n"
                << indent << "  label=" << Quote(full) << ";\n"
                << indent << "  style=rounded;\n";
      emit(child, full, depth + 1);
      std::cout << indent << "}\n";
    }
  };
  std::function<void(const std::string&, int)> emit_frame = [&](const std::string& frame, int depth) {
    emit(frame_scopes[frame], "", depth);
    const std::string indent(static_cast<std::size_t>(2 * depth + 2), ' ');
    for (const std::string& child : child_frames[frame]) {
      std::cout << indent << "subgraph cluster_" << cluster++ << " {\n"
                << indent << "  label=" << Quote(child) << ";\n"
                << indent << "  style=\"dashed,bold\";\n"
                << indent << "  color=blue;\n";
      emit_frame(child, depth + 1);
      std::cout << indent << "}\n";
    }
  };
  emit_frame("", 0);
  for (const Graph::Node& n : graph->nodes()) {
    for (const Endpoint& e : n.inputs) {
      const Graph::Node& src = graph->node(e.node);
      std::cout << "  " << DotId(src.name()) << " -> " << DotId(n.name()) << " [label="
                << Quote(StrCat(DTypeName(src.output_types[static_cast<std::size_t>(e.index)]),
                                src.output_shapes[static_cast<std::size_t>(e.index)].ToString()))
                << "];\n";
    }
    for (int c : n.control_inputs) {
      std::cout << "  " << DotId(graph->node(c).name()) << " -> " << DotId(n.name()) << " [style=dashed];\n";
    }
  }
  std::cout << "}\n";
  return kExitOk;
}

int Convert(const std::string& from, const std::string& to) {
  auto def = ReadGraphFile(from);
  if (!def.ok()) return ReportError(def.status());
  if (Status format = FormatForPath(to).status(); !format.ok()) return ReportError(format);
  if (Status written = WriteGraphFile(to, *def); !written.ok()) return ReportError(written);
  std::cout << "wrote " << to << " (" << def->nodes.size() << " nodes)\n";
  return kExitOk;
}

int Ops(Context& ctx, const std::vector<std::string>& names, bool json) {
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto devices = runtime::DeviceSet::Open(**host);
  // Which device types have a kernel for each op.
  std::map<std::string, std::vector<std::string>> kernels;
  std::vector<std::string> types;
  if (devices.ok()) {
    for (const auto& [type, table] : (*devices)->kernel_tables()) {
      types.push_back(type);
      for (const std::string& op : table->Ops()) kernels[op].push_back(type);
    }
  }
  std::sort(types.begin(), types.end());
  for (auto& [op, list] : kernels) std::sort(list.begin(), list.end());
  std::vector<const OpDef*> ops;
  for (const OpDef* op : OpRegistry::Global().All()) {
    // Internal ops ('_') are listed only when asked for by name.
    if (op->name[0] == '_' && names.empty()) continue;
    if (!names.empty() && std::find(names.begin(), names.end(), op->name) == names.end()) continue;
    ops.push_back(op);
  }
  for (const std::string& name : names) {
    if (OpRegistry::Global().Find(name) == nullptr) {
      return ReportError(NotFoundError("there is no op ", Quote(name), " (run `weft ops` for the list)"));
    }
  }
  auto devices_for = [&](const OpDef* op) -> std::vector<std::string> {
    if (runtime::IsRuntimeOp(op->name)) return types;  // the runtime's own kernels run everywhere
    auto it = kernels.find(op->name);
    return it == kernels.end() ? std::vector<std::string>{} : it->second;
  };
  if (json) {
    JsonWriter j(std::cout);
    j.BeginArray();
    for (const OpDef* op : ops) {
      j.BeginObject();
      j.String("name", op->name);
      j.String("signature", op->Signature());
      j.Bool("stateful", op->stateful);
      j.Key("devices");
      j.BeginArray();
      for (const std::string& d : devices_for(op)) j.String(d);
      j.EndArray();
      j.String("doc", op->doc);
      j.EndObject();
    }
    j.EndArray();
    return kExitOk;
  }
  if (!names.empty()) {
    for (const OpDef* op : ops) {
      std::cout << op->Signature() << "\n  devices: " << StrJoin(devices_for(op), ", ")
                << (runtime::IsRuntimeOp(op->name) ? " (the runtime's own kernel)" : "") << "\n  " << op->doc << "\n\n";
    }
    return kExitOk;
  }
  Table table({"OP", "DEVICES", "SIGNATURE"});
  std::map<std::string, int> per_type;
  for (const OpDef* op : ops) {
    const auto d = devices_for(op);
    for (const std::string& t : d) per_type[t]++;
    table.AddRow({op->name, d.empty() ? "-" : StrJoin(d, ","), op->Signature()});
  }
  table.Print(std::cout);
  std::cout << "\n" << ops.size() << " ops";
  for (const auto& [type, count] : per_type) std::cout << "; " << count << " with a " << type << " kernel";
  std::cout << "\nRun `weft ops NAME` for an op's documentation.\n";
  return kExitOk;
}

}  // namespace

void AddGraphCommands(CLI::App& app, Runner& run) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* inspect = app.add_subcommand("inspect", "Summarise a graph file: inputs, outputs, op counts, parameters");
  inspect->add_option("GRAPH", *path, "A .wg, .wgt or .onnx graph file")->required();
  inspect->add_flag("--json", *json, "Print as JSON");
  inspect->callback([&run, path, json] { run = [path, json](Context&) { return Inspect(*path, *json); }; });

  auto dot_path = std::make_shared<std::string>();
  CLI::App* dot =
      app.add_subcommand("dot", "Print a graph file as Graphviz (name scopes and loop frames become clusters)");
  dot->add_option("GRAPH", *dot_path, "A .wg, .wgt or .onnx graph file")->required();
  dot->footer("Example: weft dot model.wgt | dot -Tsvg > model.svg");
  dot->callback([&run, dot_path] { run = [dot_path](Context&) { return Dot(*dot_path); }; });

  auto from = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  CLI::App* convert = app.add_subcommand("convert", "Convert a graph file between binary .wg and text .wgt");
  convert->add_option("FROM", *from, "The graph file to read")->required();
  convert->add_option("TO", *to, "The graph file to write; its extension picks the format")->required();
  convert->callback([&run, from, to] { run = [from, to](Context&) { return Convert(*from, *to); }; });

  auto names = std::make_shared<std::vector<std::string>>();
  auto ops_json = std::make_shared<bool>(false);
  CLI::App* ops = app.add_subcommand("ops", "List every op, its signature and the devices with a kernel for it");
  ops->add_option("OP", *names, "Show these ops in detail, with their documentation");
  ops->add_flag("--json", *ops_json, "Print as JSON");
  ops->callback(
      [&run, names, ops_json] { run = [names, ops_json](Context& ctx) { return Ops(ctx, *names, *ops_json); }; });
}

}  // namespace weft::cli
