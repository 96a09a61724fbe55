// Variables on the CPU device beyond session_test's basics: AssignSub,
// ResourceGather and ResourceScatterAdd (kernels/state.cc) over several
// dtypes, and the errors of bad indices, bad shapes, uninitialised
// variables and mismatched dtypes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

using testing::RuntimeEnv;
using testing::Values;

Output Var(GraphBuilder& b, DType dtype, const Shape& shape, std::string_view name) {
  return b.Op("VarHandle", {}, {{"dtype", AttrValue(dtype)}, {"shape", AttrValue(shape)}}, name);
}

Output Read(GraphBuilder& b, Output var, DType dtype, std::string_view name) {
  return b.Op("ReadVariable", {var}, {{"dtype", AttrValue(dtype)}}, name);
}

Output Gather(GraphBuilder& b, Output var, DType dtype, const Tensor& indices, std::string_view name) {
  return b.Op("ResourceGather", {var, b.Const(indices)}, {{"dtype", AttrValue(dtype)}}, name);
}

// Runs |targets| and then fetches |fetch|, failing the test on an error.
Tensor RunThenFetch(runtime::Session& session, const std::vector<std::string>& targets, const std::string& fetch) {
  for (const std::string& target : targets) {
    Status s = session.Run({}, {}, {target}, nullptr);
    EXPECT_TRUE(s.ok()) << target << ": " << s.ToString();
  }
  std::vector<Tensor> out;
  Status s = session.Run({}, {fetch}, {}, &out);
  EXPECT_TRUE(s.ok()) << fetch << ": " << s.ToString();
  return s.ok() ? out[0] : Tensor();
}

// Runs the target "init", which must succeed, then |target|; returns how
// |target| ended.
Status InitThenRun(runtime::Session& session, const std::string& target) {
  Status init = session.Run({}, {}, {"init"}, nullptr);
  EXPECT_TRUE(init.ok()) << init.ToString();
  return session.Run({}, {}, {target}, nullptr);
}

// --- AssignSub ----------------------------------------------------------------------

template <class T>
void ExpectAssignSub(const std::vector<T>& initial, const std::vector<T>& delta, const std::vector<T>& once,
                     const std::vector<T>& twice) {
  RuntimeEnv env;
  GraphBuilder b;
  const DType dtype = DTypeOf<T>();
  Output v = Var(b, dtype, Shape{static_cast<int64_t>(initial.size())}, "v");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<T>(initial))}, {}, "init");
  b.Op("AssignSub", {v, b.Const(Tensor::FromVector<T>(delta))}, {}, "sub");
  Read(b, v, dtype, "read");
  auto session = env.Session(b);
  EXPECT_EQ(Values<T>(RunThenFetch(*session, {"init", "sub"}, "read")), once) << DTypeName(dtype);
  EXPECT_EQ(Values<T>(RunThenFetch(*session, {"sub"}, "read")), twice) << DTypeName(dtype);
}

TEST(AssignSub, SubtractsInPlaceForEachDtype) {
  // By hand: x - d, then x - 2d.
  ExpectAssignSub<float>({5, 7.5f, -1}, {1, 2.5f, -3}, {4, 5, 2}, {3, 2.5f, 5});
  ExpectAssignSub<double>({0.5, 1e10}, {0.25, 1}, {0.25, 9999999999.0}, {0, 9999999998.0});
  ExpectAssignSub<int32_t>({10, -20}, {3, 5}, {7, -25}, {4, -30});
  ExpectAssignSub<int64_t>({int64_t{1} << 40, 0}, {1, -7}, {(int64_t{1} << 40) - 1, 7}, {(int64_t{1} << 40) - 2, 14});
  // Integers wrap: 1 - 2 = 255 in u8, -128 - 1 = 127 in i8.
  ExpectAssignSub<uint8_t>({1, 200}, {2, 100}, {255, 100}, {253, 0});
  ExpectAssignSub<int8_t>({-128, 5}, {1, 5}, {127, 0}, {126, -5});
}

