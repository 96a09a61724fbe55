// Placement, partitioning and the rendezvous, on real devices: two CPU
// devices ([devices.cpu] count = 2) and the test plugin's TESTDEV. Expected
// values are computed by hand or by the same graph on one device.
#include <gtest/gtest.h>

#include <cmath>

#include "core/graph/serialize.h"
#include "core/placement/placer.h"
#include "core/runtime/executor.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/rendezvous.h"
#include "tests/support/node_def.h"
#include "tests/support/output_text.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using placement::ParseDeviceSpec;
using testing::Floats;
using testing::MakeNodeDef;
using testing::RuntimeEnv;

constexpr const char* kTwoCpus = "[devices.cpu]\ncount = 2\n";
// For tests whose messages list this process's devices.
constexpr const char* kNoOpenCl = "[plugins]\ndisable = [\"opencl\"]\n";

TEST(DeviceSpec, ParsesFullPartialAndLegacyNames) {
  auto full = ParseDeviceSpec("/job:worker/task:1/device:OPENCL:0");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->job, "worker");
  EXPECT_EQ(full->task, 1);
  EXPECT_EQ(full->type, "OPENCL");
  EXPECT_EQ(full->ordinal, 0);
  auto any = ParseDeviceSpec("/device:CPU:*");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->type, "CPU");
  EXPECT_EQ(any->ordinal, -1);
  auto shorthand = ParseDeviceSpec("cpu:1");
  ASSERT_TRUE(shorthand.ok());
  EXPECT_EQ(shorthand->type, "CPU");
  EXPECT_EQ(shorthand->ordinal, 1);
  auto legacy = ParseDeviceSpec("/gpu:0");
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->type, "GPU");
  auto type_only = ParseDeviceSpec("/device:OPENCL");
  ASSERT_TRUE(type_only.ok());
  EXPECT_EQ(type_only->ordinal, -1);
}

TEST(DeviceSpec, RejectsMalformedNamesSayingWhy) {
  auto empty = ParseDeviceSpec("");
  EXPECT_EQ(empty.status().message(),
            "\"\" is not a device name (it is empty); write /device:<TYPE>:<N>, /device:<TYPE>:* or <TYPE>:<N>, "
            "e.g. /device:CPU:0");
  auto bad_ordinal = ParseDeviceSpec("/device:CPU:x");
  EXPECT_NE(bad_ordinal.status().message().find("(bad ordinal \"x\")"), std::string::npos)
      << bad_ordinal.status().message();
  auto no_colon = ParseDeviceSpec("/device");
  EXPECT_NE(no_colon.status().message().find("part \"device\" has no ':'"), std::string::npos);
  auto bad_type = ParseDeviceSpec("GPU-0");
  EXPECT_NE(bad_type.status().message().find("the device type must be letters, digits or '_'"), std::string::npos);
  auto bad_task = ParseDeviceSpec("/job:ps/task:-1/device:CPU:0");
  EXPECT_NE(bad_task.status().message().find("bad task \"-1\""), std::string::npos);
}

TEST(GlobMatch, StarsMatchAnyRun) {
  EXPECT_TRUE(placement::GlobMatch("dense1/*", "dense1/MatMul"));
  EXPECT_TRUE(placement::GlobMatch("*", ""));
  EXPECT_TRUE(placement::GlobMatch("*/kernel", "dense2/kernel"));
  EXPECT_TRUE(placement::GlobMatch("a*b*c", "axxbyyc"));
  EXPECT_FALSE(placement::GlobMatch("dense1/*", "dense10"));
  EXPECT_FALSE(placement::GlobMatch("a*b", "ac"));
  EXPECT_TRUE(placement::GlobMatch("exact", "exact"));
}

TEST(Rendezvous, SendFirstOrReceiveFirstBothDeliver) {
  runtime::Rendezvous r;
  const auto k1 = runtime::RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "a:0");
  const auto k2 = runtime::RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "b:0");
  ASSERT_TRUE(r.Send(k1, {Tensor::Scalar<float>(1), nullptr}).ok());
  float got1 = 0, got2 = 0;
  r.RecvAsync(k1, [&](const Status& s, runtime::Rendezvous::Item item) {
    ASSERT_TRUE(s.ok());
    got1 = item.value.scalar<float>();
  });
  r.RecvAsync(k2, [&](const Status& s, runtime::Rendezvous::Item item) {
    ASSERT_TRUE(s.ok());
    got2 = item.value.scalar<float>();
  });
  EXPECT_EQ(got2, 0);
  ASSERT_TRUE(r.Send(k2, {Tensor::Scalar<float>(2), nullptr}).ok());
  EXPECT_EQ(got1, 1);
  EXPECT_EQ(got2, 2);
}

TEST(Rendezvous, KeysDifferInEveryPart) {
  using runtime::RendezvousKey;
  const auto base = RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "a:0", 0, 0);
  EXPECT_EQ(base, RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "a:0", 0, 0));
  EXPECT_FALSE(base == RendezvousKey::Make("/device:CPU:0", 2, "/device:CPU:1", "a:0", 0, 0));
  EXPECT_FALSE(base == RendezvousKey::Make("/device:CPU:1", 1, "/device:CPU:1", "a:0", 0, 0));
  EXPECT_FALSE(base == RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:0", "a:0", 0, 0));
  EXPECT_FALSE(base == RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "a:1", 0, 0));
  EXPECT_FALSE(base == RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "a:0", 1, 0));
  EXPECT_FALSE(base == RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "a:0", 0, 1));
  EXPECT_EQ(RendezvousKey::Make("d0", 1, "d1", "x:0", 2, 3).ToString(), "x:0 from d0 to d1 (frame 2, iteration 3)");
}

