#include "core/placement/partitioner.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <set>
#include <unordered_set>
#include <utility>

#include "core/ops/control_flow_ops.h"
#include "core/placement/placer.h"

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
                 const PartitionDevice& src, const PartitionDevice& dst, bool may_be_dead) {
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
  if (may_be_dead) recv.attrs.emplace("may_be_dead", AttrValue(true));
  return recv;
}

NodeDef CastNode(const std::string& name, const std::string& input, DType from, DType to, const std::string& device) {
  NodeDef cast;
  cast.name = name;
  cast.op = "Cast";
  cast.inputs = {input};
  cast.device = device;
  cast.attrs = {{"SrcT", AttrValue(from)}, {"DstT", AttrValue(to)}};
  return cast;
}

// A loop of the graph, as the executor finds it (frame 0 is the root).
struct FrameInfo {
  std::string name;
  int parent = -1;
  int64_t parallel_iterations = 10;
  int loop_cond = -1;  // its LoopCond node, -1 when none
  int second_loop_cond = -1;
};

// Which frame every node runs in, and the frame its consumers run in (the
// child frame for an Enter, the parent for an Exit), by the executor's
// rules (core/runtime/frame_propagator.cc, BuildFrames). The executor checks the
// graph; here, a node whose inputs disagree takes its first input's frame.
struct ControlFlowInfo {
  std::vector<FrameInfo> frames;
  std::vector<int> frame_of;
  std::vector<int> output_frame;
};

ControlFlowInfo BuildControlFlowInfo(const Graph& graph) {
  ControlFlowInfo info;
  info.frames.push_back(FrameInfo{});
  const auto n = static_cast<std::size_t>(graph.num_nodes());
  info.frame_of.assign(n, 0);
  info.output_frame.assign(n, 0);
  std::map<std::pair<int, std::string>, int> frame_ids;
  for (int id : graph.topological_order()) {
    const Graph::Node& node = graph.node(id);
    int frame = -1;
    auto consider = [&](int src) {
      if (frame < 0 && graph.node(src).op_name() != "NextIteration") {
        frame = info.output_frame[static_cast<std::size_t>(src)];
      }
    };
    for (const Endpoint& e : node.inputs) consider(e.node);
    for (int c : node.control_inputs) consider(c);
    if (frame < 0) frame = 0;
    const auto i = static_cast<std::size_t>(id);
    info.frame_of[i] = frame;
    info.output_frame[i] = frame;
    const std::string& op = node.op_name();
    if (op == "Enter") {
      auto name = node.def.attrs.find("frame_name");
      auto parallel = node.def.attrs.find("parallel_iterations");
      const std::string frame_name = name != node.def.attrs.end() ? name->second.get<std::string>() : "";
      auto [it, added] = frame_ids.emplace(std::make_pair(frame, frame_name), static_cast<int>(info.frames.size()));
      if (added) {
        FrameInfo f;
        f.name = frame_name;
        f.parent = frame;
        if (parallel != node.def.attrs.end()) f.parallel_iterations = parallel->second.get<int64_t>();
        info.frames.push_back(std::move(f));
      } else if (parallel != node.def.attrs.end()) {
        FrameInfo& f = info.frames[static_cast<std::size_t>(it->second)];
        f.parallel_iterations = std::min(f.parallel_iterations, parallel->second.get<int64_t>());
      }
      info.output_frame[i] = it->second;
    } else if (op == "Exit" && frame > 0) {
      info.output_frame[i] = info.frames[static_cast<std::size_t>(frame)].parent;
    } else if (op == "LoopCond" && frame > 0) {
      FrameInfo& f = info.frames[static_cast<std::size_t>(frame)];
      (f.loop_cond < 0 ? f.loop_cond : f.second_loop_cond) = id;
    }
  }
  return info;
}

bool HasControlFlow(const Graph& graph) {
  for (const Graph::Node& node : graph.nodes()) {
    if (ops::IsControlFlowOp(node.op_name())) return true;
  }
  return false;
}