TEST(AssignSub, HalfPrecisionRoundsOnce) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF16, Shape{2}, "v");
  Tensor initial = *Tensor::Allocate(DType::kF16, Shape{2});
  Tensor delta = *Tensor::Allocate(DType::kF16, Shape{2});
  initial.data<uint16_t>()[0] = sdk::FloatToHalf(3.0f);
  initial.data<uint16_t>()[1] = sdk::FloatToHalf(1.0f);
  delta.data<uint16_t>()[0] = sdk::FloatToHalf(0.5f);
  delta.data<uint16_t>()[1] = sdk::FloatToHalf(1.0f / 1024);  // 2^-10: half the f16 spacing just below 1
  b.Op("Assign", {v, b.Const(initial)}, {}, "init");
  b.Op("AssignSub", {v, b.Const(delta)}, {}, "sub");
  Read(b, v, DType::kF16, "read");
  auto session = env.Session(b);
  const auto bits = Values<uint16_t>(RunThenFetch(*session, {"init", "sub"}, "read"));
  EXPECT_EQ(sdk::HalfToFloat(bits[0]), 2.5f);
  // 1 - 2^-10 is exactly representable in f16 (spacing 2^-11 below 1).
  EXPECT_EQ(sdk::HalfToFloat(bits[1]), 1.0f - 1.0f / 1024);
}

TEST(AssignSub, ShapeMismatchIsAnError) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF32, Shape{2}, "v");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<float>({1, 2}))}, {}, "init");
  b.Op("AssignSub", {v, b.Const(Tensor::FromVector<float>({1, 2, 3}))}, {}, "sub");
  Read(b, v, DType::kF32, "read");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  Status s = session->Run({}, {}, {"sub"}, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "node 'sub' (AssignSub) on /device:CPU:0: AssignSub to variable 'v' of shape [2] with a value of shape [3]");
  EXPECT_EQ(Values<float>(RunThenFetch(*session, {}, "read")), (std::vector<float>{1, 2}));
}

// --- ResourceGather ---------------------------------------------------------------

TEST(ResourceGather, GathersRowsForEachDtypeAndIndexType) {
  RuntimeEnv env;
  GraphBuilder b;
  // f32 [4,2], rows r = {10r, 10r + 1}.
  Output table = Var(b, DType::kF32, Shape{4, 2}, "table");
  b.Op("Assign", {table, b.Const(Tensor::FromVector<float>({0, 1, 10, 11, 20, 21, 30, 31}, Shape{4, 2}))}, {},
       "init_table");
  Gather(b, table, DType::kF32, Tensor::FromVector<int32_t>({3, 1, 3}), "rows_i32");
  Gather(b, table, DType::kF32, Tensor::FromVector<int64_t>({2, 0, 0, 1}, Shape{2, 2}), "rows_i64");
  Gather(b, table, DType::kF32, Tensor::Scalar<int64_t>(2), "row_scalar");
  Gather(b, table, DType::kF32, Tensor::FromVector<int32_t>({}), "no_rows");
  // i64 [3] and bool [3,2]: gather copies bytes, so any dtype works.
  Output ids = Var(b, DType::kI64, Shape{3}, "ids");
  b.Op("Assign", {ids, b.Const(Tensor::FromVector<int64_t>({int64_t{1} << 50, -7, 42}))}, {}, "init_ids");
  Gather(b, ids, DType::kI64, Tensor::FromVector<int64_t>({2, 0, 1, 2}), "ids_gathered");
  Output mask = Var(b, DType::kBool, Shape{3, 2}, "mask");
  b.Op("Assign", {mask, b.Const(Tensor::FromVector<bool>({true, false, false, false, true, true}, Shape{3, 2}))}, {},
       "init_mask");
  Gather(b, mask, DType::kBool, Tensor::FromVector<int32_t>({2, 0}), "mask_gathered");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"init_table", "init_ids", "init_mask"}, nullptr).ok());
  std::vector<Tensor> out;
  Status s =
      session->Run({}, {"rows_i32", "rows_i64", "row_scalar", "no_rows", "ids_gathered", "mask_gathered"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{30, 31, 10, 11, 30, 31}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(Values<float>(out[1]), (std::vector<float>{20, 21, 0, 1, 0, 1, 10, 11}));
  EXPECT_EQ(out[2].shape(), (Shape{2}));
  EXPECT_EQ(Values<float>(out[2]), (std::vector<float>{20, 21}));
  EXPECT_EQ(out[3].shape(), (Shape{0, 2}));
  EXPECT_EQ(Values<int64_t>(out[4]), (std::vector<int64_t>{42, int64_t{1} << 50, -7, 42}));
  EXPECT_EQ(out[5].shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<uint8_t>(out[5]), (std::vector<uint8_t>{1, 1, 1, 0}));
}

TEST(ResourceGather, UsesTheAssignedShapeOfAPartlyDeclaredVariable) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kI32, Shape{-1, 3}, "v");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3}))}, {}, "init");
  Gather(b, v, DType::kI32, Tensor::FromVector<int32_t>({1, 1, 0}), "g");
  auto session = env.Session(b);
  const Tensor g = RunThenFetch(*session, {"init"}, "g");
  EXPECT_EQ(g.shape(), (Shape{3, 3}));
  EXPECT_EQ(Values<int32_t>(g), (std::vector<int32_t>{4, 5, 6, 4, 5, 6, 1, 2, 3}));
}