TEST(Rendezvous, AbortFailsWaitingAndLaterReceivesAndSends) {
  runtime::Rendezvous r;
  const auto k = runtime::RendezvousKey::Make("d0", 1, "d1", "a:0");
  Status waiting, later;
  r.RecvAsync(k, [&](const Status& s, runtime::Rendezvous::Item) { waiting = s; });
  r.Abort(CancelledError("node x failed"));
  EXPECT_EQ(waiting.message(), "node x failed");
  r.RecvAsync(runtime::RendezvousKey::Make("d0", 1, "d1", "b:0"),
              [&](const Status& s, runtime::Rendezvous::Item) { later = s; });
  EXPECT_EQ(later.code(), Code::kCancelled);
  EXPECT_EQ(r.Send(k, {Tensor::Scalar<float>(1), nullptr}).message(), "node x failed");
}

TEST(Rendezvous, SendingOneKeyTwiceIsAnError) {
  runtime::Rendezvous r;
  const auto k = runtime::RendezvousKey::Make("d0", 1, "d1", "a:0");
  ASSERT_TRUE(r.Send(k, {Tensor::Scalar<float>(1), nullptr}).ok());
  EXPECT_EQ(r.Send(k, {Tensor::Scalar<float>(1), nullptr}).message(),
            "tensor a:0 from d0 to d1 was sent twice in one step");
}

TEST(Placement, TwoCpuDevicesAreListed) {
  RuntimeEnv env(StrCat(kTwoCpus, kNoOpenCl));
  EXPECT_EQ(env.devices()->Names(), (std::vector<std::string>{"/device:CPU:0", "/device:CPU:1"}));
}

// x -> (MatMul on CPU:1) -> Relu on CPU:0, fetched; by hand.
TEST(Placement, ASplitGraphComputesWhatOneDeviceDoes) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 2}, "x");
  Output w = b.Const(Tensor::FromVector<float>({1, -1, 2, 0.5f}, Shape{2, 2}), "w");
  Output y;
  {
    auto d = b.DeviceScope("/device:CPU:1");
    y = b.Op("MatMul", {x, w}, {}, "mm");
  }
  b.Op("Relu", {y}, {}, "relu");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<float>({1, 2, 3, -4}, Shape{2, 2})}}, {"relu", "mm"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // [1 2; 3 -4] x [1 -1; 2 0.5] = [5 0; -5 -5]
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{5, 0, 0, 0}));
  EXPECT_EQ(Floats(out[1]), (std::vector<float>{5, 0, -5, -5}));
}

