#include "core/runtime/placement_support.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/base/strings.h"
#include "core/runtime/op_kernel.h"

namespace weft::runtime {

std::vector<placement::PlacementDevice> PlacementDevices(const std::vector<const RuntimeDevice*>& devices) {
  std::vector<placement::PlacementDevice> out;
  for (const RuntimeDevice* d : devices) {
    placement::PlacementDevice p;
    p.name = d->name();
    p.type = d->type();
    p.ordinal = d->device().ordinal();
    p.host_to_device_gbps = d->host_to_device_gbps();
    p.device_to_host_gbps = d->device_to_host_gbps();
    p.host_visible = d->host_visible();
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<placement::PlacementDevice> PlacementDevices(const DeviceSet& devices) {
  return PlacementDevices(devices.devices());
}

placement::SupportFn KernelSupportFn(std::vector<const RuntimeDevice*> devices) {
  return [devices = std::move(devices)](const Graph& graph, const Graph::Node& node, int d,
                                        double* cost_ns) -> std::optional<std::string> {
    const RuntimeDevice& device = *devices[static_cast<std::size_t>(d)];
    KernelSupport support = QueryKernelSupport(graph, node, device);
    if (!support.supported) return support.reason;
    *cost_ns = support.cost_ns;
    return std::nullopt;
  };
}

placement::SupportFn KernelSupportFn(const DeviceSet& devices) { return KernelSupportFn(devices.devices()); }

namespace {

// Whether |kernels| has a kernel for |def|'s op and type attrs.
bool HasKernelFor(const KernelTable& kernels, const NodeDef& def) {
  for (const weft_kernel_def_t* kernel : kernels.ForOp(def.op)) {
    bool matches = true;
    for (size_t i = 0; i < kernel->num_constraints && matches; ++i) {
      auto it = def.attrs.find(kernel->constraint_attrs[i]);
      matches = it != def.attrs.end() && it->second.holds<DType>() &&
                static_cast<weft_dtype_t>(it->second.get<DType>()) == kernel->constraint_dtypes[i];
    }
    if (matches) return true;
  }
  return false;
}

// The device types of |devices|, most preferred first (placer.h: the
// priority list, then the others in plugin order).
std::vector<std::string> RankedTypes(const DeviceSet& devices, const placement::PlacementOptions& options) {
  std::vector<std::string> ranked;
  for (const std::string& type : options.priority) {
    if (devices.kernel_tables().contains(type)) ranked.push_back(type);
  }
  for (const std::string& type : devices.types()) {
    if (std::find(ranked.begin(), ranked.end(), type) == ranked.end()) ranked.push_back(type);
  }
  return ranked;
}

// Which device types placing nodes needs open, without opening the others
// (DeviceSet::Opening::kLazy): for each node the first type, most
// preferred first, that has a kernel for it and a device; and every type a
// request, pin or fixed device names. Add and AddSpec answer false when
// every type may be needed (a spec without a type, a node no type runs).
class NeededTypes {
 public:
  NeededTypes(const DeviceSet& devices, const placement::PlacementOptions& options)
      : devices_(devices), ranked_(RankedTypes(devices, options)) {}

  // Adds the type(s) |def| may go to; false when that is every type.
  bool Add(const NodeDef& def, const std::string& requested) {
    if (!requested.empty() && !AddSpec(requested)) return false;
    // The runtime's own kernels run on every device.
    if (IsRuntimeOp(def.op)) return true;
    // Memoized by op and type attrs: a million-node graph has few kinds.
    std::string key = def.op;
    for (const auto& [name, value] : def.attrs) {
      if (value.holds<DType>()) key += StrCat("|", name, "=", static_cast<int>(value.get<DType>()));
    }
    auto [it, inserted] = by_kind_.emplace(std::move(key), std::string());
    if (inserted) {
      for (const std::string& type : ranked_) {
        if (!HasKernelFor(*devices_.kernel_tables().at(type), def) || !HasDevice(type)) continue;
        it->second = type;
        break;
      }
    }
    if (it->second.empty()) return false;  // no device can run it: the placer's message lists every device
    types_.insert(it->second);
    return true;
  }

  // Adds the type a device spec names; false when it names none.
  bool AddSpec(const std::string& spec) {
    auto parsed = placement::ParseDeviceSpec(spec);
    if (!parsed.ok() || parsed->type.empty()) return false;
    types_.insert(parsed->type);
    return true;
  }

  // The types to open: at least the first that has a device, for a graph
  // of runtime ops only.
  const std::set<std::string>& types() {
    for (std::size_t i = 0; types_.empty() && i < ranked_.size(); ++i) {
      if (HasDevice(ranked_[i])) types_.insert(ranked_[i]);
    }
    return types_;
  }

 private:
  bool HasDevice(const std::string& type) {
    auto [it, inserted] = has_device_.emplace(type, false);
    if (inserted) {
      auto open = devices_.Devices({type});
      if (open.ok()) {
        for (const RuntimeDevice* d : *open) it->second = it->second || d->type() == type;
      }
    }
    return it->second;
  }

  const DeviceSet& devices_;
  std::vector<std::string> ranked_;
  std::set<std::string> types_;
  std::unordered_map<std::string, std::string> by_kind_;
  std::unordered_map<std::string, bool> has_device_;
};

// The devices placing |graph| may choose among: those of the types it
// needs (NeededTypes), or all of them.
Expected<std::vector<const RuntimeDevice*>> DevicesFor(const Graph& graph, const DeviceSet& devices,
                                                       const placement::PlacementOptions& options) {
  if (devices.all_open()) return devices.devices();
  NeededTypes needed(devices, options);
  bool some = true;
  for (const placement::Pin& pin : options.pins) some = some && needed.AddSpec(pin.device);
  for (const auto& [node, device] : options.fixed) some = some && needed.AddSpec(device);
  for (const Graph::Node& node : graph.nodes()) {
    if (!some) break;
    some = needed.Add(node.def, RequestedDevice(options, node.def));
  }
  if (!some) return devices.devices();
  return devices.Devices(needed.types());
}

}  // namespace

Expected<PlacedGraph> PlaceAndPartition(const Graph& graph, const DeviceSet& devices,
                                        const placement::PlacementOptions& options) {
  // Shape-aware kernel queries read the node through the kernel services.
  EnableKernelServices();
  PlacedGraph placed;
  WEFT_ASSIGN_OR_RETURN(placed.devices, DevicesFor(graph, devices, options));
  auto placement = placement::Place(graph, PlacementDevices(placed.devices), KernelSupportFn(placed.devices), options);
  if (!placement.ok() && placed.devices.size() != devices.devices().size()) {
    // A kernel declined where the types were guessed: choose among all.
    placed.devices = devices.devices();
    placement = placement::Place(graph, PlacementDevices(placed.devices), KernelSupportFn(placed.devices), options);
  }
  if (!placement.ok()) return placement.status();
  placed.placement = std::move(*placement);
  bool one = true;
  for (int d : placed.placement.device) one = one && d == placed.placement.device.front();
  if (one) return placed;
  std::vector<placement::PartitionDevice> parts;
  for (const RuntimeDevice* d : placed.devices) parts.push_back({d->name(), d->incarnation()});
  WEFT_ASSIGN_OR_RETURN(placement::Partitions partitions, placement::Partition(graph, placed.placement.device, parts));
  placed.partitions = std::move(partitions.graphs);
  placed.transfers = std::move(partitions.transfers);
  return placed;
}

bool FusedKernelEverywhere(const DeviceSet& devices, const placement::PlacementOptions& options, const NodeDef& node,
                           const NodeDef& fused) {
  const std::string requested = RequestedDevice(options, node);
  std::optional<placement::DeviceSpec> spec;
  if (!requested.empty()) {
    auto parsed = placement::ParseDeviceSpec(requested);
    if (!parsed.ok()) return false;  // placement will say what is wrong with it
    spec = *parsed;
  }
  // The devices it could go to, opening no more types than placing it
  // would.
  std::vector<const RuntimeDevice*> open;
  if (devices.all_open()) {
    open = devices.devices();
  } else {
    NeededTypes needed(devices, options);
    if (!needed.Add(node, requested)) return false;
    auto opened = devices.Devices(needed.types());
    if (!opened.ok()) return false;
    open = std::move(*opened);
  }
  // The placer takes the first device type in the priority list among the
  // devices that can run the node (placer.h): those are where it may go.
  const std::vector<placement::PlacementDevice> described = PlacementDevices(open);
  auto rank = [&](const std::string& type) {
    auto it = std::find(options.priority.begin(), options.priority.end(), type);
    return static_cast<std::size_t>(it - options.priority.begin());
  };
  std::vector<std::size_t> candidates;
  std::size_t best = SIZE_MAX;
  for (std::size_t d = 0; d < open.size(); ++d) {
    if (spec && !placement::SpecMatches(*spec, described[d])) continue;
    if (!HasKernelFor(open[d]->kernels(), node)) continue;
    candidates.push_back(d);
    best = std::min(best, rank(described[d].type));
  }
  if (candidates.empty()) return false;
  for (std::size_t d : candidates) {
    if (rank(described[d].type) == best && !HasKernelFor(open[d]->kernels(), fused)) return false;
  }
  return true;
}

std::string RequestedDevice(const placement::PlacementOptions& options, const NodeDef& node) {
  for (const placement::Pin& pin : options.pins) {
    if (placement::GlobMatch(pin.pattern, node.name)) return pin.device;
  }
  return node.device;
}

placement::PlacementOptions PlacementOptionsFromConfig(const config::Config& config) {
  placement::PlacementOptions options;
  options.soft = config.placement.soft;
  if (!config.placement.priority.empty()) options.priority = config.placement.priority;
  for (const auto& pin : config.placement.pins) options.pins.push_back({pin.pattern, pin.device, pin.where, ""});
  return options;
}

}  // namespace weft::runtime