// The parsed ends of a cut from |from| to |to| when they are devices of two
// different tasks, so that what crosses it goes over the network; nullopt
// within one task or when either name does not parse.
std::optional<std::pair<DeviceSpec, DeviceSpec>> BetweenTasks(const PartitionDevice& from, const PartitionDevice& to) {
  auto src = ParseDeviceSpec(from.name);
  auto dst = ParseDeviceSpec(to.name);
  if (!src.ok() || !dst.ok() || (src->job == dst->job && src->task == dst->task)) return std::nullopt;
  return std::pair{*std::move(src), *std::move(dst)};
}

// Cuts a placed graph; see Partition.
class Cutter {
 public:
  Cutter(const Graph& graph, const std::vector<int>& device_of, const std::vector<PartitionDevice>& devices,
         const PartitionOptions& options)
      : graph_(graph),
        device_of_(device_of),
        devices_(devices),
        options_(options),
        namer_(graph),
        control_flow_(HasControlFlow(graph)) {
    if (options_.transfer_f32_as != DType::kF32) {
      // Values stored into a variable as they are (an initializer, a
      // restored checkpoint, the chief's state) must arrive exact.
      for (const Graph::Node& node : graph_.nodes()) {
        const std::string& op = node.op_name();
        if (op != "Assign" && op != "AssignAdd" && op != "AssignSub") continue;
        for (const Endpoint& e : node.inputs) stored_.insert({e.node, e.index});
      }
    }
    if (control_flow_) cf_ = BuildControlFlowInfo(graph);
  }

  Expected<Partitions> Run() {
    for (const Graph::Node& node : graph_.nodes()) {
      const int here = device_of_[static_cast<std::size_t>(node.id)];
      if (here < 0 || static_cast<std::size_t>(here) >= devices_.size()) {
        return InternalError("partition: ", node.Describe(), " has no device");
      }
      NodeDef def = node.def;
      def.device = devices_[static_cast<std::size_t>(here)].name;
      def.inputs.clear();
      for (const Endpoint& e : node.inputs) {
        const int there = device_of_[static_cast<std::size_t>(e.node)];
        if (there == here) {
          def.inputs.push_back(InputRefString(graph_.node(e.node).name(), e.index));
        } else {
          Transfer& t = TransferFor(e.node, e.index, here);
          t.consumers.push_back(node.name());
          def.inputs.push_back(t.recv_node);
        }
      }
      for (int c : node.control_inputs) {
        const int there = device_of_[static_cast<std::size_t>(c)];
        if (there == here) {
          def.inputs.push_back(InputRefString(graph_.node(c).name(), -1));
        } else {
          Transfer& t = TransferFor(c, -1, here);
          t.consumers.push_back(node.name());
          def.inputs.push_back(InputRefString(t.recv_node, -1));
        }
      }
      out_.graphs[here].nodes.push_back(std::move(def));
    }
    AddLateReads();
    if (control_flow_ && out_.graphs.size() > 1) WEFT_RETURN_IF_ERROR(AddControlLoops());
    for (auto& [device, def] : out_.graphs) def.library = graph_.library();
    return std::move(out_);
  }

 private:
  // Where a transfer's _Recv sits, and what it carries.
  struct RecvSite {
    int frame = 0;          // the frame its consumers run in
    int src = 0;            // the node whose output (or control edge) it carries
    std::size_t index = 0;  // in its partition's nodes
  };
  // A variable read whose _Recv may wait (PartitionOptions::late_variable_reads).
  struct LateRead {
    std::size_t transfer = 0;
    int src = 0;            // the ReadVariable
    std::size_t index = 0;  // its _Recv in the receiving partition's nodes
  };
  // The control loop of one frame on one device.
  struct ControlLoop {
    std::string enter, merge, pivot, next_iteration;
  };

