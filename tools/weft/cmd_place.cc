// `weft place GRAPH [--explain] [--json]`: where each node of a graph runs
// on this machine's devices under the config's [placement], and the
// _Send/_Recv pairs partitioning adds where devices meet.
#include <iostream>
#include <map>
#include <memory>

#include "core/distributed/cluster_runtime.h"
#include "core/distributed/dist_session.h"
#include "core/graph/serialize.h"
#include "core/placement/partitioner.h"
#include "core/runtime/placement_support.h"
#include "core/train/trainer.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct PlaceArgs {
  std::string graph;
  bool explain = false;
  bool json = false;
  bool local = false;
  bool train = false;
};

// A placement, in one process or on a cluster, as this command prints it.
struct Placed {
  placement::Placement placement;
  std::vector<std::string> device_names;  // what placement indices refer to
  std::vector<placement::Transfer> transfers;
};

Expected<Placed> PlaceLocally(Context& ctx, const Graph& graph) {
  WEFT_ASSIGN_OR_RETURN(plugin::PluginHost * host, ctx.Plugins());
  WEFT_ASSIGN_OR_RETURN(auto devices, runtime::DeviceSet::Open(*host));
  WEFT_ASSIGN_OR_RETURN(runtime::PlacedGraph placed,
                        runtime::PlaceAndPartition(graph, *devices, runtime::PlacementOptionsFromConfig(ctx.config())));
  Placed out;
  out.placement = std::move(placed.placement);
  for (const runtime::RuntimeDevice* d : placed.devices) out.device_names.push_back(d->name());
  out.transfers = std::move(placed.transfers);
  return out;
}

// On the devices of every task of the config's [cluster], asked of the
// running tasks.
// |pins| come after the config's (the variable placement of --train).
Expected<Placed> PlaceOnCluster(Context& ctx, const dist::ClusterSpec& cluster, const Graph& graph,
                                const std::vector<placement::Pin>& pins) {
  WEFT_ASSIGN_OR_RETURN(plugin::PluginHost * host, ctx.Plugins());
  dist::DistSessionOptions options = dist::SessionOptionsFor(cluster, ctx.config());
  options.placement.pins.insert(options.placement.pins.end(), pins.begin(), pins.end());
  WEFT_ASSIGN_OR_RETURN(auto session, dist::DistSession::Create(Graph(graph), options, *host));
  WEFT_ASSIGN_OR_RETURN(dist::ClusterPlacement placed, session->Place(graph));
  Placed out;
  out.placement = std::move(placed.placement);
  std::vector<placement::PartitionDevice> parts;
  for (const dist::DeviceInfo& d : placed.devices) {
    out.device_names.push_back(d.name);
    parts.push_back({d.name, d.incarnation});
  }
  bool one = true;
  for (int d : out.placement.device) one = one && d == out.placement.device.front();
  if (!one) {
    WEFT_ASSIGN_OR_RETURN(placement::Partitions cut,
                          placement::Partition(graph, out.placement.device, parts, {options.transfer_f32_as}));
    out.transfers = std::move(cut.transfers);
  }
  return out;
}