TEST(ResourceGather, OutOfRangeIndicesAreNamed) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF32, Shape{4}, "embeddings");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<float>({1, 2, 3, 4}))}, {}, "init");
  Gather(b, v, DType::kF32, Tensor::FromVector<int32_t>({0, 4}), "too_big");
  Gather(b, v, DType::kF32, Tensor::FromVector<int64_t>({-1}), "negative");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  Status s = session->Run({}, {"too_big"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'too_big' (ResourceGather) on /device:CPU:0: index 4 (position 1) is out of range for variable "
            "'embeddings' with 4 rows");
  EXPECT_EQ(session->Run({}, {"negative"}, {}, &out).message(),
            "node 'negative' (ResourceGather) on /device:CPU:0: index -1 (position 0) is out of range for variable "
            "'embeddings' with 4 rows");
}

TEST(ResourceGather, ScalarVariablesHaveNoRows) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF32, Shape{}, "s");
  b.Op("Assign", {v, b.Scalar<float>(1)}, {}, "init");
  // Shape inference rejects the declared scalar outright.
  Gather(b, v, DType::kF32, Tensor::FromVector<int32_t>({0}), "g");
  EXPECT_NE(b.status().message().find("cannot gather rows of a scalar variable"), std::string::npos)
      << b.status().ToString();
}

// --- ResourceScatterAdd --------------------------------------------------------------

// The variable |name|, of the dtype and shape of |initial|, with the targets
// "init" (assigns |initial|) and "scatter" (adds |updates| at the rows
// |indices|), and "read", its value.
void ScatterAddGraph(GraphBuilder& b, const std::string& name, const Tensor& initial, const Tensor& indices,
                     const Tensor& updates) {
  Output v = Var(b, initial.dtype(), initial.shape(), name);
  b.Op("Assign", {v, b.Const(initial)}, {}, "init");
  b.Op("ResourceScatterAdd", {v, b.Const(indices), b.Const(updates)}, {}, "scatter");
  Read(b, v, initial.dtype(), "read");
}

TEST(ResourceScatterAdd, RepeatedIndicesAddUp) {
  RuntimeEnv env;
  GraphBuilder b;
  ScatterAddGraph(b, "v", Tensor::FromVector<float>({1, 1, 2, 2, 3, 3}, Shape{3, 2}),
                  Tensor::FromVector<int32_t>({0, 2, 0}),
                  Tensor::FromVector<float>({10, 20, 30, 40, 1, 2}, Shape{3, 2}));
  auto session = env.Session(b);
  // Row 0: 1 + 10 + 1 = 12, 1 + 20 + 2 = 23; row 1 untouched; row 2: 3 + 30, 3 + 40.
  EXPECT_EQ(Values<float>(RunThenFetch(*session, {"init", "scatter"}, "read")),
            (std::vector<float>{12, 23, 2, 2, 33, 43}));
  // Again: the same updates once more.
  EXPECT_EQ(Values<float>(RunThenFetch(*session, {"scatter"}, "read")), (std::vector<float>{23, 45, 2, 2, 63, 83}));
}

