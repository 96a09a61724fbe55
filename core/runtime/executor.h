// The executor runs one partition of a graph (the nodes of one signature on
// their devices) once per step.
//
// It is built once from the graph into an immutable plan: nodes packed in
// an array, their out-edges as index lists, pending counts precomputed, and
// a kernel per node. Each step gets fresh state: the input slots and
// pending counters. Ready nodes that are cheap run inline on the thread
// that made them ready; others go to the inter-op pool, except one, which
// the current thread keeps. Async kernels finish through a callback. The
// first error cancels the step and is returned naming node, op, device and
// cause.
//
// There is one executor and two propagators, the policy that says how a
// node's outputs reach its consumers (in the spirit of TensorFlow's
// ExecutorState and its propagator states). The step loop shared by both
// (executor_runner.h: running nodes inline or on the pool, async kernels,
// traces, failure and finish) is a template over the propagator:
// - the plain propagator (executor.cc) serves graphs without control
//   flow: one input slot per edge and lock-free pending counters;
// - the frame propagator (frame_propagator.cc) serves graphs with Switch,
//   Merge, Enter, Exit, NextIteration or LoopCond: each node belongs to a
//   frame (the root, or a loop), each frame instance runs iterations, each
//   with its own input slots and pending counts, and values may be dead.
// Graphs without control flow never touch the frame propagator, so they
// keep their lock-free propagation.
#ifndef WEFT_CORE_RUNTIME_EXECUTOR_H_
#define WEFT_CORE_RUNTIME_EXECUTOR_H_

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/base/thread_pool.h"
#include "core/graph/graph.h"
#include "core/runtime/op_kernel.h"
#include "core/runtime/trace.h"

namespace weft::runtime {

class Executor {
 public:
  // Creates (or returns the shared instance of) the kernel of a node.
  using KernelFactory =
      std::function<Expected<std::shared_ptr<OpKernel>>(const Graph&, const Graph::Node&, const RuntimeDevice&)>;

  // Creates the kernels of every node of |graph| on the device
  // |node_devices[node id]| with |factory|. |pool| runs nodes that are not
  // run inline and must outlive the executor.
  static Expected<std::unique_ptr<Executor>> Create(std::shared_ptr<const Graph> graph,
                                                    std::vector<const RuntimeDevice*> node_devices, ThreadPool* pool,
                                                    const KernelFactory& factory);
  ~Executor();

  // Runs one step and blocks until it is done (or its deadline passes:
  // then the step is cancelled). Safe to call concurrently.
  Status Run(StepInfo& step, TraceRecorder* trace) const;
  // Starts one step and returns; |done| is called once, from whichever
  // thread finishes the step's last node, with its status. |step| and
  // |trace| must outlive the call of |done|. The partitions of one step
  // run this way side by side.
  void RunAsync(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const;

  // While one lives on a thread, the executors run only cheap (inline)
  // nodes on that thread. Of the expensive nodes made ready there, all but
  // one go to the executor's pool as always, and the one the thread would
  // have kept goes to |elsewhere| (the executor's pool when null). A
  // transport's thread that delivers a pulled tensor sets one with the RPC
  // pool, whose thread it used to wake first
  // (core/distributed/remote_rendezvous.cc): cheap nodes go on at once,
  // expensive ones run where they ran before, and the connection's next
  // message never waits behind a kernel (docs/distributed-internals.md,
  // "A tensor's trip"). An executor without pool threads runs everything
  // on the calling thread regardless.
  class OnlyCheapNodesHere {
   public:
    explicit OnlyCheapNodesHere(ThreadPool* elsewhere);
    ~OnlyCheapNodesHere();
    OnlyCheapNodesHere(const OnlyCheapNodesHere&) = delete;
    OnlyCheapNodesHere& operator=(const OnlyCheapNodesHere&) = delete;
    static bool Active();
    // Where the node this thread would have kept goes: the guard's pool, or
    // |otherwise| (the executor's) when it named none.
    static ThreadPool* Elsewhere(ThreadPool* otherwise);

   private:
    ThreadPool* const elsewhere_;
    const OnlyCheapNodesHere* const previous_;  // the guard it hides, if any
  };

  const Graph& graph() const { return *graph_; }

 private:
  struct OutEdge {
    int output;     // -1 for a control edge
    int dst;        // consumer node
    int dst_slot;   // absolute input slot of the consumer
    bool last_use;  // the last edge of the node reading this output: it may take the value
  };
  // How the control-flow path treats a node.
  enum class Kind : uint8_t { kKernel, kSwitch, kMerge, kEnter, kExit, kNextIteration, kLoopCond };
  struct NodeItem {
    OpKernel* kernel = nullptr;
    const Graph::Node* node = nullptr;
    const RuntimeDevice* device = nullptr;
    int input_start = 0;
    int num_inputs = 0;
    int num_outputs = 0;
    int pending = 0;  // data + control inputs
    bool is_inline = false;
    bool is_async = false;
    std::vector<OutEdge> edges;
    // Control flow only.
    Kind kind = Kind::kKernel;
    bool is_constant = false;   // an Enter of a loop invariant
    int frame = 0;              // the static frame the node runs in
    int child_frame = -1;       // for an Enter: the frame it enters
    int local_id = 0;           // index among its frame's nodes
    int local_input_start = 0;  // first input slot in its frame's slots
    int merge_dead_needed = 0;  // for a Merge: dead inputs that make it dead
    bool cf_inline = false;     // run on the thread that made it ready
    bool is_send = false;       // a _Send: runs on a dead input too, to send it dead
  };
  // A loop of the graph (frame 0 is the root): what each of its instances
  // needs to start an iteration.
  struct StaticFrame {
    std::string name;
    int parent = -1;
    int parallel_iterations = 1;
    int num_enters = 0;                // Enter nodes feeding one instance
    std::vector<int> nodes;            // by local id
    std::vector<int> exits;            // Exit nodes
    int num_inputs = 0;                // input slots of one iteration
    std::vector<int> initial_pending;  // by local id (a Merge: its control inputs)
  };
  // The state of one step that both propagators share.
  struct StepBase;
  // The step loop, a template over the propagator (executor_runner.h).
  template <class Propagator>
  struct Runner;
  struct PlainPropagator;  // executor.cc
  struct FramePropagator;  // frame_propagator.cc

  Executor() = default;
  void RunPlain(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const;
  // Control flow (frame_propagator.cc): the frames of the plan, and a step
  // that runs with them.
  Status BuildFrames();
  void RunWithFrames(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const;

  std::vector<StaticFrame> frames_;
  bool has_control_flow_ = false;
  std::vector<Tensor> merge_index_values_;

  std::shared_ptr<const Graph> graph_;
  std::vector<NodeItem> items_;
  std::vector<std::shared_ptr<OpKernel>> kernels_;
  std::vector<int> roots_;
  int total_inputs_ = 0;
  ThreadPool* pool_ = nullptr;
};

// DEADLINE_EXCEEDED for |step|, naming it.
Status DeadlineStatus(const StepInfo& step);
// Cancels |step| because its deadline passed.
void CancelForDeadline(StepInfo& step);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_EXECUTOR_H_
