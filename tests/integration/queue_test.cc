// Queues as resources (core/runtime/queue.h, core/ops/data_flow_ops.cc) on
// the CPU device, through Session::Run: FIFO order, capacity back-pressure
// and close semantics with producer and consumer steps on real threads,
// the random-shuffle queue's seeded order (against
// tests/unit/data/shuffle_reference.py), cancellation of waiting steps,
// and every error with its message.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/runtime/queue.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::RuntimeEnv;
using testing::Values;

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

// A queue of (f32 [2], i64 []) elements with enqueue "enq" (fed "x" f32
// [n,2] and "y" i64 [n]), dequeue "deq" (fed "n"), "close", "close_cancel"
// and "size".
struct PairQueue {
  explicit PairQueue(int64_t capacity, const std::string& op = "FIFOQueue", AttrMap extra = {}) {
    AttrMap attrs = {{"component_types", AttrValue(std::vector<DType>{DType::kF32, DType::kI64})},
                     {"shapes", AttrValue(std::vector<Shape>{Shape{2}, Shape{}})},
                     {"capacity", AttrValue(capacity)}};
    attrs.insert(extra.begin(), extra.end());
    Output q = b.Op(op, {}, attrs, "q");
    Output x = b.Placeholder(DType::kF32, Shape{-1, 2}, "x");
    Output y = b.Placeholder(DType::kI64, Shape{-1}, "y");
    b.Op("QueueEnqueueMany", {q, x, y}, {}, "enq");
    Output n = b.Placeholder(DType::kI32, Shape{}, "n");
    b.AddNode("QueueDequeueMany", {q, n},
              {{"component_types", AttrValue(std::vector<DType>{DType::kF32, DType::kI64})}}, "deq");
    b.Op("QueueClose", {q}, {}, "close");
    b.Op("QueueClose", {q}, {{"cancel_pending_enqueues", AttrValue(true)}}, "close_cancel");
    b.Op("QueueSize", {q}, {}, "size");
    session = env.Session(b);
  }