int Run(Context& ctx, const PlaceArgs& args) {
  const dist::ClusterSpec* cluster = nullptr;
  if (!args.local) {
    auto spec = ctx.Cluster();
    if (!spec.ok()) return ReportError(spec.status());
    if ((*spec)->distributed()) cluster = *spec;
  }
  Expected<Graph> graph = Graph();
  std::vector<placement::Pin> pins;
  if (args.train) {
    auto host = ctx.Plugins();
    if (!host.ok()) return ReportError(host.status());
    train::TrainerOptions options;
    options.model_path = args.graph;
    options.read_model = ReadTrainableModel;
    options.cluster = cluster;
    auto plan = train::PlanTrainingPlacement(ctx.config(), **host, options);
    if (!plan.ok()) return ReportError(plan.status());
    graph = std::move(plan->graph);
    pins = std::move(plan->pins);
  } else {
    auto def = onnx_io::ReadModelFile(args.graph, FrozenImport());
    if (!def.ok()) return ReportError(def.status());
    graph = Graph::FromGraphDef(std::move(*def));
    if (!graph.ok()) return ReportError(graph.status().WithContext(args.graph));
  }
  auto placed = cluster != nullptr ? PlaceOnCluster(ctx, *cluster, *graph, pins) : PlaceLocally(ctx, *graph);
  if (!placed.ok()) return ReportError(placed.status().WithContext(StrCat("placing ", args.graph)));
  const auto& p = placed->placement;
  auto device_of = [&](int id) {
    return placed->device_names[static_cast<std::size_t>(p.device[static_cast<std::size_t>(id)])];
  };
  auto device_name = [&](int d) { return placed->device_names[static_cast<std::size_t>(d)]; };

  if (args.json) {
    JsonWriter j(std::cout);
    j.BeginObject();
    j.Key("nodes");
    j.BeginArray();
    for (const Graph::Node& node : graph->nodes()) {
      j.BeginObject();
      j.String("name", node.name());
      j.String("op", node.op_name());
      j.String("device", device_of(node.id));
      j.String("reason", p.reason[static_cast<std::size_t>(node.id)]);
      j.EndObject();
    }
    j.EndArray();
    j.Key("transfers");
    j.BeginArray();
    for (const auto& t : placed->transfers) {
      j.BeginObject();
      j.String("tensor", t.tensor);
      j.String("from", device_name(t.src_device));
      j.String("to", device_name(t.dst_device));
      j.String("send", t.send_node);
      j.String("recv", t.recv_node);
      j.String("type", StrCat(DTypeName(t.dtype), t.shape.ToString()));
      if (t.wire_dtype != DType::kInvalid) j.String("travels_as", DTypeName(t.wire_dtype));
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
    std::cout << '\n';
    return kExitOk;
  }

  std::map<std::string, int> per_device;
  for (const Graph::Node& node : graph->nodes()) ++per_device[device_of(node.id)];
  std::cout << args.graph << ": " << graph->num_nodes() << " nodes on " << per_device.size() << " device"
            << (per_device.size() == 1 ? "" : "s") << "\n";
  for (const auto& [device, count] : per_device) std::cout << "  " << device << ": " << count << " nodes\n";
  if (args.explain) {
    std::cout << "\nNodes:\n";
    Table table({"  node", "op", "device", "why"});
    for (const Graph::Node& node : graph->nodes()) {
      table.AddRow(
          {"  " + node.name(), node.op_name(), device_of(node.id), p.reason[static_cast<std::size_t>(node.id)]});
    }
    table.Print(std::cout);
  }
  if (placed->transfers.empty()) {
    std::cout << "\nNo transfers: the graph runs on one device.\n";
  } else {
    std::cout << "\nSend/Recv pairs (" << placed->transfers.size() << "):\n";
    Table table({"  tensor", "type", "from", "to", "send", "recv", "read by"});
    for (const auto& t : placed->transfers) {
      const std::string as = t.wire_dtype != DType::kInvalid ? StrCat(" as ", DTypeName(t.wire_dtype)) : "";
      table.AddRow(
          {"  " + t.tensor, t.tensor[0] == '^' ? "control" : StrCat(DTypeName(t.dtype), t.shape.ToString(), as),
           device_name(t.src_device), device_name(t.dst_device), t.send_node, t.recv_node, StrJoin(t.consumers, ", ")});
    }
    table.Print(std::cout);
  }
  if (!p.fallbacks.empty() && !args.explain) {
    std::cout << "\nSoft placement moved " << p.fallbacks.size() << " node group"
              << (p.fallbacks.size() == 1 ? "" : "s") << " off their requested device; --explain says why.\n";
  }
  return kExitOk;
}

}  // namespace

void AddPlaceCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PlaceArgs>();
  CLI::App* cmd = app.add_subcommand("place",
                                     "Show where each node of a graph runs on this machine's "
                                     "devices, and the Send/Recv pairs between them");
  cmd->add_option("GRAPH", args->graph, "A .wg, .wgt or .onnx graph file")->required();
  cmd->add_flag("--explain", args->explain, "List every node with its device and the reason it went there");
  cmd->add_flag("--json", args->json, "Print nodes and transfers as JSON");
  cmd->add_flag("--local", args->local, "Place on this machine's devices even when the config has a [cluster]");
  cmd->add_flag("--train", args->train,
                "Place the training graph `weft train` builds from GRAPH and "
                "the config's training sections "
                "(on a cluster: the variables on the ps tasks by [cluster] "
                "variable_placement)");
  cmd->footer(
      "Placement follows the config's [placement] section: soft, "
      "priority and [placement.pins]. With a "
      "[cluster], the graph is placed on the devices of every task "
      "(started with `weft serve`).");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Run(ctx, *args); }; });
}

}  // namespace weft::cli
