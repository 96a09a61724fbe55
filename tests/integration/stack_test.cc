// Stacks (core/runtime/kernels/stack_kernels.h), the per-step resources a loop's
// gradient saves forward values on, run through Session::Run on the CPU
// device: push and pop by index, a fresh stack every step, and every error
// with its message.
#include <gtest/gtest.h>

#include "tests/support/output_text.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::Contains;
using testing::RuntimeEnv;

using testing::Values;

Output Index(GraphBuilder& b, int64_t i) { return b.Const(Tensor::Scalar<int64_t>(i)); }

Output MakeStack(GraphBuilder& b, DType elem_type, const std::string& stack_name = "saved") {
  return b.Op("Stack", {}, {{"elem_type", AttrValue(elem_type)}, {"stack_name", AttrValue(stack_name)}}, "stack");
}

Output Pop(GraphBuilder& b, const Output& stack, int64_t index, DType elem_type, const std::string& name) {
  return b.Op("StackPop", {stack, Index(b, index)}, {{"elem_type", AttrValue(elem_type)}}, name);
}

// Fetches |fetch| of what |b| built, once; returns how the step ended.
Status FetchOnce(const GraphBuilder& b, const std::string& fetch) {
  auto session = testing::SharedRuntimeEnv().Session(b);
  return session->Run({}, {fetch}, {}, nullptr);
}

TEST(Stack, PushThenPopRoundTripsEachIndex) {
  GraphBuilder b;
  Output stack = MakeStack(b, DType::kF32);
  Output x0 = b.Placeholder(DType::kF32, Shape{2}, "x0");
  Output x1 = b.Placeholder(DType::kF32, Shape{3}, "x1");
  Output push0 = b.Op("StackPush", {stack, Index(b, 0), x0}, {}, "push0");
  Output push1 = b.Op("StackPush", {stack, Index(b, 1), x1}, {}, "push1");
  Output pop1, pop0;
  {
    auto deps = b.ControlDependencies({push0, push1});
    pop1 = Pop(b, stack, 1, DType::kF32, "pop1");
  }
  {
    auto deps = b.ControlDependencies({pop1});
    pop0 = Pop(b, stack, 0, DType::kF32, "pop0");
  }
  auto session = testing::SharedRuntimeEnv().Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x0", Tensor::FromVector<float>({1, 2})}, {"x1", Tensor::FromVector<float>({3, 4, 5})}},
                          {"push0", "push1", "pop0", "pop1"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // The pushes forward their element; the pops give back what was pushed.
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values<float>(out[3]), (std::vector<float>{3, 4, 5}));
}

TEST(Stack, PoppingAMissingIndexNamesTheStackAndTheIndex) {
  GraphBuilder b;
  Output stack = MakeStack(b, DType::kF64);
  Output push = b.Op("StackPush", {stack, Index(b, 4), b.Const(Tensor::Scalar<double>(1))}, {}, "push");
  {
    auto deps = b.ControlDependencies({push});
    Pop(b, stack, 2, DType::kF64, "pop_missing");
    Output first = Pop(b, stack, 4, DType::kF64, "pop_first");
    auto again = b.ControlDependencies({first});
    Pop(b, stack, 4, DType::kF64, "pop_again");
  }
  Pop(b, stack, 0, DType::kF64, "pop_empty");
  auto session = testing::SharedRuntimeEnv().Session(b);
  Status s = session->Run({}, {"pop_missing"}, {}, nullptr);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "stack 'saved' has no element under index 2; it holds 1 element, indices 4 to 4"));
  EXPECT_TRUE(Contains(s.message(), "pop_missing"));
  // A pop removes the element: a second pop of the index finds none.
  s = session->Run({}, {"pop_again"}, {}, nullptr);
  EXPECT_TRUE(Contains(s.message(), "stack 'saved' has no element under index 4; it is empty")) << s.ToString();
  s = session->Run({}, {"pop_empty"}, {}, nullptr);
  EXPECT_TRUE(Contains(s.message(), "stack 'saved' has no element under index 0; it is empty")) << s.ToString();
}

