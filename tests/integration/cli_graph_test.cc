// The `weft` binary end to end on graph files (run, inspect, dot, convert,
// ops), the commands' help and usage errors, `weft conformance`, `weft
// optimize` and `weft bench`. Every error path checks the message and the
// exit code. The fixture is in cli_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/tensor/npy.h"
#include "tests/integration/cli_fixture.h"
#include "tests/support/output_text.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;

// --- Graph files: run, inspect, dot, convert, ops ------------------------------

const std::string kAddGraph = R"((producer = 1, minConsumer = 1, nodes = [
  (name = "x", op = "Placeholder", attrs = [(name = "dtype", value = (type = f32)), (name = "shape", value = (shape = (dims = [-1, 3])))]),
  (name = "y", op = "Placeholder", attrs = [(name = "dtype", value = (type = f32)), (name = "shape", value = (shape = (dims = [3])))]),
  (name = "scope/sum", op = "Add", inputs = ["x", "y"]),
  (name = "scope/neg", op = "Neg", inputs = ["scope/sum"]) ]))";

TEST_F(Cli, RunWritesFetchesAndPrintsSmallOnes) {
  const std::string graph = Write("add.wgt", kAddGraph);
  const std::string x = (dir_ / "x.npy").string(), y = (dir_ / "y.npy").string();
  ASSERT_TRUE(WriteNpy(x, Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})).ok());
  ASSERT_TRUE(WriteNpy(y, Tensor::FromVector<float>({10, 20, 30})).ok());
  ProcessResult r = Weft({"run", graph, "--feed", "x=" + x, "--feed", "y=" + y, "--fetch", "scope/neg", "--out",
                          (dir_ / "out").string(), "--trace", (dir_ / "trace.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.out.find("scope/neg: f32[2,3]\n           -11        -22        -33\n           -14        -25        -36\n"),
      std::string::npos)
      << r.out;
  auto saved = ReadNpy((dir_ / "out" / "scope_neg.npy").string());
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->DebugString(), "f32[2,3] {-11, -22, -33, -14, -25, -36}");
  std::ifstream trace(dir_ / "trace.json");
  std::stringstream t;
  t << trace.rdbuf();
  EXPECT_NE(t.str().find("\"name\":\"scope/neg\""), std::string::npos) << t.str();
}

TEST_F(Cli, RunBadInputsAreOneClearError) {
  const std::string graph = Write("add.wgt", kAddGraph);
  const std::string x = (dir_ / "x.npy").string();
  ASSERT_TRUE(WriteNpy(x, Tensor::FromVector<float>({1, 2, 3}, Shape{1, 3})).ok());
  const std::string x64 = (dir_ / "x64.npy").string();
  ASSERT_TRUE(WriteNpy(x64, Tensor::FromVector<double>({1, 2, 3}, Shape{1, 3})).ok());
  const std::string x4 = (dir_ / "x4.npy").string();
  ASSERT_TRUE(WriteNpy(x4, Tensor::FromVector<float>({1, 2, 3, 4}, Shape{1, 4})).ok());
  const std::string garbage_npy = Write("bad.npy", "not numpy");
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"run", graph},
       "weft: error: nothing to run: give at least one --fetch or --target (`weft inspect " + graph +
           "` lists the graph's outputs)\n"},
      {{"run", graph, "--feed", "x", "--fetch", "scope/neg"}, "weft: error: --feed \"x\": expected NAME=FILE.npy\n"},
      {{"run", graph, "--feed", "x=" + garbage_npy, "--fetch", "scope/neg"},
       "weft: error: --feed x: " + garbage_npy +
           ": not a valid .npy file: it does not start with the magic \"\\x93NUMPY\"\n"},
      {{"run", graph, "--feed", "x=" + x, "--fetch", "scope/nge"},
       "weft: error: fetch \"scope/nge\": the graph has no node \"scope/nge\"; did you mean \"scope/neg\"?\n"},
      {{"run", graph, "--feed", "x=" + x64, "--fetch", "scope/sum"}, "weft: error: input \"x\" is f32, not f64\n"},
      {{"run", graph, "--feed", "x=" + x4, "--fetch", "scope/sum"},
       "weft: error: input \"x\": shape [1,4] does not fit the model's [?,3]\n"},
      {{"run", graph, "--feed", "x=" + x, "--fetch", "scope/sum"},
       "weft: error: node 'y' (Placeholder) on /device:CPU:0: Placeholder 'y' was not fed; give it a value (weft run "
       "--feed y=FILE.npy, or a feed in Session::Run)\n"},
  };
  for (const Case& c : cases) {
    ProcessResult r = Weft(c.args);
    EXPECT_EQ(r.exit_code, 1) << StrJoin(c.args, " ");
    EXPECT_EQ(r.err, c.error) << StrJoin(c.args, " ");
  }
}

