// Placement and partitioning over the devices of a process: the bridge
// between core/placement (which knows graphs and device descriptions) and
// the runtime's DeviceSet (which knows plugins and kernels).
//
//   WEFT_ASSIGN_OR_RETURN(PlacedGraph placed, PlaceAndPartition(graph, devices, options));
#ifndef WEFT_CORE_RUNTIME_PLACEMENT_SUPPORT_H_
#define WEFT_CORE_RUNTIME_PLACEMENT_SUPPORT_H_

#include <map>
#include <memory>
#include <vector>

#include "core/config/config.h"
#include "core/graph/graph.h"
#include "core/placement/partitioner.h"
#include "core/placement/placer.h"
#include "core/runtime/device_set.h"

namespace weft::runtime {

struct PlacedGraph {
  placement::Placement placement;             // by node id of the input graph
  std::vector<const RuntimeDevice*> devices;  // what placement indices refer to
  // One graph per device that runs something, with _Send/_Recv at the cuts.
  // Empty when the whole graph runs on one device.
  std::map<int, GraphDef> partitions;
  std::vector<placement::Transfer> transfers;
};

// Placement's view of |devices| (every device of a set: opening them all).
std::vector<placement::PlacementDevice> PlacementDevices(const std::vector<const RuntimeDevice*>& devices);
std::vector<placement::PlacementDevice> PlacementDevices(const DeviceSet& devices);
placement::SupportFn KernelSupportFn(std::vector<const RuntimeDevice*> devices);
placement::SupportFn KernelSupportFn(const DeviceSet& devices);

// Places |graph| on |devices| and cuts it where devices meet. A lazily
// opened set opens only the device types the graph's nodes may go to
// (each node's first type with its kernel, and what requests and pins
// name), and all of them when placing among those fails.
Expected<PlacedGraph> PlaceAndPartition(const Graph& graph, const DeviceSet& devices,
                                        const placement::PlacementOptions& options);

// Whether every device of |devices| that |node| would be placed on has a
// kernel for |fused| too: the devices its request or pin in |options|
// allows that have a kernel for |node|, of the first type in the priority
// list among them (as the placer chooses); false when none could run
// |node|. The graph optimizer's fusions ask this (passes::PassContext).
bool FusedKernelEverywhere(const DeviceSet& devices, const placement::PlacementOptions& options, const NodeDef& node,
                           const NodeDef& fused);

// The device |node| will be asked for under |options|: the first of its
// [placement.pins] that matches its name, else its own request.
std::string RequestedDevice(const placement::PlacementOptions& options, const NodeDef& node);

// [placement] of |config|.
placement::PlacementOptions PlacementOptionsFromConfig(const config::Config& config);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_PLACEMENT_SUPPORT_H_
