// Kernels as the executor sees them. A node's kernel is either provided by
// the runtime itself, for ops that only move or describe memory and so
// work on every device (Const, Identity, Reshape, Shape, the variable
// handle ops, feeds and fetches), or created from the device plugin's
// kernel definition (everything else) and called through the C ABI.
#ifndef WEFT_CORE_RUNTIME_OP_KERNEL_H_
#define WEFT_CORE_RUNTIME_OP_KERNEL_H_

#include <atomic>
#include <chrono>
#include <forward_list>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/graph/graph.h"
#include "core/plugin/host_services.h"
#include "core/runtime/cancellation.h"
#include "core/runtime/device_set.h"
#include "core/runtime/rendezvous.h"

namespace weft::runtime {

// For tests: when on, every output a kernel allocates in host-visible memory
// is first filled with the byte 0xA5, so an element a kernel leaves
// unwritten shows as a wrong value instead of a lucky zero (the edge-case
// suite runs every op this way). Off by default; costs a memset per output.
void SetPoisonOutputs(bool on);

// What one step shares with its kernels.
struct StepInfo {
  int64_t step_id = 0;
  // When the step (on this task) began: made with it.
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::atomic<bool> cancelled{false};
  // Feeds (for _Arg) and fetches (for _Retval), by index.
  const std::vector<Tensor>* args = nullptr;
  std::vector<Tensor>* retvals = nullptr;
  // Wakes kernels that wait (queue ops) when the step is cancelled.
  CancellationManager cancellation;
  // When set, the step is cancelled with DEADLINE_EXCEEDED at this time.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::atomic<bool> deadline_exceeded{false};
  // Where the step's _Send and _Recv nodes meet; null when the step runs
  // on one device.
  Rendezvous* rendezvous = nullptr;
  // The intra-op pool the step's kernels use (their session's); null: the
  // process's default.
  const plugin::IntraOpPool* intra_op = nullptr;
};

class OpKernelContext {
 public:
  OpKernelContext(const RuntimeDevice* device, const Graph::Node* node, const Tensor* inputs, int num_inputs,
                  Tensor* outputs, StepInfo* step)
      : device_(device), node_(node), inputs_(inputs), num_inputs_(num_inputs), outputs_(outputs), step_(step) {}
  ~OpKernelContext();
  OpKernelContext(const OpKernelContext&) = delete;
  OpKernelContext& operator=(const OpKernelContext&) = delete;

  const RuntimeDevice& device() const { return *device_; }
  const Graph::Node& node() const { return *node_; }
  StepInfo& step() const { return *step_; }
  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return node_->num_outputs(); }
  // The loop frame instance and iteration the node runs in (0 and 0
  // outside loops); _Send and _Recv put them in their rendezvous keys.
  int64_t frame_id() const { return frame_id_; }
  int64_t iteration() const { return iteration_; }
  void set_frame(int64_t frame_id, int64_t iteration) {
    frame_id_ = frame_id;
    iteration_ = iteration;
  }
  const Tensor& input(int i) const { return inputs_[i]; }
  Tensor& output(int i) { return outputs_[i]; }
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  // Dead values (control flow). The executor runs a _Send whose input is
  // dead with |input_dead| set, so that it sends a dead marker; a _Recv
  // that receives one sets |output_dead|, and the executor makes its
  // outputs dead. Other kernels never see either.
  bool input_dead() const { return input_dead_; }
  void set_input_dead(bool dead) { input_dead_ = dead; }
  bool output_dead() const { return output_dead_; }
  void set_output_dead(bool dead) { output_dead_ = dead; }

  // Allocates output |i| (dtype from the node's signature) on the device.
  Expected<Tensor*> AllocateOutput(int i, const Shape& shape);
  // Scratch memory kept until the context is destroyed.
  Expected<const Tensor*> AllocateTemp(DType dtype, const Shape& shape);

  // Locks the variable behind resource input |i| (see weft_kernel.h); an
  // exclusive lock first gives the variable a buffer of its own if a
  // reader still shares it (copy on write).
  Expected<Tensor*> LockVariable(int i, bool exclusive);

 private:
  struct HeldLock {
    Variable* variable = nullptr;
    std::shared_lock<std::shared_mutex> shared;
    std::unique_lock<std::shared_mutex> exclusive;
  };
  const RuntimeDevice* device_;
  const Graph::Node* node_;
  const Tensor* inputs_;
  int num_inputs_;
  Tensor* outputs_;
  StepInfo* step_;
  int64_t frame_id_ = 0;
  int64_t iteration_ = 0;
  bool input_dead_ = false;
  bool output_dead_ = false;
  // Stable addresses, and no allocation for a kernel that makes none
  // (a std::deque allocates when it is made).
  std::forward_list<Tensor> temps_;
  std::vector<std::unique_ptr<HeldLock>> locks_;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // Completes through a callback (ComputeAsync) rather than Compute.
  virtual bool IsAsync() const { return false; }
  // Cheap enough to run inline on the thread that made it ready.
  virtual bool IsInline() const { return false; }
  virtual Status Compute(OpKernelContext& ctx) = 0;
  virtual void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) { done(Compute(ctx)); }
};

// Outputs the same tensor every run: a Const's value, or a resource handle
// (variable, queue) made once when the kernel is created.
class ConstantKernel : public OpKernel {
 public:
  explicit ConstantKernel(Tensor value) : value_(std::move(value)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    ctx.set_output(0, value_);
    return Status();
  }

 private:
  Tensor value_;
};

// Creates the kernel of |node| on |device|: the runtime's own, or the
// device plugin's. An error when neither has one says which dtypes the
// device does have kernels for.
Expected<std::unique_ptr<OpKernel>> CreateKernel(const Graph& graph, const Graph::Node& node,
                                                 const RuntimeDevice& device);

// Whether |device| can run |node|, and at what cost, for placement: the
// runtime's own ops run everywhere; otherwise the device's plugin must
// have a kernel for the node's dtypes and, when it has a shape-aware
// query, accept the node's static shapes.
struct KernelSupport {
  bool supported = false;
  // Why not, when not: "OPENCL has no kernel for ArgMax with T=i64".
  std::string reason;
  double cost_ns = 0;  // 0: unknown
};
KernelSupport QueryKernelSupport(const Graph& graph, const Graph::Node& node, const RuntimeDevice& device);

// Whether the runtime itself implements |op| on every device.
bool IsRuntimeOp(std::string_view op);
// The ops the runtime implements, sorted.
std::vector<std::string> RuntimeOps();

// The host's kernel services (weft_host_t.kernel).
const weft_kernel_api_t* KernelApi();

// Makes a host table that offers kernel services, for processes that run
// graphs; plugins see it as weft_host_t.kernel.
void EnableKernelServices();

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_OP_KERNEL_H_
