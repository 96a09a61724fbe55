#include "core/placement/placer.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>

#include "core/base/logging.h"

namespace weft::placement {
namespace {

constexpr const char* kLogSource = "placement";

bool ParseInt(std::string_view text, int* out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size() && *out >= 0;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool ValidType(std::string_view type) {
  if (type.empty()) return false;
  for (char c : type) {
    if (!(std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return false;
    }
  }
  return true;
}

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(static_cast<std::size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int Find(int x) {
    while (parent[static_cast<std::size_t>(x)] != x) {
      parent[static_cast<std::size_t>(x)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(x)])];
      x = parent[static_cast<std::size_t>(x)];
    }
    return x;
  }
  bool Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return false;
    parent[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
    return true;
  }
};

// A node's request: from a pin or from the graph.
struct Request {
  bool present = false;
  DeviceSpec spec;
  std::string text;    // "/device:OPENCL:0"
  std::string source;  // "pinned by placement.pins \"dense1/*\"" or "requested
                       // in the graph"
};

std::vector<int> TopologicalOrder(const Graph& g) {
  const int n = g.num_nodes();
  std::vector<int> pending(static_cast<std::size_t>(n), 0);
  std::vector<std::vector<int>> out(static_cast<std::size_t>(n));
  for (const Graph::Node& node : g.nodes()) {
    for (const Endpoint& e : node.inputs) {
      out[static_cast<std::size_t>(e.node)].push_back(node.id);
      ++pending[static_cast<std::size_t>(node.id)];
    }
    for (int c : node.control_inputs) {
      out[static_cast<std::size_t>(c)].push_back(node.id);
      ++pending[static_cast<std::size_t>(node.id)];
    }
  }
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    if (pending[static_cast<std::size_t>(i)] == 0) order.push_back(i);
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    for (int next : out[static_cast<std::size_t>(order[k])]) {
      if (--pending[static_cast<std::size_t>(next)] == 0) order.push_back(next);
    }
  }
  // A cycle (loops come later) leaves nodes out: place them last.
  if (order.size() < static_cast<std::size_t>(n)) {
    std::vector<bool> seen(static_cast<std::size_t>(n), false);
    for (int id : order) seen[static_cast<std::size_t>(id)] = true;
    for (int i = 0; i < n; ++i) {
      if (!seen[static_cast<std::size_t>(i)]) order.push_back(i);
    }
  }
  return order;
}

std::string DeviceList(const std::vector<PlacementDevice>& devices) {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.name);
  return StrJoin(names, ", ");
}

}  // namespace

Expected<DeviceSpec> ParseDeviceSpec(std::string_view text) {
  DeviceSpec spec;
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(Quote(text), " is not a device name (", why,
                                "); write /device:<TYPE>:<N>, /device:<TYPE>:* "
                                "or <TYPE>:<N>, e.g. /device:CPU:0");
  };
  // "<TYPE>" or "<TYPE>:<N>" or "<TYPE>:*" into spec.type and spec.ordinal;
  // empty when fine, else why not.
  auto type_and_ordinal = [&spec](std::string_view value) -> std::string {
    const auto colon = value.find(':');
    spec.type = Upper(value.substr(0, colon));
    if (!ValidType(spec.type)) return "the device type must be letters, digits or '_'";
    if (colon == std::string_view::npos) return "";
    std::string_view ord = value.substr(colon + 1);
    if (ord != "*" && !ParseInt(ord, &spec.ordinal)) return StrCat("bad ordinal ", Quote(ord));
    return "";
  };
  if (text.empty()) return bad("it is empty");
  std::string_view rest = text;
  if (rest.front() != '/') {
    // "CPU:1", "CPU", "opencl:0"
    if (std::string why = type_and_ordinal(rest); !why.empty()) return bad(why);
    return spec;
  }
  while (!rest.empty()) {
    if (rest.front() != '/') return bad("expected '/'");
    rest.remove_prefix(1);
    const auto next = rest.find('/');
    std::string_view part = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
    const auto colon = part.find(':');
    if (colon == std::string_view::npos) return bad(StrCat("part ", Quote(part), " has no ':'"));
    std::string_view key = part.substr(0, colon);
    std::string_view value = part.substr(colon + 1);
    if (key == "job") {
      if (value.empty()) return bad("empty job name");
      spec.job = std::string(value);
    } else if (key == "task") {
      if (value != "*" && !ParseInt(value, &spec.task)) return bad(StrCat("bad task ", Quote(value)));
    } else if (key == "replica") {
      int ignored = 0;
      if (value != "*" && !ParseInt(value, &ignored)) return bad(StrCat("bad replica ", Quote(value)));
    } else if (key == "device") {
      if (std::string why = type_and_ordinal(value); !why.empty()) return bad(why);
    } else {
      // TensorFlow's legacy "/cpu:0" and "/gpu:1".
      spec.type = Upper(key);
      if (!ValidType(spec.type) || (value != "*" && !ParseInt(value, &spec.ordinal))) {
        return bad(StrCat("unknown part ", Quote(part)));
      }
    }
  }
  return spec;
}

