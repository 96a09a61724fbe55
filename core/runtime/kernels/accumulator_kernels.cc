#include "core/runtime/kernels/accumulator_kernels.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>

#include "core/runtime/accumulator.h"

namespace weft::runtime {
namespace {

const AttrValue& Attr(const Graph::Node& node, const char* name) { return node.def.attrs.find(name)->second; }

// The resource of type T behind resource input 0.
template <class T>
Expected<T*> InputResource(const OpKernelContext& ctx, std::string_view want) {
  Resource* resource = HandleResource(ctx.input(0));
  if (resource == nullptr) return InvalidArgumentError("input 0 is not a resource handle");
  auto* typed = dynamic_cast<T*>(resource);
  if (typed == nullptr) {
    return InvalidArgumentError("input 0 is a handle to the ", resource->kind(), " '", resource->name(), "'",
                                ", not to a ", want);
  }
  return typed;
}

// The i64 scalar of input |i|, named |what| in messages.
Expected<int64_t> ScalarInput(const OpKernelContext& ctx, int i, const char* what) {
  WEFT_ASSIGN_OR_RETURN(Tensor host, ctx.device().CopyToHost(ctx.input(i)));
  if (host.rank() != 0 || host.dtype() != DType::kI64) {
    return InvalidArgumentError(what, " must be an i64 scalar; got ", host.TypeString());
  }
  return host.scalar<int64_t>();
}

Status SetOutput(OpKernelContext& ctx, int i, Tensor host) {
  if (ctx.device().host_visible()) {
    ctx.set_output(i, std::move(host));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Tensor out, ctx.device().CopyFromHost(host));
  ctx.set_output(i, std::move(out));
  return Status();
}

std::string ResourceName(const Graph::Node& node) {
  std::string name = Attr(node, "shared_name").get<std::string>();
  return name.empty() ? node.name() : name;
}

Expected<std::unique_ptr<OpKernel>> CreateAccumulator(const Graph::Node& node, const RuntimeDevice& device) {
  AccumulatorSpec spec;
  spec.dtype = Attr(node, "dtype").get<DType>();
  spec.shape = Attr(node, "shape").get<Shape>();
  spec.replicas_to_aggregate = Attr(node, "replicas_to_aggregate").get<int64_t>();
  spec.variable = Attr(node, "variable").get<std::string>();
  WEFT_RETURN_IF_ERROR(ValidateAccumulatorSpec(spec));
  const std::string name = ResourceName(node);
  if (spec.variable.empty()) spec.variable = name;
  const bool create = Attr(node, "create").get<bool>();
  WEFT_ASSIGN_OR_RETURN(
      auto accumulator,
      device.resources().LookupOrCreate<GradientAccumulator>(
          Attr(node, "container").get<std::string>(), name, "gradient accumulator",
          [&]() -> Expected<std::shared_ptr<GradientAccumulator>> {
            if (!create) {
              return NotFoundError("there is no gradient accumulator for variable '", spec.variable, "' (",
                                   DTypeName(spec.dtype), spec.shape.ToString(), ") on ", device.name(),
                                   ": the chief's model has no such variable (is this worker's model the chief's?)");
            }
            return GradientAccumulator::Create(name, spec);
          },
          [&](const GradientAccumulator& existing) -> Status {
            const AccumulatorSpec& have = existing.spec();
            if (have.dtype == spec.dtype && have.shape == spec.shape &&
                have.replicas_to_aggregate == spec.replicas_to_aggregate) {
              return Status();
            }
            return InvalidArgumentError("gradient accumulator '", name, "' exists with ", have.ToString(),
                                        "; this node asks for ", spec.ToString(),
                                        " (do the workers' models and training.replicas_to_aggregate agree?)");
          }));
  return std::unique_ptr<OpKernel>(new ConstantKernel(MakeResourceHandle(std::move(accumulator))));
}

class ApplyKernel : public OpKernel {
 public:
  ApplyKernel(int64_t replica, std::string replica_name) : replica_(replica), replica_name_(std::move(replica_name)) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(GradientAccumulator * acc, InputResource<GradientAccumulator>(ctx, "gradient accumulator"));
    WEFT_ASSIGN_OR_RETURN(int64_t local_step, ScalarInput(ctx, 1, "local_step"));
    WEFT_ASSIGN_OR_RETURN(Tensor gradient, ctx.device().CopyToHost(ctx.input(2)));
    WEFT_ASSIGN_OR_RETURN(bool accepted, acc->Apply(local_step, replica_, replica_name_, gradient));
    return SetOutput(ctx, 0, Tensor::Scalar<bool>(accepted));
  }

