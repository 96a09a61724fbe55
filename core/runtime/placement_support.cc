#include "core/runtime/placement_support.h"

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

placement::PlacementOptions PlacementOptionsFromConfig(const config::Config& config) {
  placement::PlacementOptions options;
  options.soft = config.placement.soft;
  if (!config.placement.priority.empty()) options.priority = config.placement.priority;
  for (const auto& pin : config.placement.pins) options.pins.push_back({pin.pattern, pin.device, pin.where, ""});
  return options;
}

}  // namespace weft::runtime