bool SpecMatches(const DeviceSpec& spec, const PlacementDevice& device) {
  // The devices of one process (no job) match any job and task: a graph
  // written for a cluster runs in one process too.
  if (!device.job.empty()) {
    if (!spec.job.empty() && spec.job != device.job) return false;
    if (spec.task >= 0 && spec.task != device.task) return false;
  }
  if (!spec.type.empty() && spec.type != device.type) return false;
  return spec.ordinal < 0 || spec.ordinal == device.ordinal;
}

bool GlobMatch(std::string_view pattern, std::string_view name) {
  std::size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Expected<std::vector<DeviceSpec>> CheckPins(const std::vector<Pin>& pins, const std::vector<PlacementDevice>& devices) {
  std::vector<DeviceSpec> specs;
  for (const Pin& pin : pins) {
    const std::string what = StrCat("placement.pins ", Quote(pin.pattern), " = ", Quote(pin.device),
                                    pin.where.empty() ? "" : StrCat(" (", pin.where, ")"));
    auto spec = ParseDeviceSpec(pin.device);
    if (!spec.ok()) return spec.status().WithContext(what);
    bool any = false;
    for (const auto& d : devices) any = any || SpecMatches(*spec, d);
    if (!any) {
      return InvalidArgumentError(what, ": this process has no such device (devices: ", DeviceList(devices),
                                  "); check the device type and count ([devices.<plugin>] count), or "
                                  "`weft devices`");
    }
    specs.push_back(*spec);
  }
  return specs;
}

namespace {

// The choice of a device for one colocation group, made in Placer's steps.
struct GroupChoice {
  GroupChoice(int first_node, int group_root, const std::vector<int>& group_members, int nd)
      : id(first_node),
        root(group_root),
        group(group_members),
        allowed(static_cast<std::size_t>(nd), true),
        why_not(static_cast<std::size_t>(nd)),
        cost(static_cast<std::size_t>(nd), 0.0),
        inputs_on(static_cast<std::size_t>(nd), 0),
        move_ns(static_cast<std::size_t>(nd), 0.0) {}

  const int id;    // the group's first node in topological order
  const int root;  // its root in the colocation groups
  const std::vector<int>& group;
  // Which devices can run every member (hard), and why the others cannot.
  std::vector<bool> allowed;
  std::vector<std::string> why_not;
  std::vector<double> cost;
  std::vector<bool> candidates;  // what remains after fixed devices and requests
  std::string reason;
  int fixed_device = -1;
  // Per device: how many inputs from outside the group it holds, and the
  // time to move the others to it.
  std::vector<int> inputs_on;
  std::vector<double> move_ns;
};

// Place's state: requests, colocation groups and the placement so far.
class Placer {
 public:
  Placer(const Graph& graph, const std::vector<PlacementDevice>& devices, const SupportFn& support,
         const PlacementOptions& options)
      : graph_(graph),
        devices_(devices),
        support_(support),
        options_(options),
        n_(graph.num_nodes()),
        nd_(static_cast<int>(devices.size())),
        groups_(n_) {}

  Expected<Placement> Run();

 private:
  Status ReadRequests(const std::vector<DeviceSpec>& pin_specs);
  void FormGroups();
  int Rank(const PlacementDevice& d) const;
  Status PlaceGroup(int id);
  void FindAllowed(GroupChoice& c) const;
  std::string DescribeGroup(const std::vector<int>& group) const;
  std::string DescribeWhyNot(const GroupChoice& c, const std::vector<bool>& which) const;
  Status ApplyFixed(GroupChoice& c) const;
  Status ApplyRequests(GroupChoice& c) const;
  void WeighInputs(GroupChoice& c);
  int Best(const GroupChoice& c) const;
  void Assign(GroupChoice& c, int best);

  const Graph& graph_;
  const std::vector<PlacementDevice>& devices_;
  const SupportFn& support_;
  const PlacementOptions& options_;
  const int n_;
  const int nd_;
  std::vector<Request> requests_;
  UnionFind groups_;
  std::vector<std::string> joined_;        // per node: why it joined its group
  std::vector<std::vector<int>> members_;  // per group root
  Placement placement_;
  std::vector<bool> decided_;  // per group root
};

Expected<Placement> Placer::Run() {
  // Pins first: each must parse and name a device of this process.
  WEFT_ASSIGN_OR_RETURN(std::vector<DeviceSpec> pin_specs, CheckPins(options_.pins, devices_));
  WEFT_RETURN_IF_ERROR(ReadRequests(pin_specs));
  FormGroups();

  placement_.device.assign(static_cast<std::size_t>(n_), -1);
  placement_.reason.assign(static_cast<std::size_t>(n_), "");
  decided_.assign(static_cast<std::size_t>(n_), false);
  for (int id : TopologicalOrder(graph_)) WEFT_RETURN_IF_ERROR(PlaceGroup(id));
  if (!placement_.fallbacks.empty()) {
    WEFT_LOG_FROM(INFO, kLogSource) << "soft placement moved " << placement_.fallbacks.size() << " node group"
                                    << (placement_.fallbacks.size() == 1 ? "" : "s")
                                    << " off the device requested for them; the first: " << placement_.fallbacks.front()
                                    << " (`weft place --explain` lists all)";
  }
  return std::move(placement_);
}

// Requests: a node's first matching pin, else the device in the graph.
Status Placer::ReadRequests(const std::vector<DeviceSpec>& pin_specs) {
  requests_.resize(static_cast<std::size_t>(n_));
  std::vector<bool> pin_used(options_.pins.size(), false);
  for (const Graph::Node& node : graph_.nodes()) {
    Request& r = requests_[static_cast<std::size_t>(node.id)];
    for (std::size_t p = 0; p < options_.pins.size(); ++p) {
      if (GlobMatch(options_.pins[p].pattern, node.name())) {
        r.present = true;
        r.spec = pin_specs[p];
        r.text = options_.pins[p].device;
        r.source = options_.pins[p].source.empty()
                       ? StrCat("pinned by placement.pins ", Quote(options_.pins[p].pattern))
                       : options_.pins[p].source;
        pin_used[p] = true;
        break;
      }
    }
    if (!r.present && !node.def.device.empty()) {
      auto spec = ParseDeviceSpec(node.def.device);
      if (!spec.ok()) return spec.status().WithContext(StrCat(node.Describe(), " requests a device"));
      r.present = true;
      r.spec = *spec;
      r.text = node.def.device;
      r.source = "requested in the graph";
    }
  }
  for (std::size_t p = 0; p < options_.pins.size(); ++p) {
    if (!pin_used[p]) {
      WEFT_LOG_FROM(DEBUG, kLogSource) << "placement.pins " << Quote(options_.pins[p].pattern)
                                       << " matches no node of this graph";
    }
  }
  return Status();
}

// Colocation groups.
void Placer::FormGroups() {
  joined_.resize(static_cast<std::size_t>(n_));
  for (const Graph::Node& node : graph_.nodes()) {
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.input_types[k] != DType::kResource) continue;
      const Graph::Node& src = graph_.node(node.inputs[k].node);
      if (groups_.Union(node.id, src.id) && joined_[static_cast<std::size_t>(node.id)].empty()) {
        joined_[static_cast<std::size_t>(node.id)] = StrCat("uses the resource of ", Quote(src.name()));
      }
    }
    // A loop's back edge cannot be cut: the NextIteration runs where its
    // Merge does (the value it carries may come from another device).
    if (node.op_name() == "Merge") {
      for (const auto& in : node.inputs) {
        const Graph::Node& src = graph_.node(in.node);
        if (src.op_name() != "NextIteration") continue;
        if (groups_.Union(src.id, node.id) && joined_[static_cast<std::size_t>(src.id)].empty()) {
          joined_[static_cast<std::size_t>(src.id)] = StrCat("closes the loop of ", Quote(node.name()));
        }
      }
    }
    auto it = node.def.attrs.find("_colocate");
    if (it != node.def.attrs.end() && it->second.holds<std::vector<std::string>>()) {
      for (const std::string& other : it->second.get<std::vector<std::string>>()) {
        const Graph::Node* o = graph_.Find(other);
        if (o == nullptr) continue;  // pruned away: nothing to share a device with
        if (groups_.Union(node.id, o->id) && joined_[static_cast<std::size_t>(node.id)].empty()) {
          joined_[static_cast<std::size_t>(node.id)] = StrCat("its _colocate attr names ", Quote(other));
        }
      }
    }
  }
  members_.resize(static_cast<std::size_t>(n_));
  for (int i = 0; i < n_; ++i) members_[static_cast<std::size_t>(groups_.Find(i))].push_back(i);
}

