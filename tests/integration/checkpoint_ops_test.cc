// Save and Restore in real sessions on the CPU plugin: variables saved with
// Save (ReadVariable -> Save), read back by BundleReader, and restored into
// variables (Restore -> Assign); and every error the graph or the
// checkpoint can cause, by message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/checkpoint/bundle.h"
#include "tests/support/output_text.h"
#include "tests/support/runtime_env.h"
#include "tests/support/status_printer.h"
#include "tests/support/test_dir.h"

namespace weft {

namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::RuntimeEnv;

Output Var(GraphBuilder& b, DType dtype, const Shape& shape, std::string_view name) {
  return b.Op("VarHandle", {}, {{"dtype", AttrValue(dtype)}, {"shape", AttrValue(shape)}}, name);
}

Output Read(GraphBuilder& b, Output var, DType dtype) {
  return b.Op("ReadVariable", {var}, {{"dtype", AttrValue(dtype)}});
}

Output Save(GraphBuilder& b, Output prefix, const std::vector<Output>& tensors, const std::vector<std::string>& names,
            std::string_view node = "save") {
  std::vector<Output> inputs = {prefix};
  inputs.insert(inputs.end(), tensors.begin(), tensors.end());
  return b.Op("Save", inputs, {{"tensor_names", AttrValue(names)}}, node);
}

std::vector<Output> Restore(GraphBuilder& b, Output prefix, const std::vector<std::string>& names,
                            const std::vector<DType>& dtypes, const std::vector<Shape>& shapes = {},
                            std::string_view node = "restore") {
  AttrMap attrs = {{"tensor_names", AttrValue(names)}, {"dtypes", AttrValue(dtypes)}};
  if (!shapes.empty()) attrs["shapes"] = AttrValue(shapes);
  return b.AddNode("Restore", {prefix}, std::move(attrs), node);
}

Output Prefix(GraphBuilder& b, const std::string& prefix) { return b.Const(Tensor::Strings({prefix}, Shape{})); }

class CheckpointOps : public ::testing::Test {
 protected:
  std::string P(const std::string& name) const { return dir_.File(name); }

  // Runs |targets| one after another, expecting success.
  static void RunTargets(runtime::Session& s, const std::vector<std::string>& targets) {
    for (const std::string& t : targets) {
      Status status = s.Run({}, {}, {t}, nullptr);
      ASSERT_TRUE(status.ok()) << t << ": " << status.ToString();
    }
  }

