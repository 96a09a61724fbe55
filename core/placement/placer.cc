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

Expected<Placement> Place(const Graph& graph, const std::vector<PlacementDevice>& devices, const SupportFn& support,
                          const PlacementOptions& options) {
  if (devices.empty()) return FailedPreconditionError("no devices to place the graph on");
  const int n = graph.num_nodes();
  const int nd = static_cast<int>(devices.size());

  // Pins first: each must parse and name a device of this process.
  WEFT_ASSIGN_OR_RETURN(std::vector<DeviceSpec> pin_specs, CheckPins(options.pins, devices));

  // Requests.
  std::vector<Request> requests(static_cast<std::size_t>(n));
  std::vector<bool> pin_used(options.pins.size(), false);
  for (const Graph::Node& node : graph.nodes()) {
    Request& r = requests[static_cast<std::size_t>(node.id)];
    for (std::size_t p = 0; p < options.pins.size(); ++p) {
      if (GlobMatch(options.pins[p].pattern, node.name())) {
        r.present = true;
        r.spec = pin_specs[p];
        r.text = options.pins[p].device;
        r.source = options.pins[p].source.empty() ? StrCat("pinned by placement.pins ", Quote(options.pins[p].pattern))
                                                  : options.pins[p].source;
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
  for (std::size_t p = 0; p < options.pins.size(); ++p) {
    if (!pin_used[p]) {
      WEFT_LOG_FROM(DEBUG, kLogSource) << "placement.pins " << Quote(options.pins[p].pattern)
                                       << " matches no node of this graph";
    }
  }

  // Colocation groups.
  UnionFind groups(n);
  std::vector<std::string> joined(static_cast<std::size_t>(n));
  for (const Graph::Node& node : graph.nodes()) {
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (node.input_types[k] != DType::kResource) continue;
      const Graph::Node& src = graph.node(node.inputs[k].node);
      if (groups.Union(node.id, src.id) && joined[static_cast<std::size_t>(node.id)].empty()) {
        joined[static_cast<std::size_t>(node.id)] = StrCat("uses the resource of ", Quote(src.name()));
      }
    }
    // A loop's back edge cannot be cut: the NextIteration runs where its
    // Merge does (the value it carries may come from another device).
    if (node.op_name() == "Merge") {
      for (const auto& in : node.inputs) {
        const Graph::Node& src = graph.node(in.node);
        if (src.op_name() != "NextIteration") continue;
        if (groups.Union(src.id, node.id) && joined[static_cast<std::size_t>(src.id)].empty()) {
          joined[static_cast<std::size_t>(src.id)] = StrCat("closes the loop of ", Quote(node.name()));
        }
      }
    }
    auto it = node.def.attrs.find("_colocate");
    if (it != node.def.attrs.end() && it->second.holds<std::vector<std::string>>()) {
      for (const std::string& other : it->second.get<std::vector<std::string>>()) {
        const Graph::Node* o = graph.Find(other);
        if (o == nullptr) continue;  // pruned away: nothing to share a device with
        if (groups.Union(node.id, o->id) && joined[static_cast<std::size_t>(node.id)].empty()) {
          joined[static_cast<std::size_t>(node.id)] = StrCat("its _colocate attr names ", Quote(other));
        }
      }
    }
  }
  std::vector<std::vector<int>> members(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) members[static_cast<std::size_t>(groups.Find(i))].push_back(i);

  // Priority rank by type.
  auto rank = [&](const PlacementDevice& d) {
    for (std::size_t i = 0; i < options.priority.size(); ++i) {
      if (Upper(options.priority[i]) == d.type) return static_cast<int>(i);
    }
    return static_cast<int>(options.priority.size());
  };

  Placement placement;
  placement.device.assign(static_cast<std::size_t>(n), -1);
  placement.reason.assign(static_cast<std::size_t>(n), "");
  std::vector<bool> decided(static_cast<std::size_t>(n), false);

  for (int id : TopologicalOrder(graph)) {
    const int root = groups.Find(id);
    if (decided[static_cast<std::size_t>(root)]) continue;
    decided[static_cast<std::size_t>(root)] = true;
    const std::vector<int>& group = members[static_cast<std::size_t>(root)];

    // Which devices can run every member (hard), and why the others cannot.
    std::vector<bool> allowed(static_cast<std::size_t>(nd), true);
    std::vector<std::string> why_not(static_cast<std::size_t>(nd));
    std::vector<double> cost(static_cast<std::size_t>(nd), 0.0);
    for (int m : group) {
      const Graph::Node& node = graph.node(m);
      for (int d = 0; d < nd; ++d) {
        if (!allowed[static_cast<std::size_t>(d)]) continue;
        double c = 0;
        auto reason = support(graph, node, d, &c);
        if (reason) {
          allowed[static_cast<std::size_t>(d)] = false;
          why_not[static_cast<std::size_t>(d)] = StrCat(node.Describe(), ": ", *reason);
        } else {
          cost[static_cast<std::size_t>(d)] += c;
        }
      }
    }
    auto describe_group = [&] {
      std::string s;
      for (int m : group) {
        s += StrCat("\n  ", graph.node(m).Describe());
        if (!joined[static_cast<std::size_t>(m)].empty()) s += StrCat(" (", joined[static_cast<std::size_t>(m)], ")");
        const Request& r = requests[static_cast<std::size_t>(m)];
        if (r.present) s += StrCat(", ", r.source, ": ", r.text);
      }
      return s;
    };
    auto describe_why_not = [&](const std::vector<bool>& which) {
      std::string s;
      for (int d = 0; d < nd; ++d) {
        if (which[static_cast<std::size_t>(d)] && !why_not[static_cast<std::size_t>(d)].empty()) {
          s += StrCat("\n  ", devices[static_cast<std::size_t>(d)].name,
                      " cannot: ", why_not[static_cast<std::size_t>(d)]);
        }
      }
      return s;
    };
    if (std::none_of(allowed.begin(), allowed.end(), [](bool b) { return b; })) {
      std::vector<bool> all(static_cast<std::size_t>(nd), true);
      return InvalidArgumentError(
          "cannot place ",
          group.size() == 1 ? graph.node(group[0]).Describe()
                            : StrCat("a group of ", group.size(), " nodes that must share a device"),
          ": no device can run ", group.size() == 1 ? "it" : "all of them", ".",
          group.size() == 1 ? std::string() : StrCat("\nThe group:", describe_group()), describe_why_not(all));
    }

    // A member an earlier step placed (it holds state) decides for all.
    std::vector<bool> candidates = allowed;
    std::string reason;
    int fixed_device = -1;
    for (int m : group) {
      auto it = options.fixed.find(graph.node(m).name());
      if (it == options.fixed.end()) continue;
      for (int d = 0; d < nd; ++d) {
        if (devices[static_cast<std::size_t>(d)].name == it->second) fixed_device = d;
      }
      if (fixed_device < 0 || !allowed[static_cast<std::size_t>(fixed_device)]) {
        return FailedPreconditionError(
            graph.node(m).Describe(), " holds state on ", it->second, ", where an earlier step placed it, but ",
            fixed_device < 0 ? "that device is gone" : "cannot run there now",
            group.size() > 1 ? StrCat("\nThe group that must share a device:", describe_group()) : "");
      }
      candidates.assign(static_cast<std::size_t>(nd), false);
      candidates[static_cast<std::size_t>(fixed_device)] = true;
      reason = StrCat("stays on ", it->second, ", where an earlier step placed ", Quote(graph.node(m).name()),
                      " (it holds state)");
      break;
    }

    // Requests narrow the choice.
    int requester = -1;
    std::vector<bool> requested(static_cast<std::size_t>(nd), true);
    for (int m : group) {
      if (fixed_device >= 0) break;
      const Request& r = requests[static_cast<std::size_t>(m)];
      if (!r.present) continue;
      if (requester < 0) requester = m;
      for (int d = 0; d < nd; ++d) {
        if (!SpecMatches(r.spec, devices[static_cast<std::size_t>(d)])) requested[static_cast<std::size_t>(d)] = false;
      }
    }
    if (requester >= 0) {
      const Request& r = requests[static_cast<std::size_t>(requester)];
      std::vector<bool> want(static_cast<std::size_t>(nd));
      bool any_want = false, any_requested = false;
      for (int d = 0; d < nd; ++d) {
        want[static_cast<std::size_t>(d)] =
            requested[static_cast<std::size_t>(d)] && allowed[static_cast<std::size_t>(d)];
        any_want = any_want || want[static_cast<std::size_t>(d)];
        any_requested = any_requested || requested[static_cast<std::size_t>(d)];
      }
      const std::string asked =
          StrCat(r.text, " (", r.source,
                 requester == id || group.size() == 1 ? "" : StrCat(" for ", Quote(graph.node(requester).name())), ")");
      if (any_want) {
        candidates = want;
        reason = StrCat(r.source, ": ", r.text);
      } else {
        std::string problem = !any_requested
                                  ? StrCat("no device of this process matches ",
                                           group.size() > 1 ? "the group's requests" : Quote(r.text),
                                           " (devices: ", DeviceList(devices), ")")
                                  : StrCat("the requested device cannot run it:", describe_why_not(requested));
        if (!options.soft) {
          return InvalidArgumentError(
              "cannot place ", graph.node(id).Describe(), " on ", asked, ": ", problem,
              group.size() > 1 ? StrCat("\nThe group that must share a device:", describe_group()) : "",
              "\nSoft placement is off (placement.soft = false); turn it on to "
              "let the "
              "placer choose another device.");
        }
        reason = StrCat("soft placement: wanted ", asked, ", but ", problem);
      }
    }

    // The best candidate: priority, then locality, then cost, then order.
    std::vector<int> inputs_on(static_cast<std::size_t>(nd), 0);
    std::vector<double> move_ns(static_cast<std::size_t>(nd), 0.0);
    for (int m : group) {
      const Graph::Node& node = graph.node(m);
      for (const Endpoint& e : node.inputs) {
        if (groups.Find(e.node) == root) continue;
        const int at = placement.device[static_cast<std::size_t>(e.node)];
        if (at < 0) continue;
        ++inputs_on[static_cast<std::size_t>(at)];
        const Graph::Node& src = graph.node(e.node);
        const Shape& shape = src.output_shapes[static_cast<std::size_t>(e.index)];
        int64_t elements = 1;
        bool known = shape.rank() >= 0;
        for (int k = 0; known && k < shape.rank(); ++k) {
          if (shape.dim(k) < 0)
            known = false;
          else
            elements *= shape.dim(k);
        }
        const double bytes =
            known ? static_cast<double>(elements) *
                        static_cast<double>(DTypeSize(src.output_types[static_cast<std::size_t>(e.index)]))
                  : 0.0;
        for (int d = 0; d < nd; ++d) {
          if (d == at) continue;
          const double gbps = devices[static_cast<std::size_t>(d)].host_visible
                                  ? devices[static_cast<std::size_t>(at)].device_to_host_gbps
                                  : devices[static_cast<std::size_t>(d)].host_to_device_gbps;
          move_ns[static_cast<std::size_t>(d)] += bytes / (gbps > 0 ? gbps : 10.0);  // bytes / (GB/s) = ns
        }
      }
    }
    int best = -1;
    auto better = [&](int a, int b) {  // is a better than b
      const int ra = rank(devices[static_cast<std::size_t>(a)]), rb = rank(devices[static_cast<std::size_t>(b)]);
      if (ra != rb) return ra < rb;
      if (inputs_on[static_cast<std::size_t>(a)] != inputs_on[static_cast<std::size_t>(b)]) {
        return inputs_on[static_cast<std::size_t>(a)] > inputs_on[static_cast<std::size_t>(b)];
      }
      const double ca = cost[static_cast<std::size_t>(a)] + move_ns[static_cast<std::size_t>(a)];
      const double cb = cost[static_cast<std::size_t>(b)] + move_ns[static_cast<std::size_t>(b)];
      if (ca != cb) return ca < cb;
      return a < b;
    };
    for (int d = 0; d < nd; ++d) {
      if (!candidates[static_cast<std::size_t>(d)]) continue;
      if (best < 0 || better(d, best)) best = d;
    }
    if (reason.empty()) {
      const PlacementDevice& dev = devices[static_cast<std::size_t>(best)];
      int available = 0;
      for (int d = 0; d < nd; ++d) available += candidates[static_cast<std::size_t>(d)] ? 1 : 0;
      reason = available == 1
                   ? StrCat("the only device that can run it")
                   : StrCat("default: ", dev.type,
                            " comes first in placement.priority among the "
                            "devices that can run it",
                            inputs_on[static_cast<std::size_t>(best)] > 0 ? ", and it holds its inputs" : "");
    } else if (reason.starts_with("soft placement")) {
      reason += StrCat("; fell back to ", devices[static_cast<std::size_t>(best)].name);
      placement.fallbacks.push_back(StrCat(graph.node(id).Describe(), ": ", reason));
      WEFT_LOG_FROM(DEBUG, kLogSource) << graph.node(id).Describe() << ": " << reason;
    }
    for (int m : group) {
      placement.device[static_cast<std::size_t>(m)] = best;
      std::string r = reason;
      if (group.size() > 1 && !joined[static_cast<std::size_t>(m)].empty()) {
        r = StrCat("with its colocation group (", joined[static_cast<std::size_t>(m)], "): ", reason);
      }
      placement.reason[static_cast<std::size_t>(m)] = std::move(r);
    }
  }
  if (!placement.fallbacks.empty()) {
    WEFT_LOG_FROM(INFO, kLogSource) << "soft placement moved " << placement.fallbacks.size() << " node group"
                                    << (placement.fallbacks.size() == 1 ? "" : "s")
                                    << " off the device requested for them; the first: " << placement.fallbacks.front()
                                    << " (`weft place --explain` lists all)";
  }
  return placement;
}

}  // namespace weft::placement