TEST(Placement, OneTransferPerTensorPerReceivingDevice) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  Output e = b.Op("Exp", {x}, {}, "e");  // CPU:0
  {
    auto d = b.DeviceScope("/device:CPU:1");
    b.Op("Neg", {e}, {}, "n1");
    b.Op("Abs", {e}, {}, "n2");
    b.Op("Square", {e}, {}, "n3");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  ASSERT_EQ(placed->transfers.size(), 1u);
  EXPECT_EQ(placed->transfers[0].tensor, "e");
  EXPECT_EQ(placed->transfers[0].consumers, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(placed->partitions.size(), 2u);
}

// [cluster] transfer_dtype = "bf16": an f32 tensor cut between the CPUs of
// two tasks is narrowed before its _Send and widened after its _Recv, under
// the _Recv's name; other types, and transfers within a task, are not.
TEST(Partition, NarrowsF32BetweenTasksToBf16AndWidensItOnArrival) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{Shape::kUnknownDim, 4}, "x");
  Output n = b.Placeholder(DType::kI64, Shape{}, "n");
  b.Op("Relu", {x}, {}, "remote_f32");
  b.Op("Neg", {n}, {}, "remote_i64");
  b.Op("Abs", {x}, {}, "same_task");
  // Left exact: a value a variable stores, and a small tensor (a rate).
  Output stored = b.Placeholder(DType::kF32, Shape{64, 64}, "stored");
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{64, 64})}}, "v");
  b.Op("Assign", {v, stored}, {}, "restore");
  b.Op("Neg", {stored}, {}, "reads_stored");
  Output rate = b.Placeholder(DType::kF32, Shape{}, "rate");
  b.Op("Neg", {rate}, {}, "reads_rate");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const std::vector<placement::PartitionDevice> devices = {
      {"/job:ps/task:0/device:CPU:0", 1}, {"/job:worker/task:0/device:CPU:0", 2}, {"/job:ps/task:0/device:CPU:1", 3}};
  std::vector<int> device_of(static_cast<std::size_t>(graph->num_nodes()), 0);
  for (const char* on_worker : {"remote_f32", "remote_i64", "v", "restore", "reads_stored", "reads_rate"}) {
    device_of[static_cast<std::size_t>(graph->Find(on_worker)->id)] = 1;
  }
  device_of[static_cast<std::size_t>(graph->Find("same_task")->id)] = 2;
  auto find = [](const GraphDef& def, const std::string& name) -> const NodeDef* {
    for (const NodeDef& node : def.nodes) {
      if (node.name == name) return &node;
    }
    return nullptr;
  };
  auto cut = placement::Partition(*graph, device_of, devices, {DType::kBF16});
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  ASSERT_EQ(cut->transfers.size(), 5u);
  for (const placement::Transfer& t : cut->transfers) {
    SCOPED_TRACE(t.tensor);
    const GraphDef& src = cut->graphs.at(t.src_device);
    const GraphDef& dst = cut->graphs.at(t.dst_device);
    const NodeDef* send = find(src, t.send_node);
    const NodeDef* recv = find(dst, t.recv_node);
    ASSERT_NE(send, nullptr);
    ASSERT_NE(recv, nullptr);
    if (t.tensor == "x" && t.dst_device == 1) {
      EXPECT_EQ(t.wire_dtype, DType::kBF16);
      // ps: x -> Cast to bf16 -> _Send of bf16, under the tensor's key.
      EXPECT_EQ(send->attrs.at("T").get<DType>(), DType::kBF16);
      EXPECT_EQ(send->attrs.at("tensor_name").get<std::string>(), "x");
      ASSERT_EQ(send->inputs.size(), 1u);
      const NodeDef* narrow = find(src, send->inputs[0]);
      ASSERT_NE(narrow, nullptr) << send->inputs[0];
      EXPECT_EQ(narrow->op, "Cast");
      EXPECT_EQ(narrow->inputs, (std::vector<std::string>{"x"}));
      EXPECT_EQ(narrow->attrs.at("DstT").get<DType>(), DType::kBF16);
      // worker: a _Recv of bf16, and the consumers' input is its widening.
      EXPECT_EQ(recv->op, "Cast");
      EXPECT_EQ(recv->attrs.at("DstT").get<DType>(), DType::kF32);
      ASSERT_EQ(recv->inputs.size(), 1u);
      const NodeDef* wire = find(dst, recv->inputs[0]);
      ASSERT_NE(wire, nullptr);
      EXPECT_EQ(wire->op, "_Recv");
      EXPECT_EQ(wire->attrs.at("tensor_type").get<DType>(), DType::kBF16);
      EXPECT_EQ(find(dst, "remote_f32")->inputs, (std::vector<std::string>{t.recv_node}));
    } else {
      // n (i64) to the worker, x to the ps's other CPU, the value the
      // Assign stores and the scalar: as they were.
      EXPECT_EQ(t.wire_dtype, DType::kInvalid);
      EXPECT_EQ(send->inputs, (std::vector<std::string>{t.tensor}));
      EXPECT_EQ(recv->op, "_Recv");
      EXPECT_EQ(recv->attrs.at("tensor_type").get<DType>(), t.dtype);
    }
  }
  // Without the option, no transfer is narrowed.
  auto plain = placement::Partition(*graph, device_of, devices);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  for (const placement::Transfer& t : plain->transfers) EXPECT_EQ(t.wire_dtype, DType::kInvalid) << t.tensor;
  for (const auto& [d, def] : plain->graphs) {
    for (const NodeDef& node : def.nodes) EXPECT_NE(node.op, "Cast") << node.name;
  }
}

TEST(Placement, ControlEdgesBetweenDevicesBecomeTinyTransfers) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}}, "v");
  Output assign = b.Op("Assign", {v, b.Scalar<float>(7)}, {}, "set");  // with v, on CPU:0
  Output read;
  {
    auto d = b.DeviceScope("/device:CPU:1");
    auto c = b.ControlDependencies({assign});
    read = b.Op("Identity", {b.Scalar<float>(1)}, {}, "after_set");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  bool control = false;
  for (const auto& t : placed->transfers) control = control || (t.tensor == "^set" && t.dtype == DType::kBool);
  EXPECT_TRUE(control);
  auto session = env.Session(std::move(*graph));
  std::vector<Tensor> out;
  Status s = session->Run({}, {"after_set"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].scalar<float>(), 1);
}

TEST(Placement, ResourceUsersShareTheVariablesDevice) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output v;
  {
    auto d = b.DeviceScope("/device:CPU:1");
    v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}}, "v");
  }
  b.Op("Assign", {v, b.Scalar<float>(3)}, {}, "set");
  b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, "read");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  const Graph::Node* set = graph->Find("set");
  EXPECT_EQ(
      placed->devices[static_cast<std::size_t>(placed->placement.device[static_cast<std::size_t>(set->id)])]->name(),
      "/device:CPU:1");
  EXPECT_EQ(placed->placement.reason[static_cast<std::size_t>(set->id)],
            "with its colocation group (uses the resource of \"v\"): requested in the graph: /device:CPU:1");
}

TEST(Placement, AStatefulNodeAnEarlierStepPlacedStaysThereOverRequests) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}}, "v");
  {
    auto d = b.DeviceScope("/device:CPU:0");
    b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, "read");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  placement::PlacementOptions options;
  options.fixed = {{"v", "/device:CPU:1"}};
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  const int read = graph->Find("read")->id;
  EXPECT_EQ(placed->placement.device[static_cast<std::size_t>(read)], 1);
  EXPECT_EQ(placed->placement.reason[static_cast<std::size_t>(read)],
            "with its colocation group (uses the resource of \"v\"): stays on /device:CPU:1, where an earlier step "
            "placed \"v\" (it holds state)");
  options.fixed = {{"v", "/device:CPU:7"}};
  placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  ASSERT_FALSE(placed.ok());
  EXPECT_TRUE(
      testing::Contains(placed.status().message(),
                        "holds state on /device:CPU:7, where an earlier step placed it, but that device is gone"));
}