  testing::TestDir dir_{"weft_ckpt_ops_test"};
};

const Tensor kW = Tensor::FromVector<float>({1.5f, -2, 3, 4.25f, 5, -6}, Shape{2, 3});
const Tensor kStep = Tensor::Scalar<int64_t>(1234567890123);
const Tensor kB = Tensor::FromVector<double>({0.1, 0.2, 0.3, 1e-300});
const Tensor kZerosW = *Tensor::Zeros(DType::kF32, Shape{2, 3});

// A model with three variables, initialisers, and a Save of all three.
void BuildModel(GraphBuilder& b, const std::string& prefix) {
  Output w = Var(b, DType::kF32, Shape{2, 3}, "dense/w");
  Output step = Var(b, DType::kI64, Shape{}, "global_step");
  Output bias = Var(b, DType::kF64, Shape{4}, "dense/b");
  b.Op("Assign", {w, b.Const(kW)}, {}, "init_w");
  b.Op("Assign", {step, b.Const(kStep)}, {}, "init_step");
  b.Op("Assign", {bias, b.Const(kB)}, {}, "init_b");
  b.Op("Assign", {w, b.Const(kZerosW)}, {}, "zero_w");
  Save(b, Prefix(b, prefix), {Read(b, w, DType::kF32), Read(b, step, DType::kI64), Read(b, bias, DType::kF64)},
       {"dense/w", "global_step", "dense/b"});
  Read(b, w, DType::kF32);
  // The restore half: Restore -> Assign, grouped under one target.
  std::vector<Output> restored = Restore(b, Prefix(b, prefix), {"dense/w", "global_step", "dense/b"},
                                         {DType::kF32, DType::kI64, DType::kF64}, {Shape{2, 3}, Shape{}, Shape{4}});
  Output a1 = b.Op("Assign", {w, restored[0]}, {}, "restore_w");
  Output a2 = b.Op("Assign", {step, restored[1]}, {}, "restore_step");
  Output a3 = b.Op("Assign", {bias, restored[2]}, {}, "restore_b");
  auto deps = b.ControlDependencies({a1, a2, a3});
  b.Op("NoOp", {}, {}, "restore_all");
}

TEST_F(CheckpointOps, SaveThenRestoreVariablesThroughASession) {
  RuntimeEnv env;
  GraphBuilder b;
  BuildModel(b, P("ckpt-1"));
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  // The list(type) attr is inferred from the inputs; Restore's outputs take
  // the listed dtypes and shapes.
  const NodeDef& save = b.node_def(b.Find("save").node());
  EXPECT_EQ(save.attrs.at("T").get<std::vector<DType>>(), (std::vector<DType>{DType::kF32, DType::kI64, DType::kF64}));
  const NodeTypes& restore = b.node_types(b.Find("restore").node());
  EXPECT_EQ(restore.output_types, (std::vector<DType>{DType::kF32, DType::kI64, DType::kF64}));
  EXPECT_EQ(restore.output_shapes, (std::vector<Shape>{Shape{2, 3}, Shape{}, Shape{4}}));

  auto session = env.Session(b);
  ASSERT_NE(session, nullptr);
  RunTargets(*session, {"init_w", "init_step", "init_b", "save"});

  // The bundle holds the values, read independently of Restore.
  auto reader = checkpoint::BundleReader::Open(P("ckpt-1"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE((*reader)->Read("dense/w")->BitwiseEquals(kW));
  EXPECT_TRUE((*reader)->Read("global_step")->BitwiseEquals(kStep));
  EXPECT_TRUE((*reader)->Read("dense/b")->BitwiseEquals(kB));

  // Clobber a variable, restore, and read every variable back.
  RunTargets(*session, {"zero_w"});
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"ReadVariable_3"}, {}, &out).ok());
  EXPECT_TRUE(out[0].BitwiseEquals(kZerosW));
  RunTargets(*session, {"restore_all"});
  ASSERT_TRUE(session->Run({}, {"ReadVariable", "ReadVariable_1", "ReadVariable_2"}, {}, &out).ok());
  EXPECT_TRUE(out[0].BitwiseEquals(kW)) << out[0].DebugString();
  EXPECT_TRUE(out[1].BitwiseEquals(kStep)) << out[1].DebugString();
  EXPECT_TRUE(out[2].BitwiseEquals(kB)) << out[2].DebugString();
}