// Priority rank by type.
int Placer::Rank(const PlacementDevice& d) const {
  for (std::size_t i = 0; i < options_.priority.size(); ++i) {
    if (Upper(options_.priority[i]) == d.type) return static_cast<int>(i);
  }
  return static_cast<int>(options_.priority.size());
}

// Places the group of node |id| unless an earlier node of it did.
Status Placer::PlaceGroup(int id) {
  const int root = groups_.Find(id);
  if (decided_[static_cast<std::size_t>(root)]) return Status();
  decided_[static_cast<std::size_t>(root)] = true;
  GroupChoice c(id, root, members_[static_cast<std::size_t>(root)], nd_);
  FindAllowed(c);
  if (std::none_of(c.allowed.begin(), c.allowed.end(), [](bool b) { return b; })) {
    const std::vector<int>& group = c.group;
    std::vector<bool> all(static_cast<std::size_t>(nd_), true);
    return InvalidArgumentError(
        "cannot place ",
        group.size() == 1 ? graph_.node(group[0]).Describe()
                          : StrCat("a group of ", group.size(), " nodes that must share a device"),
        ": no device can run ", group.size() == 1 ? "it" : "all of them", ".",
        group.size() == 1 ? std::string() : StrCat("\nThe group:", DescribeGroup(group)), DescribeWhyNot(c, all));
  }
  c.candidates = c.allowed;
  WEFT_RETURN_IF_ERROR(ApplyFixed(c));
  WEFT_RETURN_IF_ERROR(ApplyRequests(c));
  WeighInputs(c);
  Assign(c, Best(c));
  return Status();
}