TEST(ResourceScatterAdd, IntegerDtypesAndI64Indices) {
  RuntimeEnv env;
  GraphBuilder b;
  Output counts = Var(b, DType::kI64, Shape{4}, "counts");
  b.Op("Assign", {counts, b.Const(Tensor::FromVector<int64_t>({0, 0, 0, 0}))}, {}, "init_counts");
  // A 2-D index tensor into a 1-D variable: updates have the indices' shape.
  b.Op("ResourceScatterAdd",
       {counts, b.Const(Tensor::FromVector<int64_t>({3, 1, 3, 3}, Shape{2, 2})),
        b.Const(Tensor::FromVector<int64_t>({1, 10, 100, int64_t{1} << 40}, Shape{2, 2}))},
       {}, "count");
  Read(b, counts, DType::kI64, "read_counts");
  Output bytes = Var(b, DType::kU8, Shape{2, 2}, "bytes");
  b.Op("Assign", {bytes, b.Const(Tensor::FromVector<uint8_t>({250, 0, 7, 7}, Shape{2, 2}))}, {}, "init_bytes");
  b.Op("ResourceScatterAdd",
       {bytes, b.Const(Tensor::FromVector<int32_t>({0, 0})),
        b.Const(Tensor::FromVector<uint8_t>({3, 1, 4, 1}, Shape{2, 2}))},
       {}, "bump_bytes");
  Read(b, bytes, DType::kU8, "read_bytes");
  auto session = env.Session(b);
  EXPECT_EQ(Values<int64_t>(RunThenFetch(*session, {"init_counts", "count"}, "read_counts")),
            (std::vector<int64_t>{0, 10, 0, 1 + 100 + (int64_t{1} << 40)}));
  // Row 0: 250 + 3 + 4 = 257 wraps to 1; 0 + 1 + 1 = 2.
  EXPECT_EQ(Values<uint8_t>(RunThenFetch(*session, {"init_bytes", "bump_bytes"}, "read_bytes")),
            (std::vector<uint8_t>{1, 2, 7, 7}));
}

TEST(ResourceScatterAdd, BadIndicesLeaveTheVariableUntouched) {
  RuntimeEnv env;
  GraphBuilder b;
  ScatterAddGraph(b, "weights", Tensor::FromVector<double>({1, 2, 3, 4}, Shape{2, 2}),
                  Tensor::FromVector<int64_t>({1, 2}), Tensor::FromVector<double>({5, 5, 5, 5}, Shape{2, 2}));
  auto session = env.Session(b);
  Status s = InitThenRun(*session, "scatter");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'scatter' (ResourceScatterAdd) on /device:CPU:0: index 2 (position 1) is out of range for variable "
            "'weights' with 2 rows");
  // The valid index 1 came first, but nothing was added.
  EXPECT_EQ(Values<double>(RunThenFetch(*session, {}, "read")), (std::vector<double>{1, 2, 3, 4}));
}

TEST(ResourceScatterAdd, UpdatesOfTheWrongShapeAreAnError) {
  RuntimeEnv env;
  GraphBuilder b;
  ScatterAddGraph(b, "v", Tensor::FromVector<float>({0, 0, 0, 0, 0, 0}, Shape{3, 2}),
                  Tensor::FromVector<int32_t>({0, 1}), Tensor::FromVector<float>({1, 2, 3}, Shape{1, 3}));
  Status s = InitThenRun(*env.Session(b), "scatter");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'scatter' (ResourceScatterAdd) on /device:CPU:0: updates has shape [1,3]; for indices [2] and "
            "variable 'v' [3,2] it must be [2,2]");
}

// --- Uninitialised variables, Assign, dtypes ----------------------------------------