TEST_F(CheckpointOps, RestoresIntoAFreshProcessStateAndAcceptsPartialShapes) {
  {
    RuntimeEnv env;
    GraphBuilder b;
    BuildModel(b, P("ckpt-2"));
    auto session = env.Session(b);
    RunTargets(*session, {"init_w", "init_step", "init_b", "save"});
  }
  // New devices, new variables: only the checkpoint connects the two.
  RuntimeEnv env;
  GraphBuilder b;
  Output w = Var(b, DType::kF32, Shape{2, 3}, "dense/w");
  std::vector<Output> r = Restore(b, Prefix(b, P("ckpt-2")), {"dense/w", "names"}, {DType::kF32, DType::kString},
                                  {Shape{-1, 3}, Shape::UnknownRank()});
  b.Op("Assign", {w, r[0]}, {}, "restore_w");
  Read(b, w, DType::kF32);
  auto session = env.Session(b);
  Status missing = session->Run({}, {}, {"restore_w"}, nullptr);
  // "names" is not in the checkpoint: the whole Restore fails first.
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_TRUE(Contains(missing.message(), StrCat("node 'restore' (Restore) on /device:CPU:0: checkpoint ", P("ckpt-2"),
                                                 " has no tensor \"names\" (it has \"dense/b\", "
                                                 "\"dense/w\", \"global_step\")")));

  GraphBuilder b2;
  Output w2 = Var(b2, DType::kF32, Shape{2, 3}, "dense/w");
  std::vector<Output> r2 = Restore(b2, Prefix(b2, P("ckpt-2")), {"dense/w"}, {DType::kF32}, {Shape{-1, 3}});
  b2.Op("Assign", {w2, r2[0]}, {}, "restore_w");
  Read(b2, w2, DType::kF32);
  auto session2 = env.Session(b2);
  RunTargets(*session2, {"restore_w"});
  std::vector<Tensor> out;
  ASSERT_TRUE(session2->Run({}, {"ReadVariable"}, {}, &out).ok());
  EXPECT_TRUE(out[0].BitwiseEquals(kW)) << out[0].DebugString();
}

