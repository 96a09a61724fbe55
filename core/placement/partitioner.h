// The partitioner: cuts a placed graph into one graph per device. Every
// data edge between devices becomes a _Send on the producer's device and a
// _Recv on the consumer's — one pair per tensor per receiving device, however
// many consumers read it there — and every control edge between devices
// becomes a _Send/_Recv of a one-element tensor. The pieces run side by side
// as one step, each under its own executor, and meet in the step's
// rendezvous.
//
// A graph with loops or conds gets more (docs/graphs.md, "Loops and conds
// across devices and tasks"): every partition holding part of a loop frame
// gets a control loop of that frame (Enter/Merge/Switch/NextIteration/Exit
// on a bool, named "<frame>/_control_loop_<DEVICE>/..."), driven by the
// frame's LoopCond (sent to the other partitions once per iteration), and
// every _Recv inside a frame takes a control input from it; each _Recv is
// marked may_be_dead. A frame split across devices without exactly one
// LoopCond is INVALID_ARGUMENT naming the frame and the devices.
#ifndef WEFT_CORE_PLACEMENT_PARTITIONER_H_
#define WEFT_CORE_PLACEMENT_PARTITIONER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/graph/graph.h"

namespace weft::placement {

struct PartitionDevice {
  std::string name;
  uint64_t incarnation = 0;
};

// One cut edge.
struct Transfer {
  std::string tensor;  // "dense1/matmul:0", or "^dense1/init" for a control edge
  int src_device = 0;
  int dst_device = 0;
  std::string send_node;
  std::string recv_node;
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<std::string> consumers;  // on the receiving device
  // The type it travels in, when not |dtype| (PartitionOptions).
  DType wire_dtype = DType::kInvalid;
};

struct Partitions {
  // By device index (into the device list); devices with no node are absent.
  std::map<int, GraphDef> graphs;
  std::vector<Transfer> transfers;
};

struct PartitionOptions {
  // kBF16: an f32 tensor cut between the CPUs of two tasks ("/job:ps/task:0"
  // and "/job:worker/task:0") travels as bf16: a Cast to bf16 (round to
  // nearest even) feeds its _Send, and its consumers read a Cast back to
  // f32 of its _Recv, named as the _Recv would be ([cluster]
  // transfer_dtype). Left as they are: transfers within a task, to or from
  // another device than a CPU, of other types, of a value some Assign,
  // AssignAdd or AssignSub stores (initializers, restored checkpoints), and
  // of fewer than kMinNarrowedElements elements of known shape. kF32: none
  // is narrowed.
  DType transfer_f32_as = DType::kF32;
  // Late variable reads ([cluster] variable_reads = "late"; docs/distributed.md,
  // "When variables are read"). A ReadVariable's value cut to another task is,
  // by default, pulled as the step starts, with the partition's other
  // once-per-step pulls in one request. With this on, its _Recv waits instead
  // (a control input) for a node of the receiving partition that starts
  // |late_read_slack| ops before the value's first consumer there, as the
  // graph's longest path from its sources counts ops; the request goes out
  // on its own then, while those ops run. Left as they are: reads within a
  // task, reads inside loop frames, and reads needed within the first
  // |late_read_slack| ops. A node that a Switch may leave dead never holds a
  // _Recv back. Every added edge runs from a node to a _Recv whose consumers
  // all start later on that count, so no edge closes a cycle.
  bool late_variable_reads = false;
  int late_read_slack = 2;
};
inline constexpr int64_t kMinNarrowedElements = 1024;

// |device_of[node id]| indexes |devices|. Node device fields in the result
// are the exact device names.
Expected<Partitions> Partition(const Graph& graph, const std::vector<int>& device_of,
                               const std::vector<PartitionDevice>& devices, const PartitionOptions& options = {});

}  // namespace weft::placement

#endif  // WEFT_CORE_PLACEMENT_PARTITIONER_H_