TEST(Variables, UninitialisedVariablesCannotBeUsed) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF32, Shape{2}, "v");
  b.Op("AssignSub", {v, b.Const(Tensor::FromVector<float>({1, 2}))}, {}, "sub");
  Gather(b, v, DType::kF32, Tensor::FromVector<int32_t>({0}), "gather");
  b.Op("ResourceScatterAdd", {v, b.Const(Tensor::FromVector<int32_t>({0})), b.Const(Tensor::FromVector<float>({1}))},
       {}, "scatter");
  Read(b, v, DType::kF32, "read");
  auto session = env.Session(b);
  const std::string why = "variable \"v\" (f32[2]) is read before it was assigned a value; run its initializer first";
  std::vector<Tensor> out;
  for (const auto& [node, op] : std::vector<std::pair<std::string, std::string>>{{"sub", "AssignSub"},
                                                                                 {"gather", "ResourceGather"},
                                                                                 {"scatter", "ResourceScatterAdd"},
                                                                                 {"read", "ReadVariable"}}) {
    Status s =
        node == "gather" || node == "read" ? session->Run({}, {node}, {}, &out) : session->Run({}, {}, {node}, nullptr);
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << node;
    EXPECT_EQ(s.message(), "node '" + node + "' (" + op + ") on /device:CPU:0: " + why);
  }
}

TEST(Variables, AssignRejectsAnIncompatibleShape) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF32, Shape{2}, "v");
  Output value = b.Placeholder(DType::kF32, Shape{-1}, "value");
  b.Op("Assign", {v, value}, {}, "assign");
  Read(b, v, DType::kF32, "read");
  auto session = env.Session(b);
  Status s = session->Run({{"value", Tensor::FromVector<float>({1, 2, 3})}}, {}, {"assign"}, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'assign' (Assign) on /device:CPU:0: variable \"v\" is declared f32[2]; cannot assign a value of "
            "shape [3]");
  // Still uninitialised; a fitting value then works.
  std::vector<Tensor> out;
  EXPECT_EQ(session->Run({}, {"read"}, {}, &out).code(), Code::kFailedPrecondition);
  ASSERT_TRUE(session->Run({{"value", Tensor::FromVector<float>({7, 8})}}, {}, {"assign"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"read"}, {}, &out).ok());
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{7, 8}));
}

TEST(Variables, KernelsRejectAVariableOfAnotherDtype) {
  // The graph does not track a handle's dtype, so the kernels check it: a
  // mismatch would otherwise read or write past the variable's memory.
  RuntimeEnv env;
  GraphBuilder b;
  Output v = Var(b, DType::kF32, Shape{2, 2}, "v");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<float>({1, 2, 3, 4}, Shape{2, 2}))}, {}, "init");
  Gather(b, v, DType::kF64, Tensor::FromVector<int32_t>({1}), "gather");
  b.Op("AssignSub", {v, b.Const(Tensor::FromVector<double>({1, 2, 3, 4}, Shape{2, 2}))}, {}, "sub");
  b.Op("ResourceScatterAdd",
       {v, b.Const(Tensor::FromVector<int32_t>({1})), b.Const(Tensor::FromVector<double>({1, 2}, Shape{1, 2}))}, {},
       "scatter");
  Read(b, v, DType::kF32, "read");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  Status s = session->Run({}, {"gather"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "node 'gather' (ResourceGather) on /device:CPU:0: variable 'v' holds f32, not f64");
  s = session->Run({}, {}, {"sub"}, nullptr);
  EXPECT_EQ(s.message(), "node 'sub' (AssignSub) on /device:CPU:0: variable 'v' holds f32, not f64");
  s = session->Run({}, {}, {"scatter"}, nullptr);
  EXPECT_EQ(s.message(), "node 'scatter' (ResourceScatterAdd) on /device:CPU:0: variable 'v' holds f32, not f64");
  EXPECT_EQ(Values<float>(RunThenFetch(*session, {}, "read")), (std::vector<float>{1, 2, 3, 4}));
}

}  // namespace
}  // namespace weft