TEST_F(CheckpointOps, SavesStringsAndTakesAFedPrefix) {
  RuntimeEnv env;
  GraphBuilder b;
  Output prefix = b.Placeholder(DType::kString, Shape{}, "prefix");
  Output words = b.Const(Tensor::Strings({"alpha", "", "gamma"}, Shape{3}));
  Save(b, prefix, {words, b.Scalar<int32_t>(7)}, {"vocab", "seven"});
  std::vector<Output> r = Restore(b, prefix, {"vocab", "seven"}, {DType::kString, DType::kI32});
  auto session = env.Session(b);
  for (const std::string name : {"a", "b"}) {
    Status s = session->Run({{"prefix", Tensor::Strings({P(name)}, Shape{})}}, {}, {"save"}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_TRUE(fs::exists(P("a.index")));
  EXPECT_TRUE(fs::exists(P("b.index")));
  std::vector<Tensor> out;
  Status s = session->Run({{"prefix", Tensor::Strings({P("b")}, Shape{})}}, {"restore:0", "restore:1"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(out[0].BitwiseEquals(Tensor::Strings({"alpha", "", "gamma"}, Shape{3}))) << out[0].DebugString();
  EXPECT_TRUE(out[1].BitwiseEquals(Tensor::Scalar<int32_t>(7)));
}

TEST_F(CheckpointOps, RestoreReportsWhatDiffers) {
  ASSERT_TRUE(
      checkpoint::WriteBundle(
          P("c"), {{"dense/w", *Tensor::Zeros(DType::kF32, Shape{784, 512})}, {"step", Tensor::Scalar<int64_t>(3)}}, {})
          .ok());
  RuntimeEnv env;
  auto run_restore = [&](const std::vector<std::string>& names, const std::vector<DType>& dtypes,
                         const std::vector<Shape>& shapes, const std::string& prefix) {
    GraphBuilder b;
    std::vector<Output> r = Restore(b, Prefix(b, prefix), names, dtypes, shapes);
    auto session = env.Session(b);
    std::vector<Tensor> out;
    return session->Run({}, {"restore:0"}, {}, &out);
  };
  const std::string at = "node 'restore' (Restore) on /device:CPU:0: ";
  EXPECT_EQ(run_restore({"dense/w"}, {DType::kF32}, {Shape{784, 256}}, P("c")),
            InvalidArgumentError(at, "checkpoint ", P("c"),
                                 ": tensor \"dense/w\" has shape [784,512], "
                                 "the graph expects [784,256]"));
  EXPECT_EQ(run_restore({"dense/w"}, {DType::kF32}, {Shape{784}}, P("c")),
            InvalidArgumentError(at, "checkpoint ", P("c"),
                                 ": tensor \"dense/w\" has shape [784,512], the graph expects [784]"));
  EXPECT_EQ(run_restore({"step"}, {DType::kI32}, {}, P("c")),
            InvalidArgumentError(at, "checkpoint ", P("c"), ": tensor \"step\" is i64, the graph expects i32"));
  EXPECT_EQ(run_restore({"dense/ww"}, {DType::kF32}, {}, P("c")),
            NotFoundError(at, "checkpoint ", P("c"), " has no tensor \"dense/ww\"; did you mean \"dense/w\"?"));
  EXPECT_EQ(run_restore({"step"}, {DType::kI64}, {}, P("nope")),
            NotFoundError(at, "checkpoint ", P("nope"), " not found: ", P("nope"), ".index does not exist"));

  // Corrupt data surfaces as DATA_LOSS naming the tensor and the shard.
  const std::string shard = P("c") + ".data-00000-of-00001";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x7f');
  }
  Status corrupt = run_restore({"dense/w"}, {DType::kF32}, {}, P("c"));
  EXPECT_EQ(corrupt.code(), Code::kDataLoss);
  EXPECT_TRUE(Contains(corrupt.message(), StrCat(at, "checkpoint ", P("c"),
                                                 ": tensor \"dense/w\" is corrupt: its 1605632 bytes at offset 0 of ",
                                                 shard, " have CRC32C 0x")));
}

TEST_F(CheckpointOps, SaveReportsBadPrefixes) {
  RuntimeEnv env;
  GraphBuilder b;
  Output prefix = b.Placeholder(DType::kString, Shape{}, "prefix");
  Save(b, prefix, {b.Scalar<float>(1)}, {"x"});
  auto session = env.Session(b);
  const std::string at = "node 'save' (Save) on /device:CPU:0: ";
  EXPECT_EQ(session->Run({{"prefix", Tensor::Strings({P("no/such/dir/ckpt")}, Shape{})}}, {}, {"save"}, nullptr),
            NotFoundError(at, "cannot save checkpoint ", P("no/such/dir/ckpt"), ": directory ", P("no/such/dir"),
                          " does not exist"));
  EXPECT_EQ(session->Run({{"prefix", Tensor::Strings({""}, Shape{})}}, {}, {"save"}, nullptr),
            InvalidArgumentError(at, "the checkpoint prefix is empty"));
}

TEST_F(CheckpointOps, GraphRejectsInconsistentAttrs) {
  auto error = [](const std::function<void(GraphBuilder&)>& build) {
    GraphBuilder b;
    build(b);
    return b.status();
  };
  EXPECT_EQ(error([](GraphBuilder& b) {
              Save(b, Prefix(b, "p"), {b.Scalar<float>(1), b.Scalar<float>(2)}, {"a"});
            }),
            InvalidArgumentError("node 'save' (Save): tensor_names has 1 name for 2 tensors"));
  EXPECT_EQ(error([](GraphBuilder& b) {
              Save(b, Prefix(b, "p"), {b.Scalar<float>(1), b.Scalar<float>(2)}, {"a", "a"});
            }),
            InvalidArgumentError("node 'save' (Save): tensor_names has \"a\" twice"));
  EXPECT_EQ(error([](GraphBuilder& b) { Save(b, Prefix(b, "p"), {b.Scalar<float>(1)}, {""}); }),
            InvalidArgumentError("node 'save' (Save): tensor_names has an empty name"));
  EXPECT_EQ(error([](GraphBuilder& b) { Save(b, Prefix(b, "p"), {Var(b, DType::kF32, Shape{}, "v")}, {"v"}); }),
            InvalidArgumentError("node 'save' (Save): tensor \"v\" is a "
                                 "resource handle; save the variable's value "
                                 "(ReadVariable) instead"));
  EXPECT_EQ(error([](GraphBuilder& b) {
              Save(b, b.Const(Tensor::Strings({"a", "b"}, Shape{2})), {b.Scalar<float>(1)}, {"x"});
            }),
            InvalidArgumentError("node 'save' (Save): prefix must be a string scalar, got shape [2]"));
  EXPECT_EQ(error([](GraphBuilder& b) {
              Output not_a_string = b.Scalar<float>(1);
              Save(b, not_a_string, {b.Scalar<float>(2)}, {"x"});
            }),
            InvalidArgumentError("node 'save' (Save): input 0 \"Const\" is "
                                 "f32, but 'prefix' must be string"));
  EXPECT_EQ(error([](GraphBuilder& b) {
              Restore(b, Prefix(b, "p"), {"a", "b"}, {DType::kF32, DType::kF32}, {Shape{1}});
            }),
            InvalidArgumentError("node 'restore' (Restore): shapes has 1 entries for "
                                 "2 tensors (give one per tensor, or "
                                 "none)"));
  EXPECT_EQ(error([](GraphBuilder& b) {
              Restore(b, Prefix(b, "p"), {"a"}, {DType::kF32, DType::kI32});
            }),
            InvalidArgumentError("node 'restore' (Restore): tensor_names has 1 name for 2 tensors"));
  EXPECT_EQ(error([](GraphBuilder& b) { Restore(b, Prefix(b, "p"), {"h"}, {DType::kResource}); }),
            InvalidArgumentError("node 'restore' (Restore): dtypes lists "
                                 "resource, which a checkpoint cannot hold"));
  // An explicit T that disagrees with the inputs.
  EXPECT_EQ(error([](GraphBuilder& b) {
              b.Op("Save", {Prefix(b, "p"), b.Scalar<float>(1)},
                   {{"tensor_names", AttrValue(std::vector<std::string>{"x"})},
                    {"T", AttrValue(std::vector<DType>{DType::kI32})}},
                   "save");
            }),
            InvalidArgumentError("node 'save' (Save): input 1 \"Const_1\" is "
                                 "f32, but 'tensors' must be i32 (attr T)"));
}

// SaveShard through a session: two shards written by two nodes, committed
// by CommitShardedBundle, read back as one bundle; and its attrs checked.
TEST_F(CheckpointOps, SaveShardWritesOneShardOfABundle) {
  auto shard = [](GraphBuilder& b, Output prefix, Output value, const std::string& name, int64_t k, int64_t n) {
    return b.Op("SaveShard", {prefix, value},
                {{"tensor_names", AttrValue(std::vector<std::string>{name})},
                 {"shard", AttrValue(k)},
                 {"num_shards", AttrValue(n)}},
                StrCat("shard", k));
  };
  RuntimeEnv env;
  const std::string prefix = P("sharded");
  GraphBuilder b;
  Output p = Prefix(b, prefix);
  shard(b, p, b.Const(kW), "w", 0, 2);
  shard(b, p, b.Const(kStep), "step", 1, 2);
  auto session = env.Session(b);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> parts;
  ASSERT_TRUE(session->Run({}, {"shard0", "shard1"}, {}, &parts).ok());
  std::vector<checkpoint::BundleIndex> decoded;
  for (const Tensor& part : parts) decoded.push_back(*checkpoint::DecodeIndexPart(part.string_at(0), "test"));
  ASSERT_TRUE(checkpoint::CommitShardedBundle(prefix, decoded, {}).ok());
  auto reader = checkpoint::BundleReader::Open(prefix);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->Read("step")->scalar<int64_t>(), 1234567890123);
  EXPECT_EQ((*reader)->Read("w")->data<float>()[3], 4.25f);

  GraphBuilder bad;
  shard(bad, Prefix(bad, "p"), bad.Scalar<float>(1), "x", 2, 2);
  EXPECT_EQ(bad.status(), InvalidArgumentError("node 'shard2' (SaveShard): shard 2 of 2 is out of range"));
}

}  // namespace
}  // namespace weft