TEST(Placement, ColocateAttrJoinsNodes) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  {
    auto d = b.DeviceScope("/device:CPU:1");
    b.Op("Neg", {x}, {}, "anchor");
  }
  b.Op("Exp", {x}, {{"_colocate", AttrValue(std::vector<std::string>{"anchor"})}}, "follower");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  const int follower = graph->Find("follower")->id;
  EXPECT_EQ(placed->placement.device[static_cast<std::size_t>(follower)], 1);
  EXPECT_NE(placed->placement.reason[static_cast<std::size_t>(follower)].find("_colocate attr names \"anchor\""),
            std::string::npos);
}

TEST(Placement, PinsOverrideTheGraphInFileOrder) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  b.Op("Neg", {x}, {}, "dense1/a");
  b.Op("Exp", {x}, {}, "dense1/b");
  placement::PlacementOptions options;
  options.pins = {{"dense1/b", "/device:CPU:0", "t.toml:2:1"}, {"dense1/*", "/device:CPU:1", "t.toml:3:1"}};
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed->placement.device[static_cast<std::size_t>(graph->Find("dense1/a")->id)], 1);
  EXPECT_EQ(placed->placement.device[static_cast<std::size_t>(graph->Find("dense1/b")->id)], 0);
  EXPECT_EQ(placed->placement.reason[static_cast<std::size_t>(graph->Find("dense1/a")->id)],
            "pinned by placement.pins \"dense1/*\": /device:CPU:1");
}

TEST(Placement, APinToAMissingDeviceIsAnError) {
  RuntimeEnv env;
  GraphBuilder b;
  b.Placeholder(DType::kF32, Shape{}, "x");
  placement::PlacementOptions options;
  options.pins = {{"x", "/device:OPENCL:3", "t.toml:4:1"}};
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  ASSERT_FALSE(placed.ok());
  EXPECT_NE(placed.status().message().find(
                "placement.pins \"x\" = \"/device:OPENCL:3\" (t.toml:4:1): this process has no such device (devices: "
                "/device:CPU:0"),
            std::string::npos)
      << placed.status().message();
  options.pins = {{"x", "GPU-0", "t.toml:4:1"}};
  placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  EXPECT_NE(
      placed.status().message().find("placement.pins \"x\" = \"GPU-0\" (t.toml:4:1): \"GPU-0\" is not a device name"),
      std::string::npos)
      << placed.status().message();
}

TEST(Placement, AMalformedDeviceInTheGraphNamesTheNode) {
  RuntimeEnv env;
  GraphBuilder b;
  {
    auto d = b.DeviceScope("/device:CPU:zero");
    b.Placeholder(DType::kF32, Shape{}, "x");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().message().substr(0, 81),
            "node 'x' (Placeholder) requests a device: \"/device:CPU:zero\" is not a device name");
}

TEST(Placement, AnAbsentRequestedDeviceFallsBackSoftlyOrFailsHard) {
  RuntimeEnv env(kNoOpenCl);
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  {
    auto d = b.DeviceScope("/device:CUDA:0");
    b.Op("Neg", {x}, {}, "n");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto soft = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(soft.ok()) << soft.status().ToString();
  const std::size_t n = static_cast<std::size_t>(graph->Find("n")->id);
  EXPECT_EQ(soft->placement.reason[n],
            "soft placement: wanted /device:CUDA:0 (requested in the graph), but no device of this process matches "
            "\"/device:CUDA:0\" (devices: /device:CPU:0); fell back to /device:CPU:0");
  placement::PlacementOptions hard;
  hard.soft = false;
  auto failed = runtime::PlaceAndPartition(*graph, *env.devices(), hard);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(),
            "cannot place node 'n' (Neg) on /device:CUDA:0 (requested in the graph): no device of this process matches "
            "\"/device:CUDA:0\" (devices: /device:CPU:0)\nSoft placement is off (placement.soft = false); turn it on "
            "to let the placer choose another device.");
}

// TESTDEV has Neg and Relu kernels only (f32).
TEST(Placement, AKernelMissingOnTheRequestedDeviceFallsBackWithTheReason) {
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  {
    auto d = b.DeviceScope("/device:TESTDEV:0");
    b.Op("Exp", {b.Op("Neg", {x}, {}, "n")}, {}, "e");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  const std::size_t e = static_cast<std::size_t>(graph->Find("e")->id);
  const std::size_t n = static_cast<std::size_t>(graph->Find("n")->id);
  EXPECT_EQ(placed->devices[static_cast<std::size_t>(placed->placement.device[n])]->name(), "/device:TESTDEV:0");
  EXPECT_EQ(placed->devices[static_cast<std::size_t>(placed->placement.device[e])]->name(), "/device:CPU:0");
  EXPECT_NE(
      placed->placement.reason[e].find("soft placement: wanted /device:TESTDEV:0 (requested in the graph), but "
                                       "the requested device cannot run it:\n  /device:TESTDEV:0 cannot: node 'e' "
                                       "(Exp): no TESTDEV kernel for Exp with T=f32; the TESTDEV plugin has no "
                                       "kernel for this op"),
      std::string::npos)
      << placed->placement.reason[e];
  // And it runs: Exp(-x) across the two devices.
  auto session = env.Session(std::move(*graph));
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<float>({0, 1, 2})}}, {"e"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FLOAT_EQ(out[0].data<float>()[1], std::exp(-1.0f));
}