TEST_F(Cli, BadGraphFilesAreOneClearError) {
  const std::string garbage = Write("garbage.wg", std::string(24, '\xee'));
  ProcessResult r = Weft({"run", garbage, "--fetch", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("weft: error: " + garbage + ": not a valid .wg graph file: ", 0), 0u) << r.err;
  const std::string truncated = Write("truncated.wg", "abc");
  r = Weft({"inspect", truncated});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: " + truncated +
                       ": not a valid .wg graph file: its size (3 bytes) is not a whole number of 8-byte words; is it "
                       "truncated?\n");
  const std::string unknown_op = Write("unknown.wgt", "(nodes = [(name = \"a\", op = \"Frob\")])");
  r = Weft({"run", unknown_op, "--fetch", "a"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: " + unknown_op + ": node 'a' (Frob): unknown op \"Frob\" (`weft ops` lists them)\n");
  const std::string wrong_attr = Write(
      "attr.wgt",
      R"((nodes = [(name = "a", op = "Placeholder", attrs = [(name = "dtype", value = (int = 3)), (name = "shape", value = (shape = ()))])]))");
  r = Weft({"run", wrong_attr, "--fetch", "a"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: " + wrong_attr + ": node 'a' (Placeholder): attr \"dtype\" must be a type, got 3 (an int)\n");
  const std::string cycle = Write(
      "cycle.wgt", R"((nodes = [(name = "a", op = "Neg", inputs = ["b"]), (name = "b", op = "Neg", inputs = ["a"])]))");
  r = Weft({"run", cycle, "--fetch", "a"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: " + cycle +
                ": the graph has a cycle: 'a' -> 'b' -> 'a' (loops need the control-flow ops Enter/NextIteration)\n");
  const std::string shapes = Write("shapes.wgt", R"((nodes = [
    (name = "a", op = "Placeholder", attrs = [(name = "dtype", value = (type = f32)), (name = "shape", value = (shape = (dims = [2, 3])))]),
    (name = "m", op = "MatMul", inputs = ["a", "a"])]))");
  r = Weft({"run", shapes, "--fetch", "m"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: " + shapes + ": node 'm' (MatMul): inner dimensions differ: [2,3] x [2,3] (3 vs 2)\n");
}

TEST_F(Cli, InspectSummarisesAGraph) {
  const std::string graph = Write("add.wgt", kAddGraph);
  ProcessResult r = Weft({"inspect", graph});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Inputs:\n  x  f32[?,3]\n  y  f32[3]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Outputs:\n  scope/neg  f32[?,3]\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  Placeholder  2\n"), std::string::npos) << r.out;
  r = Weft({"inspect", WEFT_SOURCE_DIR "/configs/models/mnist_mlp.wgt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 784*64 + 64 + 64*10 + 10 weights and biases, as constants.
  EXPECT_NE(r.out.find("constants  4 holding 50890 elements"), std::string::npos) << r.out;
}

TEST_F(Cli, DotDrawsScopesAsClusters) {
  const std::string graph = Write("add.wgt", kAddGraph);
  ProcessResult r = Weft({"dot", graph});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("digraph weft {")) << r.out;
  EXPECT_NE(r.out.find("subgraph cluster_0 {\n    label=\"scope\";"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"scope/sum\" -> \"scope/neg\" [label=\"f32[?,3]\"];"), std::string::npos) << r.out;
}

// A loop frame "loop" (counting x up to lim through a frame "loop/inner"
// nested in it), written by hand so that it does not depend on the
// builders.
const std::string kLoopGraph = R"((producer = 1, minConsumer = 1, nodes = [
  (name = "x", op = "Placeholder", attrs = [(name = "dtype", value = (type = i32)), (name = "shape", value = (shape = (dims = [])))]),
  (name = "lim", op = "Placeholder", attrs = [(name = "dtype", value = (type = i32)), (name = "shape", value = (shape = (dims = [])))]),
  (name = "loop/Enter", op = "Enter", inputs = ["x"], attrs = [(name = "frame_name", value = (string = "loop"))]),
  (name = "loop/Enter_1", op = "Enter", inputs = ["lim"], attrs = [(name = "frame_name", value = (string = "loop")), (name = "is_constant", value = (bool = true))]),
  (name = "loop/Merge", op = "Merge", inputs = ["loop/Enter", "loop/NextIteration"], attrs = [(name = "T", value = (type = i32))]),
  (name = "loop/Less", op = "Less", inputs = ["loop/Merge", "loop/Enter_1"]),
  (name = "loop/LoopCond", op = "LoopCond", inputs = ["loop/Less"]),
  (name = "loop/Switch", op = "Switch", inputs = ["loop/Merge", "loop/LoopCond"]),
  (name = "loop/Identity", op = "Identity", inputs = ["loop/Switch:1"]),
  (name = "loop/inner/Enter", op = "Enter", inputs = ["loop/Identity"], attrs = [(name = "frame_name", value = (string = "loop/inner"))]),
  (name = "loop/inner/Neg", op = "Neg", inputs = ["loop/inner/Enter"]),
  (name = "loop/inner/Exit", op = "Exit", inputs = ["loop/inner/Neg"]),
  (name = "loop/NextIteration", op = "NextIteration", inputs = ["loop/inner/Exit"]),
  (name = "loop/Exit", op = "Exit", inputs = ["loop/Switch"]),
  (name = "out", op = "Neg", inputs = ["loop/Exit"]) ]))";

TEST_F(Cli, DotDrawsLoopFramesAsClusters) {
  const std::string graph = Write("loop.wgt", kLoopGraph);
  ProcessResult r = Weft({"dot", graph});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Top level: the placeholders, the output, and the Exit of "loop" (in
  // its scope cluster); then the frame "loop", holding its Enters and the
  // frame "loop/inner", which holds the inner Enter and Neg but not the
  // inner Exit (its output is back in "loop").
  const std::string expected =
      "  \"x\" [label=\"x\\\\nPlaceholder\"];\n"
      "  \"lim\" [label=\"lim\\\\nPlaceholder\"];\n"
      "  \"out\" [label=\"out\\\\nNeg\"];\n"
      "  subgraph cluster_0 {\n"
      "    label=\"loop\";\n"
      "    style=rounded;\n"
      "    \"loop/Exit\" [label=\"Exit\\\\nExit\"];\n"
      "  }\n"
      "  subgraph cluster_1 {\n"
      "    label=\"loop\";\n"
      "    style=\"dashed,bold\";\n"
      "    color=blue;\n"
      "    subgraph cluster_2 {\n"
      "      label=\"loop\";\n"
      "      style=rounded;\n"
      "      \"loop/Enter\" [label=\"Enter\\\\nEnter\"];\n";
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("      \"loop/NextIteration\" [label=\"NextIteration\\\\nNextIteration\"];\n"
                       "      subgraph cluster_3 {\n        label=\"loop/inner\";\n        style=rounded;\n"
                       "        \"loop/inner/Exit\" [label=\"Exit\\\\nExit\"];\n      }\n    }\n"
                       "    subgraph cluster_4 {\n      label=\"loop/inner\";\n      style=\"dashed,bold\";\n"
                       "      color=blue;\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("          label=\"loop/inner\";\n          style=rounded;\n"
                       "          \"loop/inner/Enter\" [label=\"Enter\\\\nEnter\"];\n"
                       "          \"loop/inner/Neg\" [label=\"Neg\\\\nNeg\"];\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"loop/NextIteration\" -> \"loop/Merge\" [label=\"i32[]\"];"), std::string::npos) << r.out;
}

TEST_F(Cli, ConvertRoundTripsBetweenFormats) {
  const std::string graph = Write("add.wgt", kAddGraph);
  const std::string wg = (dir_ / "add.wg").string(), wgt = (dir_ / "again.wgt").string();
  ASSERT_EQ(Weft({"convert", graph, wg}).exit_code, 0);
  ASSERT_EQ(Weft({"convert", wg, wgt}).exit_code, 0);
  ProcessResult a = Weft({"dot", graph}), b = Weft({"dot", wgt});
  EXPECT_EQ(a.out, b.out);
  ProcessResult r = Weft({"convert", graph, (dir_ / "x.pb").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: \"" + (dir_ / "x.pb").string() + "\": graph files end in .wg (binary) or .wgt (text)\n");
}

TEST_F(Cli, OpsListsEveryOpWithItsDevices) {
  ProcessResult r = Weft({"ops"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nMatMul "), std::string::npos);
  EXPECT_EQ(r.out.find("_Arg"), std::string::npos);  // internal ops are not listed
  const auto at = r.out.find(" ops; ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto line_start = r.out.rfind('\n', at) + 1;
  const int total = std::stoi(r.out.substr(line_start, at - line_start));
  const auto cpu = r.out.find(" with a CPU kernel", at);
  const int with_cpu = std::stoi(r.out.substr(at + 6, cpu - at - 6));
  EXPECT_GE(total, 110);
  EXPECT_EQ(with_cpu, total) << "every op should run on the CPU";
  r = Weft({"ops", "Conv2D"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("2-D convolution"), std::string::npos);
  // Internal ops are shown when named: a plugin author reads the fused
  // ops' signatures this way (docs/plugins.md).
  r = Weft({"ops", "_FusedConv2D"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("_FusedConv2D(input: T, filter: T, args: N * T) -> (output: T)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  devices: CPU\n"), std::string::npos) << r.out;
  // Deliberate departures from NumPy and PyTorch are documented.
  r = Weft({"ops", "Gelu"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Gelu(-inf) is 0, the limit"), std::string::npos) << r.out;
  r = Weft({"ops", "ClipByValue"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("as torch.clamp does. Departure from NumPy: numpy.clip"), std::string::npos) << r.out;
  r = Weft({"ops", "Conv3D"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: there is no op \"Conv3D\" (run `weft ops` for the list)\n");
}

TEST_F(Cli, VersionNamesReleaseAndAbi) {
  ProcessResult r = Weft({"version"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.out.starts_with("weft 0.1.0 (commit ")) << r.out;
  EXPECT_NE(r.out.find("\nplugin ABI 1.3\n"), std::string::npos) << r.out;
  r = Weft({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "weft 0.1.0\n");
}

TEST_F(Cli, EveryCommandHasHelp) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{{"--help"},
                                                                             {"version", "--help"},
                                                                             {"plugins", "--help"},
                                                                             {"devices", "--help"},
                                                                             {"config", "--help"},
                                                                             {"config", "check", "--help"},
                                                                             {"config", "default", "--help"},
                                                                             {"config", "keys", "--help"},
                                                                             {"run", "--help"},
                                                                             {"predict", "--help"},
                                                                             {"inspect", "--help"},
                                                                             {"dot", "--help"},
                                                                             {"convert", "--help"},
                                                                             {"ops", "--help"},
                                                                             {"import", "--help"},
                                                                             {"export", "--help"}}) {
    ProcessResult r = Weft(args);
    EXPECT_EQ(r.exit_code, 0) << StrJoin(args, " ");
    EXPECT_NE(r.out.find("Usage: "), std::string::npos) << StrJoin(args, " ") << r.out;
  }
}

TEST_F(Cli, UnknownCommandIsAUserError) {
  ProcessResult r = Weft({"frobnicate"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: unknown command 'frobnicate'; the commands are version, plugins, devices, config, run, "
            "train, place, serve, model-server, predict, cluster, inspect, dot, convert, ops, ckpt, conformance, "
            "import, export, optimize, quantize, bench\nRun `weft --help` for usage.\n");
}

TEST_F(Cli, UnknownFlagIsAUserError) {
  ProcessResult r = Weft({"plugins", "--frobnicate"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "weft: error: The following argument was not expected: --frobnicate\nRun `weft "
            "--help` for usage.\n");
}

TEST_F(Cli, NoCommandIsAUserError) { EXPECT_TRUE(Contains(UserError({}), "weft: error: ")); }

TEST_F(Cli, MissingConfigFileIsAUserError) {
  EXPECT_EQ(UserError({"--config", "/nonexistent/site.toml", "plugins"}),
            "weft: error: cannot read config file \"/nonexistent/site.toml\": No such file or directory\n");
}

// JSON output stays valid JSON when what it reports is not valid UTF-8 (a
// folder name): the bytes become U+FFFD (core/base/json.h).
TEST_F(Cli, JsonOutputIsValidWithInvalidUtf8) {
  const fs::path odd = dir_ / "plugins\xff";
  fs::create_directories(odd);
  ProcessResult r = Weft({"plugins", "--json"}, {{"WEFT_PLUGIN_PATH", odd.string()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws on invalid JSON or UTF-8
  const std::string replaced = (dir_ / "plugins\xef\xbf\xbd").string();
  bool found = false;
  for (const auto& entry : j["search_path"]) found = found || entry == replaced;
  EXPECT_TRUE(found) << r.out;
}

// --- weft conformance --------------------------------------------------------

// tests/sdk/add_device: a plugin with one kernel (f32 Add of one shape,
// refusing others at placement) passes the ABI checks and every case it
// takes; the runtime's own ops run on it too.
TEST_F(Cli, ConformancePassesTheAddDevice) {
  ProcessResult r = Weft({"conformance", "--plugin", kRoot + "/add_device/weft_device_add.so"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* check : {"properties", "allocation", "copies", "streams", "error", "work"}) {
    EXPECT_TRUE(HasRow(r.out, {"pass", check})) << check << "\n" << r.out;
  }
  EXPECT_TRUE(HasRow(r.out, {"pass", "allocation", "too", "large", "/device:ADD:0", "4", "EiB"})) << r.out;
  // Three f32 cases of one shape (the broadcasting ones are refused by its
  // query, so not counted).
  EXPECT_TRUE(HasRow(r.out, {"Add", "/device:ADD:0", "3", "0"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"Identity", "/device:ADD:0"})) << r.out;
  EXPECT_NE(r.out.find("\nPASS: 7 of 7 ABI checks, 10 of 10 ops"), std::string::npos) << r.out;
}

// The same plugin with Add deliberately wrong (it subtracts): the kit
// fails, naming the op, the case and what differs, and exits 1.
TEST_F(Cli, ConformanceNamesAWrongKernel) {
  ProcessResult r = Weft({"conformance", "--plugin", kRoot + "/add_device_wrong/weft_device_add.so"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(HasRow(r.out, {"Add", "/device:ADD:0", "1", "2"})) << r.out;
  EXPECT_NE(r.out.find("Add on /device:ADD:0: Add/same_f32: output 0: 12 of 12 elements differ: [0] got "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nFAIL: 7 of 7 ABI checks, 9 of 10 ops"), std::string::npos) << r.out;
}

TEST_F(Cli, ConformanceOpsPatternAndSkipAbi) {
  ProcessResult r =
      Weft({"conformance", "--plugin", kRoot + "/add_device/weft_device_add.so", "--ops", "Ad?,Sha*", "--skip-abi"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("Device ABI checks"), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"Add", "/device:ADD:0"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"Shape", "/device:ADD:0"})) << r.out;
  EXPECT_FALSE(HasRow(r.out, {"Identity", "/device:ADD:0"})) << r.out;
  EXPECT_NE(r.out.find("\nPASS: 0 of 0 ABI checks, 2 of 2 ops"), std::string::npos) << r.out;

  r = Weft({"conformance", "--plugin", kRoot + "/add_device/weft_device_add.so", "--ops", "Conv*", "--skip-abi"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("no op matching \"Conv*\" has both cases and a kernel on the device"), std::string::npos)
      << r.out;
}

TEST_F(Cli, ConformanceErrors) {
  const std::string add = kRoot + "/add_device/weft_device_add.so";
  ProcessResult r = Weft({"conformance", "--plugin", (dir_ / "missing.so").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, StrCat("weft: error: --plugin \"", (dir_ / "missing.so").string(), "\": no such file\n"));

  r = Weft({"conformance", "--plugin", kRoot + "/kinds/weft_optimizer_nullopt.so"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.err.find("weft_optimizer_nullopt.so is a plugin of kind optimizer, not a device plugin; the conformance kit"),
      std::string::npos)
      << r.err;

  r = Weft({"conformance", "--plugin", kRoot + "/garbage/weft_device_garbage.so"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("weft_device_garbage.so refused: not a loadable shared library"), std::string::npos) << r.err;

  r = Weft({"conformance", "--plugin", add, "--device", "/device:ADD:3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "weft: error: --device \"/device:ADD:3\": plugin add opened /device:ADD:0\n");

  r = Weft({"conformance", "--plugin", add, "--cases", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(StrCat("no conformance cases at \"", dir_.path().string(), "\"")), std::string::npos) << r.err;

  // Damaged reference files name the file and what is wrong.
  std::ofstream(dir_ / "cases.toml") << "[[case]]\nop = \"Add\"\n";
  r = Weft({"conformance", "--plugin", add, "--cases", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cases.toml: case 0 needs a name and an op"), std::string::npos) << r.err;

  std::ofstream(dir_ / "cases.toml") << "[[case]]\nname = \"x\"\nop = \"Add\"\ninputs = [{file = \"../etc\"}]\n";
  r = Weft({"conformance", "--plugin", add, "--cases", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("case x inputs[0] needs a file: a plain file name in the cases' folder"), std::string::npos)
      << r.err;

  std::ofstream(dir_ / "cases.toml") << "[[case]\n";
  r = Weft({"conformance", "--plugin", add, "--cases", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find((dir_ / "cases.toml").string() + ":1:"), std::string::npos) << r.err;

  // A case whose .npy is missing fails that case, naming the file.
  std::ofstream(dir_ / "cases.toml")
      << "[[case]]\nname = \"Add/lost\"\nop = \"Add\"\ninputs = [{file = \"a.npy\"}, {file = \"a.npy\"}]\n"
         "outputs = [{file = \"b.npy\"}]\nattrs = {T = \"f32\"}\n";
  r = Weft({"conformance", "--plugin", add, "--cases", dir_.path().string(), "--skip-abi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("Add on /device:ADD:0: Add/lost: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("a.npy"), std::string::npos) << r.out;
}

// `weft optimize` (docs/optimizer.md): every pass listed with what it did,
// and the written graph computes what the original computes.
TEST_F(Cli, OptimizeExplainsEveryPassAndWritesAGraphThatRunsTheSame) {
  const std::string model = WEFT_SOURCE_DIR "/configs/models/mnist_mlp.wgt";
  const std::string out = (dir_ / "opt.wg").string();
  ProcessResult r = Weft({"optimize", model, "-o", out, "--explain"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(model + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" at level 3 ("), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"pass", "level", "rewrites", "time", "first", "nodes"})) << r.out;
  for (const char* pass : {"identity_removal", "arithmetic", "shape_folding", "constant_folding", "cse"}) {
    EXPECT_TRUE(HasRow(r.out, {pass, "1"})) << pass << "\n" << r.out;
  }
  // The MLP's two hidden layers are MatMul + BiasAdd + Relu: one node each.
  EXPECT_TRUE(HasRow(r.out, {"matmul_fusion", "2", "2"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"conv_fusion", "2", "0"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"winograd", "3", "0"})) << r.out;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
  // Level 0 runs nothing, and says which passes it left out.
  ProcessResult none = Weft({"optimize", model, "--level", "0", "--explain"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_TRUE(HasRow(none.out, {"cse", "1", "-", "-", "not", "run:", "level", "1", ">", "0"})) << none.out;

  const std::string digits = WEFT_SOURCE_DIR "/configs/models/sample_digits_784.npy";
  for (const auto& [graph, dir] : {std::pair{model, "original"}, std::pair{out, "optimized"}}) {
    ProcessResult ran = Weft({"run", graph, "--feed", "images=" + digits, "--fetch", "probabilities", "--out",
                              (dir_ / dir).string(), "-q", "--optimize", "0"});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
  }
  auto a = ReadNpy((dir_ / "original" / "probabilities.npy").string());
  auto b = ReadNpy((dir_ / "optimized" / "probabilities.npy").string());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->BitwiseEquals(*b));
}

TEST_F(Cli, OptimizeRefusesAnUnknownPassALevelOutOfRangeAndAnOnnxOutput) {
  const std::string model = WEFT_SOURCE_DIR "/configs/models/mnist_mlp.wgt";
  const std::string config = Write("bad.toml", "[graph_optimizer]\ndisable = [\"cse2\"]\n");
  ProcessResult r = Weft({"optimize", model, "--config", config});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "weft: error: no graph optimizer pass is called \"cse2\"; did you mean \"cse\"? (the passes: "
            "identity_removal, arithmetic, shape_folding, weight_folding, constant_folding, cse, gelu_fusion, "
            "reshape_sinking, conv_fusion, matmul_fusion, quantize_fusion, winograd)\n");
  // The same config stops `weft run` before anything runs.
  ProcessResult ran = Weft({"run", model, "--config", config, "--fetch", "probabilities", "--feed",
                            "images=" WEFT_SOURCE_DIR "/configs/models/sample_digits_784.npy", "-q"});
  EXPECT_EQ(ran.exit_code, 1) << ran.err;
  EXPECT_NE(ran.err.find("[graph_optimizer]: no graph optimizer pass is called \"cse2\"; did you mean \"cse\"?"),
            std::string::npos)
      << ran.err;
  const std::string high = Write("high.toml", "[graph_optimizer]\nlevel = 7\n");
  ProcessResult level = Weft({"optimize", model, "--config", high});
  EXPECT_EQ(level.exit_code, 1) << level.err;
  EXPECT_NE(level.err.find("high.toml:2:9: graph_optimizer.level: "), std::string::npos) << level.err;
  ProcessResult onnx = Weft({"optimize", model, "-o", (dir_ / "m.onnx").string()});
  EXPECT_EQ(onnx.exit_code, 1) << onnx.err;
  EXPECT_NE(onnx.err.find("weft optimize writes a .wg or .wgt graph file"), std::string::npos) << onnx.err;
}

// --list-ops: at level 0 exactly the ops the files hold (read here from
// the .wgt text itself), each with its dtype attributes; at level 3 the
// fused ops in place of what they replaced; several models in one list.
TEST_F(Cli, OptimizeListOpsNamesTheOpsAndDtypesOfSeveralModels) {
  const std::string mlp = WEFT_SOURCE_DIR "/configs/models/mnist_mlp.wgt";
  const std::string cnn = WEFT_SOURCE_DIR "/configs/models/fashion_cnn.wgt";
  std::set<std::string> written;
  for (const std::string& path : {mlp, cnn}) {
    std::ifstream file(path);
    const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    for (std::size_t at = text.find("op = \""); at != std::string::npos; at = text.find("op = \"", at + 1)) {
      const std::size_t begin = at + 6;
      written.insert(text.substr(begin, text.find('"', begin) - begin));
    }
  }
  ASSERT_GT(written.size(), 10u);
  ProcessResult r = Weft({"optimize", mlp, cnn, "--list-ops", "--level", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(mlp + ": "), std::string::npos) << r.err;  // the summaries leave stdout to the list
  std::set<std::string> listed;
  std::istringstream lines(r.out);
  std::string first_line;
  std::getline(lines, first_line);
  EXPECT_EQ(first_line, "# weft optimize --list-ops at level 0: " + mlp + " " + cnn);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    listed.insert(line.substr(0, line.find(' ')));
  }
  EXPECT_EQ(listed, written) << r.out;
  for (const char* line : {"\nConv2D T=f32\n", "\nMatMul T=f32\n", "\nPlaceholder dtype=i64\n",
                           "\nCast DstT=f32 SrcT=bool\n", "\nNoOp\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << r.out;
  }
  const std::string out = (dir_ / "ops.txt").string();
  ProcessResult fused = Weft({"optimize", mlp, cnn, "--list-ops", "-o", out});
  ASSERT_EQ(fused.exit_code, 0) << fused.err;
  EXPECT_NE(fused.out.find("ops to " + out), std::string::npos) << fused.out;
  std::ifstream file(out);
  const std::string list((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(list.find("\n_FusedConv2D T=f32\n"), std::string::npos) << list;
  EXPECT_NE(list.find("\n_FusedMatMul T=f32\n"), std::string::npos) << list;
  EXPECT_EQ(list.find("\nBiasAdd "), std::string::npos) << list;
  ProcessResult nowhere = Weft({"optimize", mlp, "--list-ops", "-o", "/nonexistent/dir/ops.txt"});
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_NE(nowhere.err.find("weft: error: -o \"/nonexistent/dir/ops.txt\": "), std::string::npos) << nowhere.err;
  EXPECT_NE(nowhere.err.find("No such file or directory"), std::string::npos) << nowhere.err;
  // Several models only with --list-ops.
  ProcessResult two = Weft({"optimize", mlp, cnn});
  EXPECT_EQ(two.exit_code, 1);
  EXPECT_EQ(two.err, "weft: error: weft optimize takes one MODEL (2 given); several only with --list-ops\n");
}

// `weft bench`: the figures, the profile by op, and JSON.
TEST_F(Cli, BenchPrintsLatencyThroughputMemoryAndTheOpsThatTakeTheTime) {
  const std::string model = WEFT_SOURCE_DIR "/configs/models/fashion_cnn.wgt";
  ProcessResult r =
      Weft({"bench", model, "--shape", "images=64x28x28x1", "--profile", "--warmup", "1", "--repeat", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(model + " at --optimize 3, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inputs: images f32[64,28,28,1]"), std::string::npos) << r.out;
  for (const char* row : {"  load ", "  first run ", "  latency           p50 ", "  throughput ", "  peak memory "}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  }
  EXPECT_NE(r.out.find(" examples/s at batch 64)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Ops by time (3 traced runs):"), std::string::npos) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"op", "ms/run", "share", "nodes"})) << r.out;
  EXPECT_TRUE(HasRow(r.out, {"_FusedConv2D"})) << r.out;  // level 2 fuses each Conv2D, bias and Relu

  ProcessResult j = Weft({"bench", model, "--shape", "images=8x28x28x1", "--repeat", "4", "--json", "--optimize", "0"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["optimize"], 0);
  EXPECT_EQ(doc["runs"], 4);
  EXPECT_EQ(doc["batch"], 8);
  EXPECT_GT(doc["load_ms"].get<double>(), 0);
  EXPECT_LE(doc["p50_ms"].get<double>(), doc["p99_ms"].get<double>());
  EXPECT_GT(doc["peak_rss_mib"].get<double>(), 1);
}

TEST_F(Cli, BenchSaysWhichInputsNeedAShape) {
  const std::string model = WEFT_SOURCE_DIR "/configs/models/fashion_cnn.wgt";
  EXPECT_TRUE(Contains(UserError({"bench", model}),
                       "every output needs an input without a value: give --shape NAME=DIMS (or --feed "
                       "NAME=FILE.npy) for images [?,28,28,1]"));
  EXPECT_TRUE(
      Contains(UserError({"bench", model, "--shape", "image=1x28x28x1"}),
               "--shape \"image=1x28x28x1\": the model has no Placeholder \"image\"; did you mean \"images\"?"));
  EXPECT_TRUE(Contains(UserError({"bench", model, "--shape", "images=1x28x28"}),
                       "\"images\" is declared [?,28,28,1], which [1,28,28] does not fit"));
  EXPECT_TRUE(Contains(UserError({"bench", model, "--shape", "images=64by28"}),
                       "--shape images: expected dimensions like 1x3x224x224, got \"64by28\""));
}

}  // namespace
}  // namespace weft::testing
