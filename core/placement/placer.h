// The placer: which device runs each node of a graph, and why.
//
// Nodes are grouped by union-find into colocation groups that must share
// a device: a node that takes a resource (a variable, a queue) joins the
// node that made it, and a node whose "_colocate" attr names other nodes
// joins them. A group can only go where every member has a kernel.
// Requests — the graph's device fields and the config's pins — narrow the
// choice; soft placement (the default) falls back, with a logged reason,
// when a request cannot be honoured, while kernels and colocation are
// hard: a group no device can run is an error that prints the whole chain
// of constraints. Among the devices left, the placer takes the first type
// in the priority list, then the device that already holds most of the
// group's inputs, then the lowest estimated cost (kernel cost hints plus
// the time to move the inputs at the device's bandwidth), then the lowest
// ordinal.
//
//   WEFT_ASSIGN_OR_RETURN(Placement p, Place(graph, devices, options));
//   p.device[node.id]   // index into |devices|
//   p.reason[node.id]   // "pinned by placement.pins \"dense1/*\""
#ifndef WEFT_CORE_PLACEMENT_PLACER_H_
#define WEFT_CORE_PLACEMENT_PLACER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"

namespace weft::placement {

// A device as placement sees it.
struct PlacementDevice {
  std::string name;  // "/device:CPU:0", or "/job:ps/task:0/device:CPU:0" in a cluster
  std::string type;  // "CPU"
  int ordinal = 0;
  double host_to_device_gbps = 0;  // 0: unknown
  double device_to_host_gbps = 0;
  bool host_visible = true;
  // In a cluster, the task the device belongs to; empty job for the
  // devices of one process.
  std::string job;
  int task = -1;
};

// Whether device |d| can run |node|: nullopt when it can, else why not.
// |cost_ns| is set to an estimate when one is known.
using SupportFn =
    std::function<std::optional<std::string>(const Graph& graph, const Graph::Node& node, int d, double* cost_ns)>;

// A config pin: nodes whose name matches |pattern| ('*' matches any run of
// characters) go to |device|.
struct Pin {
  std::string pattern;
  std::string device;
  std::string where;  // "train.toml:12:1", for messages
  // What placed it, when not the config: the reason `weft place --explain`
  // shows (else "pinned by placement.pins <pattern>").
  std::string source = {};
};

struct PlacementOptions {
  // Fall back when a requested device cannot run a node (logged); when
  // false, that is an error.
  bool soft = true;
  // Device types, most preferred first; types not listed come after, in
  // the order of the device list.
  std::vector<std::string> priority = {"CUDA", "HIP", "CPU", "OPENCL"};
  std::vector<Pin> pins;
  // Nodes that must go to an exact device (node name -> device name): the
  // stateful nodes an earlier step of a session placed, so that a variable
  // stays where its value is whatever a later step's requests say. A group
  // holding such a node goes there.
  std::map<std::string, std::string> fixed;
};

struct Placement {
  std::vector<int> device;          // by node id: index into the device list
  std::vector<std::string> reason;  // by node id
  // Lines soft placement logged ("fell back ...").
  std::vector<std::string> fallbacks;
};

// A parsed device spec: "/job:worker/task:1/device:CPU:0", "/device:OPENCL:*",
// "CPU:1", "/device:CPU". Empty type or ordinal -1 mean "any".
struct DeviceSpec {
  std::string job;
  int task = -1;
  std::string type;
  int ordinal = -1;
};
Expected<DeviceSpec> ParseDeviceSpec(std::string_view text);
bool SpecMatches(const DeviceSpec& spec, const PlacementDevice& device);

// Each pin's device parsed, or the first pin that does not parse or names
// no device of |devices| (naming the pin, where it was written and the
// devices there are). Place checks its pins with it; `weft config check`
// too, against the devices the configured plugins open.
Expected<std::vector<DeviceSpec>> CheckPins(const std::vector<Pin>& pins, const std::vector<PlacementDevice>& devices);

// Whether |name| matches |pattern|, where '*' matches any run of characters.
bool GlobMatch(std::string_view pattern, std::string_view name);

Expected<Placement> Place(const Graph& graph, const std::vector<PlacementDevice>& devices, const SupportFn& support,
                          const PlacementOptions& options);

}  // namespace weft::placement

#endif  // WEFT_CORE_PLACEMENT_PLACER_H_