TEST(Placement, AShapeAwareQueryCanRefuseANode) {
  // TESTDEV's Neg refuses inputs of rank >= 3 in its query.
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  GraphBuilder b;
  Output small = b.Placeholder(DType::kF32, Shape{3}, "small");
  Output big = b.Placeholder(DType::kF32, Shape{2, 2, 2}, "big");
  {
    auto d = b.DeviceScope("/device:TESTDEV:0");
    b.Op("Neg", {small}, {}, "n_small");
    b.Op("Neg", {big}, {}, "n_big");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  const std::size_t n_small = static_cast<std::size_t>(graph->Find("n_small")->id);
  const std::size_t n_big = static_cast<std::size_t>(graph->Find("n_big")->id);
  EXPECT_EQ(placed->devices[static_cast<std::size_t>(placed->placement.device[n_small])]->name(), "/device:TESTDEV:0");
  EXPECT_EQ(placed->devices[static_cast<std::size_t>(placed->placement.device[n_big])]->name(), "/device:CPU:0");
  EXPECT_NE(placed->placement.reason[n_big].find("/device:TESTDEV:0 cannot: node 'n_big' (Neg): TESTDEV kernel for "
                                                 "Neg does not run these shapes: the test device negates vectors and "
                                                 "matrices only"),
            std::string::npos)
      << placed->placement.reason[n_big];
}

TEST(Placement, AGroupNoDeviceCanRunIsAnErrorWithTheChain) {
  // A TESTDEV-only request on a group with a CPU-only member.
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  GraphBuilder b2;
  Output x = b2.Placeholder(DType::kF32, Shape{3}, "x");
  b2.Op("Relu", {x}, {}, "r");  // CPU and TESTDEV
  b2.Op("Exp", {x}, {{"_colocate", AttrValue(std::vector<std::string>{"only_testdev"})}}, "cpu_only");
  b2.Op("Neg", {x}, {}, "only_testdev");
  auto graph = b2.Build();
  ASSERT_TRUE(graph.ok());
  placement::PlacementOptions options;
  options.priority = {"TESTDEV", "CPU"};
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  // Neg runs on both, Exp on CPU only: the group goes to the CPU.
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  EXPECT_EQ(placed
                ->devices[static_cast<std::size_t>(
                    placed->placement.device[static_cast<std::size_t>(graph->Find("only_testdev")->id)])]
                ->name(),
            "/device:CPU:0");
  // With the group asked onto TESTDEV and soft placement off: the chain.
  options.soft = false;
  options.pins = {{"only_testdev", "/device:TESTDEV:0", "t.toml:1:1"}};
  placed = runtime::PlaceAndPartition(*graph, *env.devices(), options);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(
      placed.status().message(),
      "cannot place node 'cpu_only' (Exp) on /device:TESTDEV:0 (pinned by placement.pins \"only_testdev\" for "
      "\"only_testdev\"): the requested device cannot run it:\n  /device:TESTDEV:0 cannot: node 'cpu_only' (Exp): "
      "no TESTDEV kernel for Exp with T=f32; the TESTDEV plugin has no kernel for this op\nThe group that must "
      "share a device:\n  node 'cpu_only' (Exp) (its _colocate attr names \"only_testdev\")\n  node "
      "'only_testdev' (Neg), pinned by placement.pins \"only_testdev\": /device:TESTDEV:0\nSoft placement is off "
      "(placement.soft = false); turn it on to let the placer choose another device.");
}

TEST(Placement, AnOpNoDeviceHasIsAnError) {
  // Only TESTDEV (Neg and Relu): nothing can run Exp.
  RuntimeEnv env("[plugins]\ndisable = [\"cpu\", \"opencl\"]\n", {WEFT_TEST_PLUGIN_ROOT "/good"});
  ASSERT_EQ(env.devices()->Names(), (std::vector<std::string>{"/device:TESTDEV:0"}));
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  b.Op("Exp", {b.Op("Neg", {x}, {}, "n")}, {}, "e");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto placed = runtime::PlaceAndPartition(*graph, *env.devices(), {});
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(placed.status().message(),
            "cannot place node 'e' (Exp): no device can run it.\n  /device:TESTDEV:0 cannot: node 'e' (Exp): no "
            "TESTDEV kernel for Exp with T=f32; the TESTDEV plugin has no kernel for this op");
}

TEST(Placement, AFailingPartCancelsTheOthersWithoutAHang) {
  // Relu on TESTDEV fails; the CPU part waits for its result in a _Recv.
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  Output r;
  {
    auto d = b.DeviceScope("/device:TESTDEV:0");
    r = b.Op("Relu", {x}, {}, "hangs_up");
  }
  b.Op("Exp", {r}, {}, "after");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<float>({1, 2, 3})}}, {"after"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kAborted);
  EXPECT_EQ(s.message(), "node 'hangs_up' (Relu) on /device:TESTDEV:0: the frobnicator hung up (test)");
}