void Placer::FindAllowed(GroupChoice& c) const {
  for (int m : c.group) {
    const Graph::Node& node = graph_.node(m);
    for (int d = 0; d < nd_; ++d) {
      if (!c.allowed[static_cast<std::size_t>(d)]) continue;
      double cost = 0;
      auto reason = support_(graph_, node, d, &cost);
      if (reason) {
        c.allowed[static_cast<std::size_t>(d)] = false;
        c.why_not[static_cast<std::size_t>(d)] = StrCat(node.Describe(), ": ", *reason);
      } else {
        c.cost[static_cast<std::size_t>(d)] += cost;
      }
    }
  }
}

std::string Placer::DescribeGroup(const std::vector<int>& group) const {
  std::string s;
  for (int m : group) {
    s += StrCat("\n  ", graph_.node(m).Describe());
    if (!joined_[static_cast<std::size_t>(m)].empty()) s += StrCat(" (", joined_[static_cast<std::size_t>(m)], ")");
    const Request& r = requests_[static_cast<std::size_t>(m)];
    if (r.present) s += StrCat(", ", r.source, ": ", r.text);
  }
  return s;
}

std::string Placer::DescribeWhyNot(const GroupChoice& c, const std::vector<bool>& which) const {
  std::string s;
  for (int d = 0; d < nd_; ++d) {
    if (which[static_cast<std::size_t>(d)] && !c.why_not[static_cast<std::size_t>(d)].empty()) {
      s += StrCat("\n  ", devices_[static_cast<std::size_t>(d)].name,
                  " cannot: ", c.why_not[static_cast<std::size_t>(d)]);
    }
  }
  return s;
}

