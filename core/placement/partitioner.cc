#include "core/placement/partitioner.h"

#include <set>
#include <unordered_set>

namespace weft::placement {
namespace {

// Node names in a partition must be unique across the whole graph, since
// rendezvous keys and messages name them.
class Namer {
 public:
  explicit Namer(const Graph& graph) {
    for (const Graph::Node& n : graph.nodes()) used_.insert(n.name());
  }
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int i = 1; !used_.insert(name).second; ++i) name = StrCat(base, "_", i);
    return name;
  }

 private:
  std::unordered_set<std::string> used_;
};

// "/device:OPENCL:0" -> "OPENCL_0", for readable node names.
std::string Short(const std::string& device) {
  std::string s = device;
  const auto slash = s.rfind("device:");
  if (slash != std::string::npos) s = s.substr(slash + 7);
  for (char& c : s) {
    if (c == ':' || c == '/') c = '_';
  }
  return s;
}

NodeDef SendNode(const std::string& name, const std::string& input, DType dtype, const std::string& tensor,
                 const PartitionDevice& src, const PartitionDevice& dst) {
  NodeDef send;
  send.name = name;
  send.op = "_Send";
  send.inputs = {input};
  send.device = src.name;
  send.attrs = {{"T", AttrValue(dtype)},
                {"tensor_name", AttrValue(tensor)},
                {"send_device", AttrValue(src.name)},
                {"send_device_incarnation", AttrValue(static_cast<int64_t>(src.incarnation))},
                {"recv_device", AttrValue(dst.name)}};
  return send;
}

NodeDef RecvNode(const std::string& name, DType dtype, const Shape& shape, const std::string& tensor,
                 const PartitionDevice& src, const PartitionDevice& dst) {
  NodeDef recv;
  recv.name = name;
  recv.op = "_Recv";
  recv.device = dst.name;
  recv.attrs = {{"tensor_type", AttrValue(dtype)},
                {"shape", AttrValue(shape)},
                {"tensor_name", AttrValue(tensor)},
                {"send_device", AttrValue(src.name)},
                {"send_device_incarnation", AttrValue(static_cast<int64_t>(src.incarnation))},
                {"recv_device", AttrValue(dst.name)}};
  return recv;
}

}  // namespace

Expected<Partitions> Partition(const Graph& graph, const std::vector<int>& device_of,
                               const std::vector<PartitionDevice>& devices) {
  if (device_of.size() != static_cast<std::size_t>(graph.num_nodes())) {
    return InternalError("partition: ", device_of.size(), " placements for ", graph.num_nodes(), " nodes");
  }
  Partitions out;
  Namer namer(graph);
  // (source node, output index or -1 for control, receiving device) -> recv node name
  std::map<std::tuple<int, int, int>, std::size_t> cut;

  auto transfer_for = [&](int src, int index, int dst_device) -> Transfer& {
    auto key = std::make_tuple(src, index, dst_device);
    auto it = cut.find(key);
    if (it != cut.end()) return out.transfers[it->second];
    const Graph::Node& node = graph.node(src);
    const int src_device = device_of[static_cast<std::size_t>(src)];
    const PartitionDevice& from = devices[static_cast<std::size_t>(src_device)];
    const PartitionDevice& to = devices[static_cast<std::size_t>(dst_device)];
    Transfer t;
    t.src_device = src_device;
    t.dst_device = dst_device;
    GraphDef& src_graph = out.graphs[src_device];
    GraphDef& dst_graph = out.graphs[dst_device];
    if (index >= 0) {
      t.tensor = InputRefString(node.name(), index);
      t.dtype = node.output_types[static_cast<std::size_t>(index)];
      t.shape = node.output_shapes[static_cast<std::size_t>(index)];
      t.send_node = namer.Unique(StrCat(node.name(), "/_send_", index, "_to_", Short(to.name)));
      t.recv_node = namer.Unique(StrCat(node.name(), "/_recv_", index, "_from_", Short(from.name)));
      src_graph.nodes.push_back(SendNode(t.send_node, t.tensor, t.dtype, t.tensor, from, to));
    } else {
      // A control edge: send a one-element tensor made after the source ran.
      t.tensor = StrCat("^", node.name());
      t.dtype = DType::kBool;
      t.shape = Shape{};
      NodeDef token;
      token.name = namer.Unique(StrCat(node.name(), "/_control_token"));
      token.op = "Const";
      token.device = from.name;
      token.inputs = {InputRefString(node.name(), -1)};
      token.attrs = {{"dtype", AttrValue(DType::kBool)}, {"value", AttrValue(Tensor::Scalar<bool>(true))}};
      t.send_node = namer.Unique(StrCat(node.name(), "/_send_control_to_", Short(to.name)));
      t.recv_node = namer.Unique(StrCat(node.name(), "/_recv_control_from_", Short(from.name)));
      src_graph.nodes.push_back(SendNode(t.send_node, token.name, DType::kBool, t.tensor, from, to));
      src_graph.nodes.push_back(std::move(token));
    }
    dst_graph.nodes.push_back(RecvNode(t.recv_node, t.dtype, t.shape, t.tensor, from, to));
    out.transfers.push_back(std::move(t));
    cut.emplace(key, out.transfers.size() - 1);
    return out.transfers.back();
  };

  for (const Graph::Node& node : graph.nodes()) {
    const int here = device_of[static_cast<std::size_t>(node.id)];
    if (here < 0 || static_cast<std::size_t>(here) >= devices.size()) {
      return InternalError("partition: ", node.Describe(), " has no device");
    }
    NodeDef def = node.def;
    def.device = devices[static_cast<std::size_t>(here)].name;
    def.inputs.clear();
    for (const Endpoint& e : node.inputs) {
      const int there = device_of[static_cast<std::size_t>(e.node)];
      if (there == here) {
        def.inputs.push_back(InputRefString(graph.node(e.node).name(), e.index));
      } else {
        Transfer& t = transfer_for(e.node, e.index, here);
        t.consumers.push_back(node.name());
        def.inputs.push_back(t.recv_node);
      }
    }
    for (int c : node.control_inputs) {
      const int there = device_of[static_cast<std::size_t>(c)];
      if (there == here) {
        def.inputs.push_back(InputRefString(graph.node(c).name(), -1));
      } else {
        Transfer& t = transfer_for(c, -1, here);
        t.consumers.push_back(node.name());
        def.inputs.push_back(InputRefString(t.recv_node, -1));
      }
    }
    out.graphs[here].nodes.push_back(std::move(def));
  }
  for (auto& [device, def] : out.graphs) def.library = graph.library();
  return out;
}

}  // namespace weft::placement