// Loads configs/models/fashion_mlp.wgt with a setter (Placeholder +
// Assign) per variable, so both runs start from the same weights.
Graph MlpWithSetters(std::vector<std::pair<std::string, Tensor>>* feeds) {
  auto def = ReadGraphFile(WEFT_SOURCE_DIR "/configs/models/fashion_mlp.wgt");
  EXPECT_TRUE(def.ok()) << def.status().ToString();
  auto base = Graph::FromGraphDef(*def);
  EXPECT_TRUE(base.ok()) << base.status().ToString();
  uint32_t state = 12345;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(state >> 8) % 2001 - 1000) / 20000.0f;
  };
  std::vector<NodeDef> extra;
  for (const Graph::Node& node : base->nodes()) {
    if (node.op_name() != "VarHandle") continue;
    const Shape shape = node.def.attrs.at("shape").get<Shape>();
    NodeDef ph;
    ph.name = StrCat("set/", node.name(), "/value");
    ph.op = "Placeholder";
    ph.attrs = {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(shape)}};
    NodeDef assign;
    assign.name = StrCat("set/", node.name());
    assign.op = "Assign";
    assign.inputs = {node.name(), ph.name};
    extra.push_back(ph);
    extra.push_back(assign);
    auto value = Tensor::Allocate(DType::kF32, shape);
    for (int64_t i = 0; i < value->num_elements(); ++i) value->data<float>()[i] = next();
    feeds->push_back({ph.name, *value});
  }
  for (NodeDef& n : extra) def->nodes.push_back(std::move(n));
  auto graph = Graph::FromGraphDef(std::move(*def));
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(*graph);
}

std::vector<Tensor> RunMlp(const std::string& config, const placement::PlacementOptions& options, std::size_t* parts) {
  RuntimeEnv env(config);
  std::vector<std::pair<std::string, Tensor>> setters;
  Graph graph = MlpWithSetters(&setters);
  auto placed = runtime::PlaceAndPartition(graph, *env.devices(), options);
  EXPECT_TRUE(placed.ok()) << placed.status().ToString();
  *parts = placed.ok() ? std::max<std::size_t>(1, placed->partitions.size()) : 0;
  runtime::SessionOptions session_options;
  session_options.placement = options;
  auto session = env.Session(std::move(graph), session_options);
  std::vector<std::string> targets;
  for (const auto& [name, value] : setters) targets.push_back(name.substr(0, name.size() - 6));
  Status s = session->Run(setters, {}, targets, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto images = Tensor::Allocate(DType::kF32, Shape{8, 784});
  auto labels = Tensor::Allocate(DType::kI64, Shape{8});
  for (int64_t i = 0; i < images->num_elements(); ++i)
    images->data<float>()[i] = static_cast<float>((i * 37) % 256) / 255.0f;
  for (int64_t i = 0; i < 8; ++i) labels->data<int64_t>()[i] = (i * 3) % 10;
  std::vector<Tensor> out;
  s = session->Run({{"images", *images}, {"labels", *labels}}, {"loss", "probabilities", "accuracy"}, {}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // In plain host memory: the devices close with |env|.
  std::vector<Tensor> copies;
  for (const Tensor& t : out) copies.push_back(*t.DeepCopy());
  return copies;
}

TEST(Placement, TheSampleMlpSplitAcrossTwoCpusEqualsOneCpu) {
  std::size_t parts_one = 0, parts_two = 0;
  const std::vector<Tensor> one = RunMlp("", {}, &parts_one);
  placement::PlacementOptions split;
  split.pins = {{"dense2/*", "/device:CPU:1", "test"}, {"loss", "/device:CPU:1", "test"}};
  const std::vector<Tensor> two = RunMlp(kTwoCpus, split, &parts_two);
  EXPECT_EQ(parts_one, 1u);
  EXPECT_EQ(parts_two, 2u);
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  for (std::size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].shape(), two[i].shape());
    EXPECT_EQ(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].byte_size()), 0) << "fetch " << i;
  }
  EXPECT_TRUE(std::isfinite(one[0].scalar<float>()));
}

TEST(Placement, TheSampleMlpWithItsForwardOnOpenClMatchesTheCpu) {
  {
    RuntimeEnv probe;
    if (probe.devices()->Find("/device:OPENCL:0") == nullptr) {
      GTEST_SKIP() << "no OpenCL device (the opencl plugin is not built, or no ICD such as pocl-opencl-icd)";
    }
  }
  std::size_t parts_cpu = 0, parts_ocl = 0;
  const std::vector<Tensor> cpu = RunMlp("", {}, &parts_cpu);
  placement::PlacementOptions forward_on_opencl;
  forward_on_opencl.pins = {{"dense*", "/device:OPENCL:0", "test"}};  // the loss stays on the CPU
  const std::vector<Tensor> ocl = RunMlp("", forward_on_opencl, &parts_ocl);
  EXPECT_EQ(parts_ocl, 2u);
  ASSERT_EQ(ocl.size(), cpu.size());
  for (std::size_t i = 0; i < 2; ++i) {  // loss, probabilities
    ASSERT_EQ(cpu[i].shape(), ocl[i].shape());
    for (int64_t k = 0; k < cpu[i].num_elements(); ++k) {
      EXPECT_NEAR(ocl[i].data<float>()[k], cpu[i].data<float>()[k], 1e-5 + 1e-4 * std::fabs(cpu[i].data<float>()[k]))
          << "fetch " << i << " element " << k;
    }
  }
  EXPECT_EQ(ocl[2].scalar<float>(), cpu[2].scalar<float>());  // accuracy: the same argmax
}