 private:
  int64_t replica_;
  std::string replica_name_;
};

class TakeKernel : public OpKernel {
 public:
  TakeKernel(int64_t timeout_ms, std::vector<std::string> replica_names)
      : timeout_ms_(timeout_ms), replica_names_(std::move(replica_names)) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("AccumulatorTakeGradient runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto acc = InputResource<GradientAccumulator>(ctx, "gradient accumulator");
    if (!acc.ok()) return done(acc.status());
    if ((*acc)->spec().dtype != ctx.node().output_types[0]) {
      return done(InvalidArgumentError("this node takes ", DTypeName(ctx.node().output_types[0]), " but ",
                                       (*acc)->kind(), " '", (*acc)->name(), "' holds ",
                                       DTypeName((*acc)->spec().dtype)));
    }
    OpKernelContext* c = &ctx;
    // |ctx| and the handle input (which keeps the accumulator alive) last
    // until |done|.
    (*acc)->Take(timeout_ms_, replica_names_, &ctx.step().cancellation,
                 [c, done = std::move(done)](Status status, GradientAccumulator::Taken taken) {
                   if (status.ok()) status = SetOutput(*c, 0, std::move(taken.average));
                   if (status.ok()) status = SetOutput(*c, 1, Tensor::Scalar<int64_t>(taken.aggregated));
                   if (status.ok()) status = SetOutput(*c, 2, Tensor::Scalar<int64_t>(taken.stale));
                   if (status.ok()) status = SetOutput(*c, 3, Tensor::Scalar<int64_t>(taken.late));
                   done(status);
                 });
  }

 private:
  int64_t timeout_ms_;
  std::vector<std::string> replica_names_;
};

class SetGlobalStepKernel : public OpKernel {
 public:
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(GradientAccumulator * acc, InputResource<GradientAccumulator>(ctx, "gradient accumulator"));
    WEFT_ASSIGN_OR_RETURN(int64_t step, ScalarInput(ctx, 1, "step"));
    if (step < 0) return InvalidArgumentError("step is ", step, "; it must be >= 0");
    acc->SetGlobalStep(step);
    return Status();
  }
};

Expected<std::unique_ptr<OpKernel>> CreateTokenQueue(const Graph::Node& node, const RuntimeDevice& device) {
  const std::string name = ResourceName(node);
  WEFT_ASSIGN_OR_RETURN(
      auto queue, device.resources().LookupOrCreate<StepTokenQueue>(
                      Attr(node, "container").get<std::string>(), name, "step token queue",
                      [&]() -> Expected<std::shared_ptr<StepTokenQueue>> { return StepTokenQueue::Create(name); }));
  return std::unique_ptr<OpKernel>(new ConstantKernel(MakeResourceHandle(std::move(queue))));
}

class PutKernel : public OpKernel {
 public:
  explicit PutKernel(bool reset) : reset_(reset) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(StepTokenQueue * queue, InputResource<StepTokenQueue>(ctx, "step token queue"));
    WEFT_ASSIGN_OR_RETURN(int64_t step, ScalarInput(ctx, 1, "step"));
    if (step < 0) return InvalidArgumentError("step is ", step, "; it must be >= 0");
    queue->Put(step, reset_);
    return Status();
  }

 private:
  bool reset_;
};

class TokenTakeKernel : public OpKernel {
 public:
  TokenTakeKernel(int64_t timeout_ms, bool wait_open) : timeout_ms_(timeout_ms), wait_open_(wait_open) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("StepTokenTake runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    auto queue = InputResource<StepTokenQueue>(ctx, "step token queue");
    if (!queue.ok()) return done(queue.status());
    auto local_step = ScalarInput(ctx, 1, "local_step");
    if (!local_step.ok()) return done(local_step.status());
    OpKernelContext* c = &ctx;
    (*queue)->Take(
        *local_step, timeout_ms_, &ctx.step().cancellation,
        [c, done = std::move(done)](Status status, int64_t step) {
          if (status.ok()) status = SetOutput(*c, 0, Tensor::Scalar<int64_t>(step));
          done(status);
        },
        wait_open_);
  }

 private:
  int64_t timeout_ms_;
  bool wait_open_;
};

class CloseKernel : public OpKernel {
 public:
  explicit CloseKernel(bool aborted) : aborted_(aborted) {}
  bool IsInline() const override { return true; }
  Status Compute(OpKernelContext& ctx) override {
    WEFT_ASSIGN_OR_RETURN(StepTokenQueue * queue, InputResource<StepTokenQueue>(ctx, "step token queue"));
    queue->Close(aborted_);
    return Status();
  }

 private:
  bool aborted_;
};