  Transfer& TransferFor(int src, int index, int dst_device) {
    auto key = std::make_tuple(src, index, dst_device);
    auto it = cut_.find(key);
    if (it != cut_.end()) return out_.transfers[it->second];
    const Graph::Node& node = graph_.node(src);
    const int src_device = device_of_[static_cast<std::size_t>(src)];
    const PartitionDevice& from = devices_[static_cast<std::size_t>(src_device)];
    const PartitionDevice& to = devices_[static_cast<std::size_t>(dst_device)];
    Transfer t;
    t.src_device = src_device;
    t.dst_device = dst_device;
    GraphDef& src_graph = out_.graphs[src_device];
    GraphDef& dst_graph = out_.graphs[dst_device];
    if (index >= 0) {
      t.tensor = InputRefString(node.name(), index);
      t.dtype = node.output_types[static_cast<std::size_t>(index)];
      t.shape = node.output_shapes[static_cast<std::size_t>(index)];
      t.send_node = namer_.Unique(StrCat(node.name(), "/_send_", index, "_to_", Short(to.name)));
      t.recv_node = namer_.Unique(StrCat(node.name(), "/_recv_", index, "_from_", Short(from.name)));
      std::string sent = t.tensor;
      if (Narrowed(src, index, t, from, to)) {
        // Narrowed here, widened on arrival ([cluster] transfer_dtype).
        t.wire_dtype = DType::kBF16;
        sent = namer_.Unique(StrCat(node.name(), "/_to_bf16_", index, "_for_", Short(to.name)));
        src_graph.nodes.push_back(CastNode(sent, t.tensor, DType::kF32, DType::kBF16, from.name));
      }
      src_graph.nodes.push_back(
          SendNode(t.send_node, sent, t.wire_dtype == DType::kInvalid ? t.dtype : t.wire_dtype, t.tensor, from, to));
    } else {
      // A control edge: send a one-element tensor made after the source ran.
      t.tensor = StrCat("^", node.name());
      t.dtype = DType::kBool;
      t.shape = Shape{};
      NodeDef token;
      token.name = namer_.Unique(StrCat(node.name(), "/_control_token"));
      token.op = "Const";
      token.device = from.name;
      token.inputs = {InputRefString(node.name(), -1)};
      token.attrs = {{"dtype", AttrValue(DType::kBool)}, {"value", AttrValue(Tensor::Scalar<bool>(true))}};
      t.send_node = namer_.Unique(StrCat(node.name(), "/_send_control_to_", Short(to.name)));
      t.recv_node = namer_.Unique(StrCat(node.name(), "/_recv_control_from_", Short(from.name)));
      src_graph.nodes.push_back(SendNode(t.send_node, token.name, DType::kBool, t.tensor, from, to));
      src_graph.nodes.push_back(std::move(token));
    }
    if (ReadsLate(src, index, from, to))
      late_reads_.push_back(LateRead{out_.transfers.size(), src, dst_graph.nodes.size()});
    if (control_flow_) {
      recv_sites_.push_back(RecvSite{cf_.output_frame[static_cast<std::size_t>(src)], src, dst_graph.nodes.size()});
    }
    if (t.wire_dtype == DType::kInvalid) {
      dst_graph.nodes.push_back(RecvNode(t.recv_node, t.dtype, t.shape, t.tensor, from, to, control_flow_));
    } else {
      // The consumers read the widening Cast, under the _Recv's name.
      const std::string wire = namer_.Unique(StrCat(t.recv_node, "/bf16"));
      dst_graph.nodes.push_back(RecvNode(wire, t.wire_dtype, t.shape, t.tensor, from, to, control_flow_));
      dst_graph.nodes.push_back(CastNode(t.recv_node, wire, t.wire_dtype, t.dtype, to.name));
    }
    out_.transfers.push_back(std::move(t));
    cut_.emplace(key, out_.transfers.size() - 1);
    return out_.transfers.back();
  }