TEST(Placement, TimeoutsCancelEveryPart) {
  RuntimeEnv env(kTwoCpus);
  GraphBuilder b;
  Output q = b.Op("FIFOQueue", {}, {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "q");
  Output got;
  {
    auto d = b.DeviceScope("/device:CPU:0");
    got = b.Op("QueueDequeueMany", {q, b.Scalar<int32_t>(1)},
               {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "deq");
  }
  {
    auto d = b.DeviceScope("/device:CPU:1");
    b.Op("Neg", {got}, {}, "after");
  }
  auto graph = b.Build();
  if (!graph.ok()) GTEST_SKIP() << graph.status().ToString();
  auto session = env.Session(std::move(*graph));
  runtime::RunOptions options;
  options.timeout_ms = 200;
  std::vector<Tensor> out;
  Status s = session->Run({}, {"after"}, {}, &out, options);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
}

TEST(PlacementConfig, PinsPriorityAndSoftComeFromToml) {
  auto config = config::ParseConfig(
      "[placement]\nsoft = false\npriority = [\"OPENCL\", \"CPU\"]\n[placement.pins]\n\"z/*\" = \"/device:CPU:1\"\n"
      "\"a/*\" = \"/device:OPENCL:0\"\n",
      "t.toml", "/");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_FALSE(config->placement.soft);
  EXPECT_EQ(config->placement.priority, (std::vector<std::string>{"OPENCL", "CPU"}));
  ASSERT_EQ(config->placement.pins.size(), 2u);
  EXPECT_EQ(config->placement.pins[0].pattern, "z/*");  // file order, not sorted
  EXPECT_EQ(config->placement.pins[0].where, "t.toml:5:1");
  EXPECT_EQ(config->placement.pins[1].device, "/device:OPENCL:0");
  auto options = runtime::PlacementOptionsFromConfig(*config);
  EXPECT_EQ(options.pins[1].pattern, "a/*");
  auto defaults = config::ParseConfig("", "t.toml", "/");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(runtime::PlacementOptionsFromConfig(*defaults).soft);
  EXPECT_EQ(runtime::PlacementOptionsFromConfig(*defaults).priority,
            (std::vector<std::string>{"CUDA", "HIP", "CPU", "OPENCL"}));
}

TEST(PlacementConfig, BadPinsAreReportedWithTheirPositions) {
  auto not_string = config::ParseConfig("[placement.pins]\n\"a/*\" = 3\n", "t.toml", "/");
  ASSERT_FALSE(not_string.ok());
  EXPECT_EQ(not_string.status().message(),
            "t.toml:2:9: placement.pins.a/*: expected a device name such as \"/device:CPU:1\"");
  auto not_table = config::ParseConfig("[placement]\npins = \"dense1\"\n", "t.toml", "/");
  ASSERT_FALSE(not_table.ok());
  EXPECT_NE(not_table.status().message().find("placement.pins: expected a table of \"node name pattern\" = \"device\""),
            std::string::npos)
      << not_table.status().message();
  auto empty = config::ParseConfig("[placement.pins]\n\"a\" = \"\"\n", "t.toml", "/");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("placement.pins.a: the device is empty"), std::string::npos);
  auto typo = config::ParseConfig("[placement]\nsoftt = true\n", "t.toml", "/");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("did you mean"), std::string::npos) << typo.status().message();
}

// Dead values across a cut (a branch not taken, a loop's last check): a
// _Send of a dead input still runs and sends a dead marker; a _Recv that
// gets one makes its output dead.
class DeadValues : public ::testing::Test {
 protected:
  void SetUp() override {
    // A session enables the kernels' host services.
    GraphBuilder b;
    b.Const(Tensor::Scalar<float>(1), "c");
    session_ = env_.Session(b);
    device_ = env_.devices()->Find("/device:CPU:0");
    ASSERT_NE(device_, nullptr);
  }

  static AttrMap Ends() {
    return {{"tensor_name", AttrValue(std::string("x:0"))},
            {"send_device", AttrValue(std::string("/device:CPU:0"))},
            {"send_device_incarnation", AttrValue(int64_t{1})},
            {"recv_device", AttrValue(std::string("/device:CPU:1"))}};
  }
  static runtime::RendezvousKey Key() {
    return runtime::RendezvousKey::Make("/device:CPU:0", 1, "/device:CPU:1", "x:0");
  }

  // Runs |def| once, every node on CPU:0, meeting others in |rendezvous|.
  Status Run(GraphDef def, runtime::Rendezvous& rendezvous, bool cancelled = false) {
    auto graph = Graph::FromGraphDef(std::move(def));
    if (!graph.ok()) return graph.status();
    auto shared = std::make_shared<const Graph>(std::move(*graph));
    std::vector<const runtime::RuntimeDevice*> devices(static_cast<std::size_t>(shared->num_nodes()), device_);
    auto executor = runtime::Executor::Create(
        shared, devices, nullptr,
        [](const Graph& g, const Graph::Node& node,
           const runtime::RuntimeDevice& d) -> Expected<std::shared_ptr<runtime::OpKernel>> {
          WEFT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::OpKernel> kernel, runtime::CreateKernel(g, node, d));
          return std::shared_ptr<runtime::OpKernel>(std::move(kernel));
        });
    if (!executor.ok()) return executor.status();
    std::vector<Tensor> args, retvals(1);
    runtime::StepInfo step;
    step.args = &args;
    step.retvals = &retvals;
    step.rendezvous = &rendezvous;
    step.cancelled.store(cancelled);
    Status status = (*executor)->Run(step, nullptr);
    produced_ = retvals[0].valid();
    return status;
  }

  RuntimeEnv env_;
  std::unique_ptr<runtime::Session> session_;
  const runtime::RuntimeDevice* device_ = nullptr;
  bool produced_ = false;  // the last Run's output 0
};