TEST(Stack, PushingAnIndexTwiceIsAnError) {
  GraphBuilder b;
  Output stack = MakeStack(b, DType::kI32);
  Output push = b.Op("StackPush", {stack, Index(b, 7), b.Const(Tensor::Scalar<int32_t>(1))}, {}, "push");
  {
    auto deps = b.ControlDependencies({push});
    b.Op("StackPush", {stack, Index(b, 7), b.Const(Tensor::Scalar<int32_t>(2))}, {}, "push_again");
  }
  Status s = FetchOnce(b, "push_again");
  EXPECT_TRUE(Contains(s.message(), "stack 'saved' already holds an element under index 7")) << s.ToString();
}

TEST(Stack, DtypesMustMatchTheStack) {
  GraphBuilder b;
  Output stack = MakeStack(b, DType::kF32, "");  // named after its node
  b.Op("StackPush", {stack, Index(b, 0), b.Const(Tensor::Scalar<int32_t>(1))}, {}, "push_i32");
  Output push = b.Op("StackPush", {stack, Index(b, 0), b.Const(Tensor::Scalar<float>(1))}, {}, "push_f32");
  {
    auto deps = b.ControlDependencies({push});
    Pop(b, stack, 0, DType::kF64, "pop_f64");
  }
  auto session = testing::SharedRuntimeEnv().Session(b);
  Status s = session->Run({}, {"push_i32"}, {}, nullptr);
  EXPECT_TRUE(Contains(s.message(), "stack 'stack' holds f32 elements; cannot push a i32 tensor under index 0"))
      << s.ToString();
  s = session->Run({}, {"pop_f64"}, {}, nullptr);
  EXPECT_TRUE(Contains(s.message(), "stack 'stack' holds f32 elements but this StackPop has elem_type f64"))
      << s.ToString();
}

TEST(Stack, EachStepHasAFreshStack) {
  GraphBuilder b;
  Output stack = MakeStack(b, DType::kI64);
  Output push = b.Op("StackPush", {stack, Index(b, 0), b.Placeholder(DType::kI64, Shape{}, "v")}, {}, "push");
  Output pop_after_push;
  {
    auto deps = b.ControlDependencies({push});
    pop_after_push = Pop(b, stack, 0, DType::kI64, "pop_after_push");
  }
  Pop(b, stack, 0, DType::kI64, "pop_alone");
  auto session = testing::SharedRuntimeEnv().Session(b);
  // Index 0 again in the next step is no duplicate: the stack is new.
  for (int64_t step = 0; step < 3; ++step) {
    Status s = session->Run({{"v", Tensor::Scalar<int64_t>(step)}}, {}, {"push"}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // What the steps before pushed is gone.
  Status s = session->Run({}, {"pop_alone"}, {}, nullptr);
  EXPECT_TRUE(Contains(s.message(), "stack 'saved' has no element under index 0; it is empty")) << s.ToString();
  std::vector<Tensor> out;
  s = session->Run({{"v", Tensor::Scalar<int64_t>(42)}}, {"pop_after_push"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].scalar<int64_t>(), 42);
}

TEST(Stack, OtherResourcesAreRejected) {
  GraphBuilder b;
  Output queue = b.Op("FIFOQueue", {}, {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "q");
  b.Op("StackPush", {queue, Index(b, 0), b.Const(Tensor::Scalar<float>(1))}, {}, "push");
  Status s = FetchOnce(b, "push");
  EXPECT_TRUE(Contains(s.message(), "input 0 is a handle to the FIFO queue 'q', not to a stack")) << s.ToString();
}

TEST(Stack, TheIndexIsAScalar) {
  GraphBuilder b;
  Output stack = MakeStack(b, DType::kF32);
  b.Op("StackPush", {stack, b.Const(Tensor::FromVector<int64_t>({0, 1})), b.Const(Tensor::Scalar<float>(1))}, {},
       "push");
  EXPECT_TRUE(Contains(b.status().message(), "index must be a scalar; got shape [2]")) << b.status().ToString();
  GraphBuilder b2;
  Output stack2 = MakeStack(b2, DType::kF32);
  b2.Op("StackPop", {stack2, b2.Const(Tensor::FromVector<int64_t>({0}))}, {{"elem_type", AttrValue(DType::kF32)}},
        "pop");
  EXPECT_TRUE(Contains(b2.status().message(), "index must be a scalar; got shape [1]")) << b2.status().ToString();
}

}  // namespace
}  // namespace weft