  // Whether the transfer of output |index| of node |src| travels as bf16
  // (PartitionOptions::transfer_f32_as): an f32 between the CPUs of two
  // tasks, not stored verbatim into a variable, and not a small tensor of
  // known shape (a learning rate: its bytes do not matter, its digits do).
  bool Narrowed(int src, int index, const Transfer& t, const PartitionDevice& from, const PartitionDevice& to) const {
    if (options_.transfer_f32_as != DType::kBF16 || t.dtype != DType::kF32) return false;
    auto ends = BetweenTasks(from, to);
    if (!ends || ends->first.type != "CPU" || ends->second.type != "CPU") return false;
    if (stored_.count({src, index}) != 0) return false;
    if (t.shape.unknown_rank()) return true;
    int64_t elements = 1;
    for (int64_t d : t.shape.dims()) {
      if (d < 0) return true;  // a batch dimension: as large as the batch
      elements *= d;
    }
    return elements >= kMinNarrowedElements;
  }

  // Whether output |index| of |src|, cut from |from| to |to|, is a variable
  // read that may be pulled late: a ReadVariable outside any loop frame, cut
  // between two tasks.
  bool ReadsLate(int src, int index, const PartitionDevice& from, const PartitionDevice& to) const {
    if (!options_.late_variable_reads || index < 0 || graph_.node(src).op_name() != "ReadVariable") return false;
    if (control_flow_ && cf_.output_frame[static_cast<std::size_t>(src)] != 0) return false;
    return BetweenTasks(from, to).has_value();
  }

  // Holds each late read's _Recv back until a node of its partition that
  // starts late_read_slack ops before the read's first consumer there
  // (PartitionOptions::late_variable_reads).
  void AddLateReads() {
    if (late_reads_.empty()) return;
    const auto n = static_cast<std::size_t>(graph_.num_nodes());
    // Each node's start, in ops on the longest path from a source (a
    // NextIteration's back edge aside), and whether a Switch upstream may
    // leave it dead.
    std::vector<int> level(n, -1);
    std::vector<char> may_be_dead(n, 0);
    for (int id : graph_.topological_order()) {
      const Graph::Node& node = graph_.node(id);
      const auto i = static_cast<std::size_t>(id);
      int l = 0;
      bool dead = node.op_name() == "Switch";
      auto after = [&](int in) {
        const auto j = static_cast<std::size_t>(in);
        if (level[j] < 0) return;
        l = std::max(l, level[j] + 1);
        dead = dead || may_be_dead[j] != 0;
      };
      for (const Endpoint& e : node.inputs) after(e.node);
      for (int c : node.control_inputs) after(c);
      level[i] = l;
      may_be_dead[i] = dead ? 1 : 0;
    }
    for (const LateRead& read : late_reads_) {
      const Transfer& t = out_.transfers[read.transfer];
      int first_use = INT_MAX;
      for (const auto& [consumer, input] : graph_.consumers()[static_cast<std::size_t>(read.src)]) {
        if (input < 0 || device_of_[static_cast<std::size_t>(consumer)] != t.dst_device) continue;
        first_use = std::min(first_use, level[static_cast<std::size_t>(consumer)]);
      }
      if (first_use == INT_MAX) continue;
      const int latest = first_use - options_.late_read_slack;
      if (latest < 1) continue;  // needed as the step starts anyway
      int trigger = -1;
      for (const Graph::Node& node : graph_.nodes()) {
        const auto i = static_cast<std::size_t>(node.id);
        if (device_of_[i] != t.dst_device || may_be_dead[i] != 0 || level[i] < 1 || level[i] > latest) continue;
        if (control_flow_ && (cf_.frame_of[i] != 0 || cf_.output_frame[i] != 0)) continue;
        if (trigger < 0 || level[i] > level[static_cast<std::size_t>(trigger)]) trigger = node.id;
      }
      if (trigger < 0) continue;
      out_.graphs[t.dst_device].nodes[read.index].inputs.push_back(InputRefString(graph_.node(trigger).name(), -1));
    }
  }