// A member an earlier step placed (it holds state) decides for all.
Status Placer::ApplyFixed(GroupChoice& c) const {
  for (int m : c.group) {
    auto it = options_.fixed.find(graph_.node(m).name());
    if (it == options_.fixed.end()) continue;
    for (int d = 0; d < nd_; ++d) {
      if (devices_[static_cast<std::size_t>(d)].name == it->second) c.fixed_device = d;
    }
    if (c.fixed_device < 0 || !c.allowed[static_cast<std::size_t>(c.fixed_device)]) {
      return FailedPreconditionError(
          graph_.node(m).Describe(), " holds state on ", it->second, ", where an earlier step placed it, but ",
          c.fixed_device < 0 ? "that device is gone" : "cannot run there now",
          c.group.size() > 1 ? StrCat("\nThe group that must share a device:", DescribeGroup(c.group)) : "");
    }
    c.candidates.assign(static_cast<std::size_t>(nd_), false);
    c.candidates[static_cast<std::size_t>(c.fixed_device)] = true;
    c.reason = StrCat("stays on ", it->second, ", where an earlier step placed ", Quote(graph_.node(m).name()),
                      " (it holds state)");
    break;
  }
  return Status();
}

// Requests narrow the choice.
Status Placer::ApplyRequests(GroupChoice& c) const {
  const std::vector<int>& group = c.group;
  int requester = -1;
  std::vector<bool> requested(static_cast<std::size_t>(nd_), true);
  for (int m : group) {
    if (c.fixed_device >= 0) break;
    const Request& r = requests_[static_cast<std::size_t>(m)];
    if (!r.present) continue;
    if (requester < 0) requester = m;
    for (int d = 0; d < nd_; ++d) {
      if (!SpecMatches(r.spec, devices_[static_cast<std::size_t>(d)])) requested[static_cast<std::size_t>(d)] = false;
    }
  }
  if (requester < 0) return Status();
  const Request& r = requests_[static_cast<std::size_t>(requester)];
  std::vector<bool> want(static_cast<std::size_t>(nd_));
  bool any_want = false, any_requested = false;
  for (int d = 0; d < nd_; ++d) {
    want[static_cast<std::size_t>(d)] =
        requested[static_cast<std::size_t>(d)] && c.allowed[static_cast<std::size_t>(d)];
    any_want = any_want || want[static_cast<std::size_t>(d)];
    any_requested = any_requested || requested[static_cast<std::size_t>(d)];
  }
  const std::string asked =
      StrCat(r.text, " (", r.source,
             requester == c.id || group.size() == 1 ? "" : StrCat(" for ", Quote(graph_.node(requester).name())), ")");
  if (any_want) {
    c.candidates = want;
    c.reason = StrCat(r.source, ": ", r.text);
    return Status();
  }
  std::string problem = !any_requested ? StrCat("no device of this process matches ",
                                                group.size() > 1 ? "the group's requests" : Quote(r.text),
                                                " (devices: ", DeviceList(devices_), ")")
                                       : StrCat("the requested device cannot run it:", DescribeWhyNot(c, requested));
  if (!options_.soft) {
    return InvalidArgumentError(
        "cannot place ", graph_.node(c.id).Describe(), " on ", asked, ": ", problem,
        group.size() > 1 ? StrCat("\nThe group that must share a device:", DescribeGroup(group)) : "",
        "\nSoft placement is off (placement.soft = false); turn it on to "
        "let the "
        "placer choose another device.");
  }
  c.reason = StrCat("soft placement: wanted ", asked, ", but ", problem);
  return Status();
}

