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
// Graphs with control flow (Switch, Merge, Enter, Exit, NextIteration,
// LoopCond) run on a second path (control_flow_executor.cc): each node
// belongs to a frame (the root, or a loop), each frame instance runs
// iterations, each with its own input slots and pending counts, and values
// may be dead. Graphs without control flow never touch that path, so the
// plain one keeps its lock-free propagation.
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
  struct StepState;
  struct CfStep;
  struct Frame;
  struct Iteration;
  struct TaggedNode;
  struct Propagator;

  Executor() = default;
  // Runs the nodes of |stack| and whatever they make ready that stays on
  // this thread; accounts for one unit of the step's outstanding work.
  void Process(StepState* state, std::vector<int> stack) const;
  // Runs |id| (synchronous kernels), propagates its outputs, and appends the
  // nodes that became ready to |ready|. False on error.
  bool RunNode(StepState* state, int id, std::vector<int>* ready) const;
  void Propagate(StepState* state, int id, std::vector<Tensor>& outputs, std::vector<int>* ready) const;
  // Runs some of |ready| here (via |stack|) and sends the others to the pool.
  void Dispatch(StepState* state, std::vector<int>& ready, std::vector<int>* stack) const;
  void Fail(StepState* state, int id, const Status& status) const;
  void Finish(StepState* state) const;

  // Control flow (control_flow_executor.cc).
  Status BuildFrames();
  void RunWithFrames(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const;
  void CfProcess(CfStep* state, std::vector<TaggedNode> stack) const;
  // True when it sent some of |ready| to the pool.
  bool CfDispatch(CfStep* state, std::vector<TaggedNode>& ready, std::vector<TaggedNode>* stack) const;
  // Runs |node| (not dead, not async) and propagates; false on error.
  // |lock| is on the step's mutex, held or not on entry; it is held on
  // return, so that a run of control-flow nodes takes the mutex once.
  bool CfRunNode(CfStep* state, const TaggedNode& node, std::vector<TaggedNode>* ready,
                 std::unique_lock<std::mutex>& lock) const;
  // Propagates the outputs of |node| and retires it; called with the
  // outputs (and, for dead nodes, none).
  void CfPropagate(CfStep* state, const TaggedNode& node, Tensor* outputs, const bool* output_dead,
                   std::vector<TaggedNode>* ready) const;
  void CfFail(CfStep* state, const TaggedNode& node, const Status& status) const;
  void CfFinish(CfStep* state) const;

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