TEST_F(DeadValues, ASendOfADeadValueSendsADeadMarker) {
  GraphDef def;
  def.nodes.push_back(MakeNodeDef("x", "Const", {},
                                  {{"dtype", AttrValue(DType::kF32)}, {"value", AttrValue(Tensor::Scalar<float>(2))}}));
  def.nodes.push_back(MakeNodeDef(
      "p", "Const", {}, {{"dtype", AttrValue(DType::kBool)}, {"value", AttrValue(Tensor::Scalar<bool>(false))}}));
  def.nodes.push_back(MakeNodeDef("s", "Switch", {"x", "p"}, {{"T", AttrValue(DType::kF32)}}));
  AttrMap send = Ends();
  send.emplace("T", AttrValue(DType::kF32));
  def.nodes.push_back(MakeNodeDef("send", "_Send", {"s:1"}, send));  // the branch not taken
  runtime::Rendezvous rendezvous;
  Status s = Run(std::move(def), rendezvous);
  ASSERT_TRUE(s.ok()) << s.ToString();
  bool got = false;
  rendezvous.RecvAsync(Key(), [&](const Status& status, runtime::Rendezvous::Item item) {
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_TRUE(item.is_dead);
    EXPECT_FALSE(item.value.valid());
    got = true;
  });
  EXPECT_TRUE(got);
}

GraphDef RecvToRetval(bool may_be_dead) {
  AttrMap recv = {{"tensor_name", AttrValue(std::string("x:0"))},
                  {"send_device", AttrValue(std::string("/device:CPU:0"))},
                  {"send_device_incarnation", AttrValue(int64_t{1})},
                  {"recv_device", AttrValue(std::string("/device:CPU:1"))},
                  {"tensor_type", AttrValue(DType::kF32)},
                  {"shape", AttrValue(Shape{})}};
  if (may_be_dead) recv.emplace("may_be_dead", AttrValue(true));
  GraphDef def;
  NodeDef r;
  r.name = "recv";
  r.op = "_Recv";
  r.attrs = std::move(recv);
  def.nodes.push_back(std::move(r));
  NodeDef id;
  id.name = "id";
  id.op = "Identity";
  id.inputs = {"recv"};
  id.attrs = {{"T", AttrValue(DType::kF32)}};
  def.nodes.push_back(std::move(id));
  NodeDef ret;
  ret.name = "ret";
  ret.op = "_Retval";
  ret.inputs = {"id"};
  ret.attrs = {{"T", AttrValue(DType::kF32)}, {"index", AttrValue(int64_t{0})}};
  def.nodes.push_back(std::move(ret));
  return def;
}

TEST_F(DeadValues, ARecvOfADeadMarkerGivesADeadOutput) {
  runtime::Rendezvous rendezvous;
  ASSERT_TRUE(rendezvous.Send(Key(), runtime::Rendezvous::Item{Tensor(), device_, true}).ok());
  Status s = Run(RecvToRetval(/*may_be_dead=*/true), rendezvous);
  // The dead value went on through the Identity to the fetch.
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("the fetched value is dead"), std::string::npos) << s.ToString();

  runtime::Rendezvous live;
  ASSERT_TRUE(live.Send(Key(), runtime::Rendezvous::Item{Tensor::Scalar<float>(3), device_, false}).ok());
  s = Run(RecvToRetval(/*may_be_dead=*/true), live);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(DeadValues, ARecvNotMarkedMayBeDeadRefusesADeadMarker) {
  runtime::Rendezvous rendezvous;
  ASSERT_TRUE(rendezvous.Send(Key(), runtime::Rendezvous::Item{Tensor(), device_, true}).ok());
  Status s = Run(RecvToRetval(/*may_be_dead=*/false), rendezvous);
  EXPECT_EQ(s.code(), Code::kInternal) << s.ToString();
  EXPECT_NE(s.message().find("received a dead value, but this part of the graph has no control flow; a _Recv that "
                             "may receive one needs may_be_dead = true"),
            std::string::npos)
      << s.ToString();
}

// A step cancelled from outside (a task's AbortStep, its caller's restart)
// before its nodes ran ends CANCELLED, not OK with its outputs missing (what
// the chaos runs found: the client was told "output 0 was not produced").
using CancelledStep = DeadValues;

TEST_F(CancelledStep, EndsCancelledRatherThanOkWithoutItsOutputs) {
  GraphDef def;
  def.nodes.push_back(MakeNodeDef("x", "Const", {},
                                  {{"dtype", AttrValue(DType::kF32)}, {"value", AttrValue(Tensor::Scalar<float>(2))}}));
  def.nodes.push_back(
      MakeNodeDef("r", "_Retval", {"x"}, {{"T", AttrValue(DType::kF32)}, {"index", AttrValue(int64_t{0})}}));
  runtime::Rendezvous rendezvous;
  Status s = Run(def, rendezvous, /*cancelled=*/true);
  EXPECT_EQ(s.code(), Code::kCancelled) << s.ToString();
  EXPECT_EQ(s.message(), "the step was cancelled before all of its nodes here ran");
  EXPECT_FALSE(produced_);
  // Not cancelled, the same graph runs and makes its output.
  s = Run(def, rendezvous);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(produced_);
}

}  // namespace
}  // namespace weft