// Where the group's inputs from outside it are, and what moving them to
// each device costs.
void Placer::WeighInputs(GroupChoice& c) {
  for (int m : c.group) {
    const Graph::Node& node = graph_.node(m);
    for (const Endpoint& e : node.inputs) {
      if (groups_.Find(e.node) == c.root) continue;
      const int at = placement_.device[static_cast<std::size_t>(e.node)];
      if (at < 0) continue;
      ++c.inputs_on[static_cast<std::size_t>(at)];
      const Graph::Node& src = graph_.node(e.node);
      const Shape& shape = src.output_shapes[static_cast<std::size_t>(e.index)];
      int64_t elements = 1;
      bool known = shape.rank() >= 0;
      for (int k = 0; known && k < shape.rank(); ++k) {
        if (shape.dim(k) < 0)
          known = false;
        else
          elements *= shape.dim(k);
      }
      const double bytes = known
                               ? static_cast<double>(elements) *
                                     static_cast<double>(DTypeSize(src.output_types[static_cast<std::size_t>(e.index)]))
                               : 0.0;
      for (int d = 0; d < nd_; ++d) {
        if (d == at) continue;
        const double gbps = devices_[static_cast<std::size_t>(d)].host_visible
                                ? devices_[static_cast<std::size_t>(at)].device_to_host_gbps
                                : devices_[static_cast<std::size_t>(d)].host_to_device_gbps;
        c.move_ns[static_cast<std::size_t>(d)] += bytes / (gbps > 0 ? gbps : 10.0);  // bytes / (GB/s) = ns
      }
    }
  }
}

// The best candidate: priority, then locality, then cost, then order.
int Placer::Best(const GroupChoice& c) const {
  int best = -1;
  auto better = [&](int a, int b) {  // is a better than b
    const int ra = Rank(devices_[static_cast<std::size_t>(a)]), rb = Rank(devices_[static_cast<std::size_t>(b)]);
    if (ra != rb) return ra < rb;
    if (c.inputs_on[static_cast<std::size_t>(a)] != c.inputs_on[static_cast<std::size_t>(b)]) {
      return c.inputs_on[static_cast<std::size_t>(a)] > c.inputs_on[static_cast<std::size_t>(b)];
    }
    const double ca = c.cost[static_cast<std::size_t>(a)] + c.move_ns[static_cast<std::size_t>(a)];
    const double cb = c.cost[static_cast<std::size_t>(b)] + c.move_ns[static_cast<std::size_t>(b)];
    if (ca != cb) return ca < cb;
    return a < b;
  };
  for (int d = 0; d < nd_; ++d) {
    if (!c.candidates[static_cast<std::size_t>(d)]) continue;
    if (best < 0 || better(d, best)) best = d;
  }
  return best;
}

// Puts every member of the group on |best|, with its reason.
void Placer::Assign(GroupChoice& c, int best) {
  std::string& reason = c.reason;
  if (reason.empty()) {
    const PlacementDevice& dev = devices_[static_cast<std::size_t>(best)];
    int available = 0;
    for (int d = 0; d < nd_; ++d) available += c.candidates[static_cast<std::size_t>(d)] ? 1 : 0;
    reason = available == 1
                 ? StrCat("the only device that can run it")
                 : StrCat("default: ", dev.type,
                          " comes first in placement.priority among the "
                          "devices that can run it",
                          c.inputs_on[static_cast<std::size_t>(best)] > 0 ? ", and it holds its inputs" : "");
  } else if (reason.starts_with("soft placement")) {
    reason += StrCat("; fell back to ", devices_[static_cast<std::size_t>(best)].name);
    placement_.fallbacks.push_back(StrCat(graph_.node(c.id).Describe(), ": ", reason));
    WEFT_LOG_FROM(DEBUG, kLogSource) << graph_.node(c.id).Describe() << ": " << reason;
  }
  for (int m : c.group) {
    placement_.device[static_cast<std::size_t>(m)] = best;
    std::string r = reason;
    if (c.group.size() > 1 && !joined_[static_cast<std::size_t>(m)].empty()) {
      r = StrCat("with its colocation group (", joined_[static_cast<std::size_t>(m)], "): ", reason);
    }
    placement_.reason[static_cast<std::size_t>(m)] = std::move(r);
  }
}

}  // namespace

Expected<Placement> Place(const Graph& graph, const std::vector<PlacementDevice>& devices, const SupportFn& support,
                          const PlacementOptions& options) {
  if (devices.empty()) return FailedPreconditionError("no devices to place the graph on");
  Placer placer(graph, devices, support, options);
  return placer.Run();
}

}  // namespace weft::placement