  // Keeps the frames of the partitions in step (docs/distributed-internals.md, "How a
  // graph is split across tasks"). Each partition runs its own executor, and an
  // executor starts a loop iteration only when a NextIteration of its own
  // partition fires. So every partition holding part of a loop frame gets a
  // control loop of that frame:
  //   Enter(a root Const, or the parent frame's control pivot)
  //     -> Merge(Enter, NextIteration) -> Switch(Merge, pred)
  //     -> pivot = Identity(Switch:1) -> NextIteration; Exit(Switch:0)
  // where pred is the frame's LoopCond, received from its partition once
  // per iteration (a _Recv inside the frame). It iterates exactly as the
  // loop does, so every _Recv in the frame gets a control input from it and
  // runs once per iteration, under the same frame and iteration as its
  // _Send: from the Merge (every iteration, the last check included), or,
  // when the value comes from an Enter that is not a loop invariant (only
  // iteration 0), from the control Enter, or, from a NextIteration (every
  // iteration but the first), from the control NextIteration.
  Status AddControlLoops() {
    const std::size_t num_frames = cf_.frames.size();
    std::vector<std::set<int>> users(num_frames);
    for (std::size_t id = 0; id < cf_.frame_of.size(); ++id)
      users[static_cast<std::size_t>(cf_.frame_of[id])].insert(device_of_[id]);
    for (std::size_t k = 0; k < out_.transfers.size(); ++k) {
      const auto f = static_cast<std::size_t>(recv_sites_[k].frame);
      users[f].insert(out_.transfers[k].src_device);
      users[f].insert(out_.transfers[k].dst_device);
    }
    // A control loop hangs from its parent's control loop: a partition in
    // a frame is in all the frames around it.
    for (std::size_t f = num_frames; f-- > 1;) {
      const auto parent = static_cast<std::size_t>(cf_.frames[f].parent);
      if (parent > 0) users[parent].insert(users[f].begin(), users[f].end());
    }
    // Parents come before their children (frames are found in topological order).
    std::map<std::pair<int, int>, ControlLoop> loops;  // (frame, device)
    for (std::size_t f = 1; f < num_frames; ++f) {
      if (users[f].size() < 2) continue;
      const FrameInfo& frame = cf_.frames[f];
      if (frame.loop_cond < 0) {
        return InvalidArgumentError("loop frame ", Quote(frame.name), " is split across devices (",
                                    DeviceList(users[f]),
                                    ") but has no LoopCond to keep its parts in step; build "
                                    "loops with WhileLoop, or pin the whole loop to one device");
      }
      if (frame.second_loop_cond >= 0) {
        return InvalidArgumentError(
            "loop frame ", Quote(frame.name), " is split across devices (", DeviceList(users[f]),
            ") and has two LoopCond nodes, ", Quote(graph_.node(frame.loop_cond).name()), " and ",
            Quote(graph_.node(frame.second_loop_cond).name()), "; give each loop a frame name of its own");
      }
      const int cond_device = device_of_[static_cast<std::size_t>(frame.loop_cond)];
      for (int d : users[f]) {
        const PartitionDevice& device = devices_[static_cast<std::size_t>(d)];
        const std::string base = StrCat(frame.name, "/_control_loop_", Short(device.name));
        std::vector<NodeDef> nodes;
        std::string source;
        if (frame.parent == 0) {
          NodeDef start;
          start.name = namer_.Unique(base + "/start");
          start.op = "Const";
          start.device = device.name;
          start.attrs = {{"dtype", AttrValue(DType::kBool)}, {"value", AttrValue(Tensor::Scalar<bool>(true))}};
          source = start.name;
          nodes.push_back(std::move(start));
        } else {
          source = loops.at({frame.parent, d}).pivot;
        }
        ControlLoop loop;
        loop.enter = namer_.Unique(base + "/enter");
        loop.merge = namer_.Unique(base + "/merge");
        const std::string switch_name = namer_.Unique(base + "/switch");
        std::string pred;
        if (d == cond_device) {
          pred = InputRefString(graph_.node(frame.loop_cond).name(), 0);
        } else {
          Transfer& t = TransferFor(frame.loop_cond, 0, d);
          t.consumers.push_back(switch_name);
          pred = t.recv_node;
        }
        loop.pivot = namer_.Unique(base + "/pivot");
        loop.next_iteration = namer_.Unique(base + "/next_iteration");
        const std::string exit = namer_.Unique(base + "/exit");
        auto add = [&](const std::string& name, const std::string& op, std::vector<std::string> inputs, AttrMap attrs) {
          NodeDef def;
          def.name = name;
          def.op = op;
          def.device = device.name;
          def.inputs = std::move(inputs);
          attrs.emplace("T", AttrValue(DType::kBool));
          def.attrs = std::move(attrs);
          nodes.push_back(std::move(def));
        };
        add(loop.enter, "Enter", {source},
            {{"frame_name", AttrValue(frame.name)},
             {"is_constant", AttrValue(false)},
             {"parallel_iterations", AttrValue(frame.parallel_iterations)}});
        add(loop.merge, "Merge", {loop.enter, loop.next_iteration}, {{"N", AttrValue(int64_t{2})}});
        add(switch_name, "Switch", {loop.merge, pred}, {});
        add(loop.pivot, "Identity", {InputRefString(switch_name, 1)}, {});
        add(loop.next_iteration, "NextIteration", {loop.pivot}, {});
        add(exit, "Exit", {InputRefString(switch_name, 0)}, {});
        GraphDef& part = out_.graphs[d];
        for (NodeDef& def : nodes) part.nodes.push_back(std::move(def));
        loops.emplace(std::make_pair(static_cast<int>(f), d), std::move(loop));
      }
    }
    for (std::size_t k = 0; k < out_.transfers.size(); ++k) {
      const RecvSite& site = recv_sites_[k];
      if (site.frame == 0) continue;
      const Transfer& t = out_.transfers[k];
      auto loop = loops.find({site.frame, t.dst_device});
      if (loop == loops.end()) {
        return InternalError("partition: the transfer of ", Quote(t.tensor), " is in loop frame ",
                             Quote(cf_.frames[static_cast<std::size_t>(site.frame)].name),
                             ", which has no control loop on ", devices_[static_cast<std::size_t>(t.dst_device)].name);
      }
      const Graph::Node& src = graph_.node(site.src);
      std::string from = loop->second.merge;
      if (src.op_name() == "NextIteration") {
        from = loop->second.next_iteration;
      } else if (src.op_name() == "Enter") {
        auto constant = src.def.attrs.find("is_constant");
        if (constant == src.def.attrs.end() || !constant->second.get<bool>()) from = loop->second.enter;
      }
      out_.graphs[t.dst_device].nodes[site.index].inputs.push_back(InputRefString(from, -1));
    }
    return Status();
  }

