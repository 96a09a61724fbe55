#include "core/runtime/placement_support.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/runtime/op_kernel.h"

namespace weft::runtime {

std::vector<placement::PlacementDevice> PlacementDevices(const DeviceSet& devices) {
  std::vector<placement::PlacementDevice> out;
  for (const auto& d : devices.devices()) {
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

placement::SupportFn KernelSupportFn(const DeviceSet& devices) {
  return [&devices](const Graph& graph, const Graph::Node& node, int d, double* cost_ns) -> std::optional<std::string> {
    const RuntimeDevice& device = *devices.devices()[static_cast<std::size_t>(d)];
    KernelSupport support = QueryKernelSupport(graph, node, device);
    if (!support.supported) return support.reason;
    *cost_ns = support.cost_ns;
    return std::nullopt;
  };
}

Expected<PlacedGraph> PlaceAndPartition(const Graph& graph, const DeviceSet& devices,
                                        const placement::PlacementOptions& options) {
  // Shape-aware kernel queries read the node through the kernel services.
  EnableKernelServices();
  PlacedGraph placed;
  for (const auto& d : devices.devices()) placed.devices.push_back(d.get());
  WEFT_ASSIGN_OR_RETURN(placed.placement,
                        placement::Place(graph, PlacementDevices(devices), KernelSupportFn(devices), options));
  bool one = true;
  for (int d : placed.placement.device) one = one && d == placed.placement.device.front();
  if (one) return placed;
  std::vector<placement::PartitionDevice> parts;
  for (const auto& d : devices.devices()) parts.push_back({d->name(), d->incarnation()});
  WEFT_ASSIGN_OR_RETURN(placement::Partitions partitions, placement::Partition(graph, placed.placement.device, parts));
  placed.partitions = std::move(partitions.graphs);
  placed.transfers = std::move(partitions.transfers);
  return placed;
}

namespace {

// Whether |device| has a kernel for |def|'s op and type attrs.
bool HasKernelFor(const RuntimeDevice& device, const NodeDef& def) {
  for (const weft_kernel_def_t* kernel : device.kernels().ForOp(def.op)) {
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

}  // namespace

bool FusedKernelEverywhere(const DeviceSet& devices, const placement::PlacementOptions& options, const NodeDef& node,
                           const NodeDef& fused) {
  std::string requested = node.device;
  for (const placement::Pin& pin : options.pins) {
    if (placement::GlobMatch(pin.pattern, node.name)) {
      requested = pin.device;
      break;
    }
  }
  std::optional<placement::DeviceSpec> spec;
  if (!requested.empty()) {
    auto parsed = placement::ParseDeviceSpec(requested);
    if (!parsed.ok()) return false;  // placement will say what is wrong with it
    spec = *parsed;
  }
  // The placer takes the first device type in the priority list among the
  // devices that can run the node (placer.h): those are where it may go.
  const std::vector<placement::PlacementDevice> described = PlacementDevices(devices);
  auto rank = [&](const std::string& type) {
    auto it = std::find(options.priority.begin(), options.priority.end(), type);
    return static_cast<std::size_t>(it - options.priority.begin());
  };
  std::vector<std::size_t> candidates;
  std::size_t best = SIZE_MAX;
  for (std::size_t d = 0; d < devices.devices().size(); ++d) {
    if (spec && !placement::SpecMatches(*spec, described[d])) continue;
    if (!HasKernelFor(*devices.devices()[d], node)) continue;
    candidates.push_back(d);
    best = std::min(best, rank(described[d].type));
  }
  if (candidates.empty()) return false;
  for (std::size_t d : candidates) {
    if (rank(described[d].type) == best && !HasKernelFor(*devices.devices()[d], fused)) return false;
  }
  return true;
}

placement::PlacementOptions PlacementOptionsFromConfig(const config::Config& config) {
  placement::PlacementOptions options;
  options.soft = config.placement.soft;
  if (!config.placement.priority.empty()) options.priority = config.placement.priority;
  for (const auto& pin : config.placement.pins) options.pins.push_back({pin.pattern, pin.device, pin.where, ""});
  return options;
}

}  // namespace weft::runtime