  // Enqueues elements with labels |labels|; element k's features are
  // {10 k, 10 k + 1}.
  Status Enqueue(const std::vector<int64_t>& labels) {
    std::vector<float> x;
    for (int64_t k : labels) {
      x.push_back(static_cast<float>(10 * k));
      x.push_back(static_cast<float>(10 * k + 1));
    }
    return session->Run({{"x", Tensor::FromVector<float>(x, Shape{static_cast<int64_t>(labels.size()), 2})},
                         {"y", Tensor::FromVector<int64_t>(labels)}},
                        {}, {"enq"}, nullptr);
  }
  // Dequeues |n| elements, returning their labels (and checking features).
  Expected<std::vector<int64_t>> Dequeue(int32_t n, const runtime::RunOptions& options = {}) {
    std::vector<Tensor> out;
    WEFT_RETURN_IF_ERROR(session->Run({{"n", Tensor::Scalar<int32_t>(n)}}, {"deq:0", "deq:1"}, {}, &out, options));
    EXPECT_EQ(out[0].TypeString(), StrCat("f32[", n, ",2]"));
    std::vector<int64_t> labels = Values<int64_t>(out[1]);
    const std::vector<float> x = Values<float>(out[0]);
    for (std::size_t i = 0; i < labels.size(); ++i) {
      EXPECT_EQ(x[2 * i], static_cast<float>(10 * labels[i]));
      EXPECT_EQ(x[2 * i + 1], static_cast<float>(10 * labels[i] + 1));
    }
    return labels;
  }
  int32_t Size() {
    std::vector<Tensor> out;
    Status s = session->Run({}, {"size"}, {}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() ? out[0].scalar<int32_t>() : -1;
  }
  Status Close(bool cancel = false) { return session->Run({}, {}, {cancel ? "close_cancel" : "close"}, nullptr); }
  // Waits (without a time limit) until the queue holds |n| elements.
  void AwaitSize(int32_t n) {
    while (Size() != n) std::this_thread::yield();
  }

  RuntimeEnv env;
  GraphBuilder b;
  std::unique_ptr<runtime::Session> session;
};

TEST(FIFOQueue, DequeuesInEnqueueOrder) {
  PairQueue q(-1);
  ASSERT_TRUE(q.Enqueue({0, 1, 2, 3}).ok());
  ASSERT_TRUE(q.Enqueue({4}).ok());
  EXPECT_EQ(q.Size(), 5);
  auto first = q.Dequeue(3);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(q.Size(), 2);
  auto none = q.Dequeue(0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(*q.Dequeue(2), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(q.Size(), 0);
}

TEST(FIFOQueue, ClosedQueueDrainsThenSignalsOutOfRange) {
  PairQueue q(-1);
  ASSERT_TRUE(q.Enqueue(Range(0, 13)).ok());
  ASSERT_TRUE(q.Close().ok());
  EXPECT_EQ(*q.Dequeue(10), Range(0, 10));
  auto end = q.Dequeue(10);
  EXPECT_EQ(end.status().code(), Code::kOutOfRange);
  EXPECT_EQ(end.status().message(),
            "node 'deq' (QueueDequeueMany) on /device:CPU:0: queue 'q' is closed and has 3 elements, fewer than the "
            "10 requested");
  // The failed dequeue took nothing.
  EXPECT_EQ(q.Size(), 3);
  EXPECT_EQ(*q.Dequeue(3), Range(10, 13));
  EXPECT_EQ(q.Dequeue(1).status().message(),
            "node 'deq' (QueueDequeueMany) on /device:CPU:0: queue 'q' is closed and has 0 elements, fewer than the "
            "1 requested");
  Status late = q.Enqueue({99});
  EXPECT_EQ(late.code(), Code::kCancelled);
  EXPECT_EQ(late.message(),
            "node 'enq' (QueueEnqueueMany) on /device:CPU:0: queue 'q' is closed; nothing more can be "
            "enqueued");
  ASSERT_TRUE(q.Close().ok());  // closing again is fine
}

TEST(FIFOQueue, ProducerAndConsumerStepsOnTwoThreads) {
  // 100 elements through a queue of capacity 4, in batches of 3 in and 5 out.
  PairQueue q(4);
  std::vector<int64_t> received;
  std::atomic<int> max_size{0};
  std::thread consumer([&] {
    for (int i = 0; i < 20; ++i) {
      auto got = q.Dequeue(5);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      received.insert(received.end(), got->begin(), got->end());
    }
  });
  std::thread producer([&] {
    for (int64_t start = 0; start < 100; start += 3) {
      Status s = q.Enqueue(Range(start, std::min<int64_t>(start + 3, 100)));
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  });
  // Meanwhile the queue never holds more than its capacity.
  std::thread watcher([&] {
    for (int i = 0; i < 200; ++i) max_size = std::max(max_size.load(), q.Size());
  });
  producer.join();
  consumer.join();
  watcher.join();
  EXPECT_EQ(received, Range(0, 100));
  EXPECT_LE(max_size.load(), 4);
  EXPECT_EQ(q.Size(), 0);
}

TEST(FIFOQueue, FullQueueHoldsBackTheEnqueueingStep) {
  PairQueue q(2);
  std::atomic<bool> done{false};
  Status status;
  std::thread producer([&] {
    status = q.Enqueue(Range(0, 5));
    done = true;
  });
  // Two elements fit; the step waits for room for the other three.
  q.AwaitSize(2);
  EXPECT_FALSE(done.load());
  EXPECT_EQ(*q.Dequeue(2), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(*q.Dequeue(3), (std::vector<int64_t>{2, 3, 4}));
  producer.join();
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(status.ok()) << status.ToString();
}

TEST(FIFOQueue, DequeueLargerThanCapacityCompletes) {
  // Capacity 2, dequeue 5: it takes elements as they come.
  PairQueue q(2);
  Expected<std::vector<int64_t>> got = InvalidArgumentError("not run");
  std::thread consumer([&] { got = q.Dequeue(5); });
  for (int64_t k = 0; k < 5; ++k) ASSERT_TRUE(q.Enqueue({k}).ok());
  consumer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, Range(0, 5));
}

TEST(FIFOQueue, CloseWakesAWaitingDequeueWithOutOfRange) {
  PairQueue q(-1);
  ASSERT_TRUE(q.Enqueue({7, 8}).ok());
  Expected<std::vector<int64_t>> got = InvalidArgumentError("not run");
  std::thread consumer([&] { got = q.Dequeue(5); });
  // The consumer takes both elements while it waits for three more.
  q.AwaitSize(0);
  ASSERT_TRUE(q.Close().ok());
  consumer.join();
  EXPECT_EQ(got.status().code(), Code::kOutOfRange);
  EXPECT_EQ(got.status().message(),
            "node 'deq' (QueueDequeueMany) on /device:CPU:0: queue 'q' is closed and has 2 elements, fewer than the "
            "5 requested");
  // What it had taken went back, in order.
  EXPECT_EQ(q.Size(), 2);
  EXPECT_EQ(*q.Dequeue(2), (std::vector<int64_t>{7, 8}));
}

TEST(FIFOQueue, CloseLetsOrCancelsPendingEnqueues) {
  {
    PairQueue q(2);
    Status status;
    std::thread producer([&] { status = q.Enqueue(Range(0, 5)); });
    q.AwaitSize(2);
    ASSERT_TRUE(q.Close(/*cancel=*/true).ok());
    producer.join();
    EXPECT_EQ(status.code(), Code::kCancelled);
    EXPECT_EQ(status.message(),
              "node 'enq' (QueueEnqueueMany) on /device:CPU:0: enqueue into queue 'q' was "
              "cancelled when the queue was closed (2 of 5 elements are in)");
    EXPECT_EQ(*q.Dequeue(2), (std::vector<int64_t>{0, 1}));
  }
  {
    PairQueue q(2);
    Status status;
    std::thread producer([&] { status = q.Enqueue(Range(0, 5)); });
    q.AwaitSize(2);
    ASSERT_TRUE(q.Close(/*cancel=*/false).ok());
    // The pending enqueue still finishes as room appears.
    EXPECT_EQ(*q.Dequeue(5), Range(0, 5));
    producer.join();
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(q.Dequeue(1).status().code(), Code::kOutOfRange);
  }
}

TEST(FIFOQueue, FailingStepWakesItsWaitingDequeue) {
  // One step: a dequeue from an empty queue, and a node that fails. The
  // failure cancels the step, which must wake the parked dequeue.
  RuntimeEnv env;
  GraphBuilder b;
  b.Placeholder(DType::kF32, Shape{}, "unfed");
  Output q = b.Op("FIFOQueue", {}, {{"component_types", AttrValue(std::vector<DType>{DType::kI32})}}, "q");
  b.AddNode("QueueDequeueMany", {q, b.Scalar<int32_t>(2)},
            {{"component_types", AttrValue(std::vector<DType>{DType::kI32})}}, "deq");
  b.Op("QueueEnqueueMany", {q, b.Const(Tensor::FromVector<int32_t>({5, 6}))}, {}, "enq");
  b.Op("QueueSize", {q}, {}, "size");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({}, {"unfed", "deq"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'unfed' (Placeholder) on /device:CPU:0: Placeholder 'unfed' was not fed; give it a value "
            "(weft run --feed unfed=FILE.npy, or a feed in Session::Run)");
  // No dequeue is left waiting to take what comes next.
  ASSERT_TRUE(session->Run({}, {}, {"enq"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"size"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int32_t>(), 2);
  ASSERT_TRUE(session->Run({}, {"deq"}, {}, &out).ok());
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{5, 6}));
}

TEST(FIFOQueue, DeadlineCancelsAWaitingDequeue) {
  PairQueue q(-1);
  runtime::RunOptions options;
  options.timeout_ms = 20;
  auto got = q.Dequeue(1, options);
  EXPECT_EQ(got.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(
      got.status().message().find("did not finish before its deadline (RunOptions::timeout_ms) and was cancelled"),
      std::string::npos)
      << got.status().message();
  ASSERT_TRUE(q.Enqueue({3}).ok());
  EXPECT_EQ(q.Size(), 1);
  EXPECT_EQ(*q.Dequeue(1), (std::vector<int64_t>{3}));
}

// --- RandomShuffleQueue -------------------------------------------------------------

std::vector<int32_t> ShuffleOnce(int64_t seed, int64_t seed2, int32_t n) {
  RuntimeEnv env;
  GraphBuilder b;
  Output q = b.Op("RandomShuffleQueue", {},
                  {{"component_types", AttrValue(std::vector<DType>{DType::kI32})},
                   {"seed", AttrValue(seed)},
                   {"seed2", AttrValue(seed2)}},
                  "q");
  std::vector<int32_t> values;
  for (int32_t i = 0; i < n; ++i) values.push_back(i);
  b.Op("QueueEnqueueMany", {q, b.Const(Tensor::FromVector<int32_t>(values))}, {}, "enq");
  b.Op("QueueClose", {q}, {}, "close");
  b.AddNode("QueueDequeueMany", {q, b.Scalar<int32_t>(n)},
            {{"component_types", AttrValue(std::vector<DType>{DType::kI32})}}, "deq");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  EXPECT_TRUE(session->Run({}, {}, {"enq"}, nullptr).ok());
  EXPECT_TRUE(session->Run({}, {}, {"close"}, nullptr).ok());
  Status s = session->Run({}, {"deq"}, {}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? Values<int32_t>(out[0]) : std::vector<int32_t>{};
}

TEST(RandomShuffleQueue, OrderIsFixedByTheSeed) {
  // tests/unit/data/shuffle_reference.py: shuffle_queue_order(8, 5, 0).
  EXPECT_EQ(ShuffleOnce(5, 0, 8), (std::vector<int32_t>{0, 1, 5, 3, 2, 4, 6, 7}));
  EXPECT_EQ(ShuffleOnce(5, 0, 8), ShuffleOnce(5, 0, 8));
  std::vector<int32_t> other = ShuffleOnce(6, 0, 32);
  EXPECT_NE(other, ShuffleOnce(5, 0, 32));
  std::sort(other.begin(), other.end());
  std::vector<int32_t> all(32);
  for (int32_t i = 0; i < 32; ++i) all[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(other, all);
  // Unseeded queues take their seed from their name: the same every run.
  EXPECT_EQ(ShuffleOnce(0, 0, 16), ShuffleOnce(0, 0, 16));
}

TEST(RandomShuffleQueue, KeepsMinAfterDequeueUntilClosed) {
  PairQueue q(-1, "RandomShuffleQueue",
              {{"min_after_dequeue", AttrValue(int64_t{3})}, {"seed", AttrValue(int64_t{1})}});
  ASSERT_TRUE(q.Enqueue(Range(0, 4)).ok());
  Expected<std::vector<int64_t>> got = InvalidArgumentError("not run");
  std::thread consumer([&] { got = q.Dequeue(2); });
  // It takes one element (4 > 3 remain), then waits to keep 3 behind.
  q.AwaitSize(3);
  ASSERT_TRUE(q.Enqueue({4}).ok());
  consumer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->size(), 2u);
  EXPECT_EQ(q.Size(), 3);
  // Closed, it gives up the last three.
  ASSERT_TRUE(q.Close().ok());
  auto rest = q.Dequeue(3);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  std::vector<int64_t> all = *got;
  all.insert(all.end(), rest->begin(), rest->end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Range(0, 5));
}

// --- Errors ---------------------------------------------------------------------------

TEST(QueueErrors, MismatchedComponentsAreErrorsNamingTheQueue) {
  PairQueue q(-1);
  auto run_enqueue = [&](const Tensor& x, const Tensor& y) {
    return q.session->Run({{"x", x}, {"y", y}}, {}, {"enq"}, nullptr);
  };
  // Shapes: features must be [n,2].
  EXPECT_EQ(run_enqueue(*Tensor::Zeros(DType::kF32, Shape{3, 3}), Tensor::FromVector<int64_t>({1, 2, 3})).message(),
            "feed \"x\" has shape [3,3]; the graph expects [?,2]");
  // Different numbers of elements.
  EXPECT_EQ(run_enqueue(*Tensor::Zeros(DType::kF32, Shape{3, 2}), Tensor::FromVector<int64_t>({1, 2})).message(),
            "node 'enq' (QueueEnqueueMany) on /device:CPU:0: the components hold different numbers of elements: 3 "
            "in component 0, 2 in component 1");

  // A second graph on the same device uses queue 'q' with other inputs.
  GraphBuilder b;
  Output handle = b.Op("FIFOQueue", {},
                       {{"component_types", AttrValue(std::vector<DType>{DType::kF32, DType::kI64})},
                        {"shapes", AttrValue(std::vector<Shape>{Shape{2}, Shape{}})}},
                       "q");
  b.Op("QueueEnqueueMany", {handle, b.Const(*Tensor::Zeros(DType::kF32, Shape{1, 2}))}, {}, "one_component");
  b.Op("QueueEnqueueMany",
       {handle, b.Const(*Tensor::Zeros(DType::kF32, Shape{1, 2})), b.Const(*Tensor::Zeros(DType::kI32, Shape{1}))}, {},
       "wrong_dtype");
  b.Op("QueueEnqueueMany",
       {handle, b.Const(*Tensor::Zeros(DType::kF32, Shape{1, 3})), b.Const(*Tensor::Zeros(DType::kI64, Shape{1}))}, {},
       "wrong_shape");
  b.AddNode("QueueDequeueMany", {handle, b.Scalar<int32_t>(1)},
            {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "wrong_dequeue");
  b.AddNode("QueueDequeueMany", {handle, b.Scalar<int32_t>(-1)},
            {{"component_types", AttrValue(std::vector<DType>{DType::kF32, DType::kI64})}}, "negative");
  auto session = q.env.Session(b);
  auto message = [&](const std::string& target) { return session->Run({}, {}, {target}, nullptr).message(); };
  EXPECT_EQ(message("one_component"),
            "node 'one_component' (QueueEnqueueMany) on /device:CPU:0: queue 'q' has 2 "
            "components [f32, i64]; 1 was given");
  EXPECT_EQ(message("wrong_dtype"),
            "node 'wrong_dtype' (QueueEnqueueMany) on /device:CPU:0: component 1 of queue 'q' "
            "is i64; got i32[1]");
  EXPECT_EQ(message("wrong_shape"),
            "node 'wrong_shape' (QueueEnqueueMany) on /device:CPU:0: component 0 of an element "
            "of queue 'q' has shape [2]; got elements of shape [3] (from f32[1,3])");
  EXPECT_EQ(message("wrong_dequeue"),
            "node 'wrong_dequeue' (QueueDequeueMany) on /device:CPU:0: this node dequeues "
            "[f32] but queue 'q' holds [f32, i64]");
  EXPECT_EQ(message("negative"),
            "node 'negative' (QueueDequeueMany) on /device:CPU:0: cannot dequeue -1 elements from "
            "queue 'q'");
  EXPECT_EQ(q.Size(), 0);
}

TEST(QueueErrors, FirstEnqueueFixesUnspecifiedShapes) {
  RuntimeEnv env;
  GraphBuilder b;
  Output q = b.Op("FIFOQueue", {}, {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "free");
  b.Op("QueueEnqueueMany", {q, b.Const(*Tensor::Zeros(DType::kF32, Shape{2, 3}))}, {}, "first");
  b.Op("QueueEnqueueMany", {q, b.Const(*Tensor::Zeros(DType::kF32, Shape{2, 4}))}, {}, "second");
  b.AddNode("QueueDequeueMany", {q, b.Scalar<int32_t>(0)},
            {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "none");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"first"}, nullptr).ok());
  EXPECT_EQ(session->Run({}, {}, {"second"}, nullptr).message(),
            "node 'second' (QueueEnqueueMany) on /device:CPU:0: component 0 of an element of queue 'free' has shape "
            "[3] (set by its first enqueue); got elements of shape [4] (from f32[2,4])");
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"none"}, {}, &out).ok());
  EXPECT_EQ(out[0].TypeString(), "f32[0,3]");
}

TEST(QueueErrors, BadDefinitionsAreErrors) {
  auto build_error = [](const std::string& op, AttrMap attrs) {
    GraphBuilder b;
    b.Op(op, {}, std::move(attrs), "q");
    return b.status().message();
  };
  const AttrValue one_type(std::vector<DType>{DType::kF32});
  EXPECT_EQ(build_error("FIFOQueue", {{"component_types", AttrValue(std::vector<DType>{})}}),
            "node 'q' (FIFOQueue): component_types is empty; a queue element needs at least one component");
  EXPECT_EQ(build_error("FIFOQueue",
                        {{"component_types", one_type}, {"shapes", AttrValue(std::vector<Shape>{Shape{1}, Shape{2}})}}),
            "node 'q' (FIFOQueue): shapes has 2 entries but component_types has 1; give one shape per component, or "
            "none");
  EXPECT_EQ(
      build_error("FIFOQueue", {{"component_types", one_type}, {"shapes", AttrValue(std::vector<Shape>{Shape{-1}})}}),
      "node 'q' (FIFOQueue): shapes[0] is [?]; queue shapes must be fully defined");
  EXPECT_EQ(build_error("RandomShuffleQueue", {{"component_types", one_type}, {"capacity", AttrValue(int64_t{0})}}),
            "node 'q' (RandomShuffleQueue): capacity is 0; it must be >= 1, or -1 for no limit");
  {
    GraphBuilder b;
    Output x = b.Const(*Tensor::Zeros(DType::kF32, Shape{2, 2}));
    Output y = b.Const(*Tensor::Zeros(DType::kF32, Shape{3}));
    Output q =
        b.Op("FIFOQueue", {}, {{"component_types", AttrValue(std::vector<DType>{DType::kF32, DType::kF32})}}, "q");
    b.Op("QueueEnqueueMany", {q, x, y}, {}, "enq");
    EXPECT_EQ(b.status().message(),
              "node 'enq' (QueueEnqueueMany): the components hold different numbers of elements (2 and 3)");
  }
  {
    // A list(type) arg checks each input against its entry.
    GraphBuilder b;
    Output q = b.Op("FIFOQueue", {}, {{"component_types", one_type}}, "q");
    b.Op("QueueEnqueueMany",
         {q, b.Const(*Tensor::Zeros(DType::kF32, Shape{1})), b.Const(*Tensor::Zeros(DType::kI32, Shape{1}), "ints")},
         {{"Tcomponents", AttrValue(std::vector<DType>{DType::kF32, DType::kI64})}}, "enq");
    EXPECT_EQ(b.status().message(),
              "node 'enq' (QueueEnqueueMany): input 2 \"ints\" is i32, but 'components' must be "
              "i64 (attr Tcomponents)");
  }
  {
    GraphBuilder b;
    Output q = b.Op("FIFOQueue", {}, {{"component_types", one_type}}, "q");
    b.Op("QueueEnqueueMany", {q, b.Scalar<float>(1)}, {}, "enq");
    EXPECT_EQ(b.status().message(),
              "node 'enq' (QueueEnqueueMany): component 0 is a scalar; enqueueing many needs a leading dimension");
  }

  // Errors when the kernel is made: a queue that never gives anything, and
  // a name already taken by a queue made differently or by a variable.
  RuntimeEnv env;
  auto run_error = [&](const std::string& op, AttrMap attrs) {
    GraphBuilder b;
    b.Op(op, {}, std::move(attrs), "node");
    auto session = env.Session(b);
    return session->Run({}, {"node"}, {}, nullptr).message();
  };
  EXPECT_EQ(run_error("RandomShuffleQueue", {{"component_types", one_type},
                                             {"capacity", AttrValue(int64_t{4})},
                                             {"min_after_dequeue", AttrValue(int64_t{4})}}),
            "node 'node' (RandomShuffleQueue) on /device:CPU:0: min_after_dequeue 4 must be less than the capacity 4, "
            "or no dequeue could ever take an element");
  EXPECT_EQ(run_error("FIFOQueue", {{"component_types", one_type},
                                    {"capacity", AttrValue(int64_t{2})},
                                    {"shared_name", AttrValue("shared")}}),
            "");
  EXPECT_EQ(run_error("FIFOQueue", {{"component_types", one_type},
                                    {"capacity", AttrValue(int64_t{3})},
                                    {"shared_name", AttrValue("shared")}}),
            "node 'node' (FIFOQueue) on /device:CPU:0: FIFO queue 'shared' exists with component types [f32], shapes "
            "unspecified, capacity 2; this node asks for component types [f32], shapes unspecified, capacity 3");
  EXPECT_EQ(run_error("RandomShuffleQueue", {{"component_types", one_type}, {"shared_name", AttrValue("shared")}}),
            "node 'node' (RandomShuffleQueue) on /device:CPU:0: resource \"shared\" exists as a FIFO queue; it cannot "
            "be used as a random-shuffle queue");
  EXPECT_EQ(run_error("VarHandle", {{"dtype", AttrValue(DType::kF32)},
                                    {"shape", AttrValue(Shape{})},
                                    {"shared_name", AttrValue("shared")}}),
            "node 'node' (VarHandle) on /device:CPU:0: resource \"shared\" exists as a FIFO queue; it cannot be used "
            "as a variable");
}

TEST(QueueErrors, AVariableHandleIsNotAQueue) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}}, "v");
  b.Op("QueueSize", {v}, {}, "size");
  auto session = env.Session(b);
  EXPECT_EQ(session->Run({}, {"size"}, {}, nullptr).message(),
            "node 'size' (QueueSize) on /device:CPU:0: input 0 is a handle to the variable 'v', not to a queue");
}

}  // namespace
}  // namespace weft