  std::string DeviceList(const std::set<int>& ds) const {
    std::vector<std::string> names;
    for (int d : ds) names.push_back(devices_[static_cast<std::size_t>(d)].name);
    return StrJoin(names, ", ");
  }

  const Graph& graph_;
  const std::vector<int>& device_of_;
  const std::vector<PartitionDevice>& devices_;
  const PartitionOptions options_;
  std::set<std::pair<int, int>> stored_;  // (node, output) an Assign stores
  Namer namer_;
  const bool control_flow_;
  ControlFlowInfo cf_;
  Partitions out_;
  // (source node, output index or -1 for control, receiving device) -> transfer
  std::map<std::tuple<int, int, int>, std::size_t> cut_;
  std::vector<RecvSite> recv_sites_;  // by transfer, with control flow only
  std::vector<LateRead> late_reads_;
};

}  // namespace

Expected<Partitions> Partition(const Graph& graph, const std::vector<int>& device_of,
                               const std::vector<PartitionDevice>& devices, const PartitionOptions& options) {
  if (device_of.size() != static_cast<std::size_t>(graph.num_nodes())) {
    return InternalError("partition: ", device_of.size(), " placements for ", graph.num_nodes(), " nodes");
  }
  return Cutter(graph, device_of, devices, options).Run();
}

}  // namespace weft::placement
