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
// Loops (the control-flow issue) will add frames and iterations to the
// per-step state; the plan already keeps per-node input slots relative to a
// base, so an iteration is one more set of slots.
#ifndef WEFT_CORE_RUNTIME_EXECUTOR_H_
#define WEFT_CORE_RUNTIME_EXECUTOR_H_

#include <functional>
#include <memory>
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
                                                    std::vector<const RuntimeDevice*> node_devices,
                                                    ThreadPool* pool, const KernelFactory& factory);
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
  };
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
  };
  struct StepState;

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