// _TestDelay: a straggler for tests. The step's work so far (reading the
// parameters, the forward and backward passes) took now - start; waiting
// (factor - 1) times that makes it take factor times as long.
class TestDelayKernel : public OpKernel {
 public:
  explicit TestDelayKernel(double factor) : factor_(factor) {}
  bool IsAsync() const override { return true; }
  Status Compute(OpKernelContext&) override { return InternalError("_TestDelay runs asynchronously"); }
  void ComputeAsync(OpKernelContext& ctx, std::function<void(Status)> done) override {
    for (int i = 0; i < ctx.num_inputs(); ++i) ctx.set_output(i, ctx.input(i));
    const auto elapsed = std::chrono::steady_clock::now() - ctx.step().start;
    const auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(elapsed * (factor_ - 1.0));
    if (wait <= std::chrono::steady_clock::duration::zero()) return done(Status());
    // Whichever comes first, the time or the step's cancellation, finishes.
    struct Once {
      std::atomic<bool> fired{false};
      std::function<void(Status)> done;
      CancellationManager::Token token = CancellationManager::kInvalidToken;
      std::atomic<Timer::Id> timer{Timer::kInvalidId};
    };
    auto once = std::make_shared<Once>();
    once->done = std::move(done);
    CancellationManager* cancellation = &ctx.step().cancellation;
    once->token = cancellation->Register([once] {
      if (once->fired.exchange(true)) return;
      const Timer::Id timer = once->timer.load();
      if (timer != Timer::kInvalidId) Timer::Global().Cancel(timer);
      once->done(Status(Code::kCancelled, "the step was cancelled"));
    });
    if (once->token == CancellationManager::kInvalidToken) {
      if (!once->fired.exchange(true)) once->done(Status(Code::kCancelled, "the step was cancelled"));
      return;
    }
    once->timer = Timer::Global().Schedule(std::chrono::steady_clock::now() + wait, [once, cancellation] {
      if (once->fired.exchange(true)) return;
      cancellation->Deregister(once->token);
      once->done(Status());
    });
  }

 private:
  double factor_;
};

Expected<int64_t> TimeoutAttr(const Graph::Node& node) {
  const int64_t ms = Attr(node, "timeout_ms").get<int64_t>();
  if (ms < 0) return InvalidArgumentError("timeout_ms is ", ms, "; it must be >= 0 (0: no limit)");
  return ms;
}

constexpr std::array<std::string_view, 9> kAccumulatorOps = {"AccumulatorApplyGradient",
                                                             "AccumulatorSetGlobalStep",
                                                             "AccumulatorTakeGradient",
                                                             "GradientAccumulator",
                                                             "StepTokenClose",
                                                             "StepTokenPut",
                                                             "StepTokenQueue",
                                                             "StepTokenTake",
                                                             "_TestDelay"};

}  // namespace

bool IsAccumulatorOp(std::string_view op) {
  return std::find(kAccumulatorOps.begin(), kAccumulatorOps.end(), op) != kAccumulatorOps.end();
}

Expected<std::unique_ptr<OpKernel>> CreateAccumulatorKernel(const Graph::Node& node, const RuntimeDevice& device) {
  const std::string& op = node.op_name();
  if (op == "GradientAccumulator") return CreateAccumulator(node, device);
  if (op == "AccumulatorApplyGradient") {
    const int64_t replica = Attr(node, "replica").get<int64_t>();
    if (replica < 0) return InvalidArgumentError("replica is ", replica, "; it must be >= 0");
    return std::unique_ptr<OpKernel>(new ApplyKernel(replica, Attr(node, "replica_name").get<std::string>()));
  }
  if (op == "AccumulatorTakeGradient") {
    WEFT_ASSIGN_OR_RETURN(int64_t timeout_ms, TimeoutAttr(node));
    return std::unique_ptr<OpKernel>(
        new TakeKernel(timeout_ms, Attr(node, "replica_names").get<std::vector<std::string>>()));
  }
  if (op == "AccumulatorSetGlobalStep") return std::unique_ptr<OpKernel>(new SetGlobalStepKernel());
  if (op == "StepTokenQueue") return CreateTokenQueue(node, device);
  if (op == "StepTokenPut") return std::unique_ptr<OpKernel>(new PutKernel(Attr(node, "reset").get<bool>()));
  if (op == "StepTokenTake") {
    WEFT_ASSIGN_OR_RETURN(int64_t timeout_ms, TimeoutAttr(node));
    return std::unique_ptr<OpKernel>(new TokenTakeKernel(timeout_ms, Attr(node, "wait_open").get<bool>()));
  }
  if (op == "StepTokenClose") return std::unique_ptr<OpKernel>(new CloseKernel(Attr(node, "aborted").get<bool>()));
  if (op == "_TestDelay") return std::unique_ptr<OpKernel>(new TestDelayKernel(Attr(node, "factor").get<double>()));
  return InternalError("no accumulator kernel for ", op);
}

}  // namespace weft::runtime
