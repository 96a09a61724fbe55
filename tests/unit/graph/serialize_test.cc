// .wg and .wgt codecs: exact round trips and clear errors.
#include "core/graph/serialize.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/graph/graph.h"

namespace weft {
namespace {

// A graph that uses every kind of attr value (it need not be valid).
GraphDef EveryAttrKind() {
  GraphDef def;
  def.producer = 1;
  def.min_consumer = 1;
  NodeDef n;
  n.name = "scope/node.1";
  n.op = "Anything";
  n.inputs = {"a", "b:2", "^c"};
  n.device = "/device:CPU:*";
  n.attrs = {
      {"i", AttrValue(int64_t{-9007199254740993})},
      {"f", AttrValue(0.1)},
      {"nan", AttrValue(std::numeric_limits<double>::quiet_NaN())},
      {"inf", AttrValue(-std::numeric_limits<double>::infinity())},
      {"b", AttrValue(true)},
      {"s", AttrValue(std::string("quote\" and \\ and \n newline"))},
      {"t", AttrValue(DType::kBF16)},
      {"shape", AttrValue(Shape{-1, 3})},
      {"unknown", AttrValue(Shape::UnknownRank())},
      {"scalar_shape", AttrValue(Shape{})},
      {"tensor_f32", AttrValue(Tensor::FromVector<float>({1.5f, -0.0f, std::numeric_limits<float>::denorm_min()}))},
      {"tensor_i64", AttrValue(Tensor::FromVector<int64_t>({INT64_MIN, INT64_MAX}, Shape{1, 2}))},
      {"tensor_bool", AttrValue(Tensor::FromVector<bool>({true, false}))},
      {"tensor_str", AttrValue(Tensor::Strings({"x", ""}, Shape{2}))},
      {"tensor_empty", AttrValue(*Tensor::Zeros(DType::kF64, Shape{0, 2}))},
      {"func", AttrValue(FuncName{"body"})},
      {"ints", AttrValue(std::vector<int64_t>{1, -2})},
      {"floats", AttrValue(std::vector<double>{0.5, 1e300})},
      {"bools", AttrValue(std::vector<bool>{true, false, true})},
      {"strings", AttrValue(std::vector<std::string>{"a", "b"})},
      {"types", AttrValue(std::vector<DType>{DType::kF32, DType::kI8})},
      {"shapes", AttrValue(std::vector<Shape>{Shape{1}, Shape::UnknownRank()})},
      {"tensors", AttrValue(std::vector<Tensor>{Tensor::Scalar<int32_t>(3)})},
      {"funcs", AttrValue(std::vector<FuncName>{FuncName{"f"}, FuncName{"g"}})},
      {"empty_list", AttrValue(std::vector<int64_t>{})},
  };
  def.nodes.push_back(n);
  FunctionDef fn;
  fn.name = "body";
  fn.inputs = {{"x", DType::kF32}};
  fn.outputs = {{"y", DType::kF32}};
  NodeDef inner;
  inner.name = "neg";
  inner.op = "Neg";
  inner.inputs = {"x"};
  fn.nodes = {inner};
  fn.results = {"neg:0"};
  def.library.push_back(fn);
  return def;
}

void ExpectSame(const GraphDef& a, const GraphDef& b) {
  EXPECT_EQ(a.producer, b.producer);
  EXPECT_EQ(a.min_consumer, b.min_consumer);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].name, b.nodes[i].name);
    EXPECT_EQ(a.nodes[i].op, b.nodes[i].op);
    EXPECT_EQ(a.nodes[i].inputs, b.nodes[i].inputs);
    EXPECT_EQ(a.nodes[i].device, b.nodes[i].device);
    ASSERT_EQ(a.nodes[i].attrs.size(), b.nodes[i].attrs.size());
    for (const auto& [name, value] : a.nodes[i].attrs) {
      ASSERT_TRUE(b.nodes[i].attrs.count(name)) << name;
      EXPECT_TRUE(value == b.nodes[i].attrs.at(name))
          << name << ": " << value.ToString() << " vs " << b.nodes[i].attrs.at(name).ToString();
    }
  }
  ASSERT_EQ(a.library.size(), b.library.size());
  if (a.library.empty()) return;
  EXPECT_EQ(a.library[0].name, b.library[0].name);
  EXPECT_EQ(a.library[0].results, b.library[0].results);
  EXPECT_EQ(a.library[0].nodes[0].inputs, b.library[0].nodes[0].inputs);
}

TEST(Serialize, BinaryRoundTripIsExact) {
  const GraphDef def = EveryAttrKind();
  const std::string bytes = SerializeGraphDef(def, GraphFormat::kBinary);
  auto back = ParseGraphDef(bytes, GraphFormat::kBinary, "g.wg");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(def, *back);
  EXPECT_EQ(SerializeGraphDef(*back, GraphFormat::kBinary), bytes);
}

TEST(Serialize, TextRoundTripIsExact) {
  const GraphDef def = EveryAttrKind();
  const std::string text = SerializeGraphDef(def, GraphFormat::kText);
  auto back = ParseGraphDef(text, GraphFormat::kText, "g.wgt");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  ExpectSame(def, *back);
  EXPECT_EQ(SerializeGraphDef(*back, GraphFormat::kText), text);
  // Text and binary describe the same graph.
  EXPECT_EQ(SerializeGraphDef(*back, GraphFormat::kBinary), SerializeGraphDef(def, GraphFormat::kBinary));
  EXPECT_NE(text.find("op = \"Anything\""), std::string::npos) << text;
}

TEST(Serialize, GarbageAndTruncatedBinaryFiles) {
  const std::string bytes = SerializeGraphDef(EveryAttrKind(), GraphFormat::kBinary);
  EXPECT_EQ(ParseGraphDef(bytes.substr(0, 13), GraphFormat::kBinary, "g.wg").status().message(),
            "g.wg: not a valid .wg graph file: its size (13 bytes) is not a whole number of 8-byte words; is it "
            "truncated?");
  auto truncated = ParseGraphDef(bytes.substr(0, bytes.size() / 2 / 8 * 8), GraphFormat::kBinary, "g.wg");
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().message().rfind("g.wg: not a valid .wg graph file: ", 0), 0u)
      << truncated.status().message();
  std::string garbage(64, '\xff');
  auto bad = ParseGraphDef(garbage, GraphFormat::kBinary, "junk.wg");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("junk.wg: not a valid .wg graph file: ", 0), 0u) << bad.status().message();
  EXPECT_EQ(ParseGraphDef(bytes + std::string(8, '\0'), GraphFormat::kBinary, "g.wg").status().message(),
            "g.wg: not a valid .wg graph file: 8 bytes of trailing data");
}

TEST(Serialize, TextSyntaxErrors) {
  auto bad = ParseGraphDef("(nodes = [(name = \"x\", op = ]", GraphFormat::kText, "g.wgt");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("g.wgt: not a valid .wgt graph file: ", 0), 0u) << bad.status().message();
  auto unknown_field = ParseGraphDef("(nodez = [])", GraphFormat::kText, "g.wgt");
  ASSERT_FALSE(unknown_field.ok());
  EXPECT_NE(unknown_field.status().message().find("nodez"), std::string::npos) << unknown_field.status().message();
}

TEST(Serialize, BadContentsAreNamed) {
  GraphDef def;
  NodeDef n;
  n.name = "c";
  n.op = "Const";
  n.attrs["value"] = AttrValue(Tensor::FromVector<float>({1, 2}));
  def.nodes.push_back(n);
  std::string text = SerializeGraphDef(def, GraphFormat::kText);
  // Make the tensor claim 3 elements while holding 2.
  const auto pos = text.find("dims = [2]");
  ASSERT_NE(pos, std::string::npos) << text;
  text.replace(pos, 10, "dims = [3]");
  EXPECT_EQ(ParseGraphDef(text, GraphFormat::kText, "g.wgt").status().message(),
            "g.wgt: node #0 \"c\": attr \"value\": a f32[3] tensor needs 12 bytes of content, it has 8");
}

TEST(Serialize, FilesByExtension) {
  const std::string base = "/tmp/weft_serialize_test_" + std::to_string(getpid());
  GraphDef def = EveryAttrKind();
  ASSERT_TRUE(WriteGraphFile(base + ".wg", def).ok());
  ASSERT_TRUE(WriteGraphFile(base + ".wgt", def).ok());
  ExpectSame(def, *ReadGraphFile(base + ".wg"));
  ExpectSame(def, *ReadGraphFile(base + ".wgt"));
  EXPECT_EQ(WriteGraphFile(base + ".pb", def).message(),
            "\"" + base + ".pb\": graph files end in .wg (binary) or .wgt (text)");
  EXPECT_EQ(ReadGraphFile(base + ".missing.wg").status().message(),
            "cannot read graph file \"" + base + ".missing.wg\": No such file or directory");
  // A directory, named like a graph file or not.
  std::filesystem::create_directory(base + ".dir.wg");
  EXPECT_EQ(ReadGraphFile(base + ".dir.wg").status().message(),
            "cannot read graph file \"" + base + ".dir.wg\": it is a directory");
  std::filesystem::remove(base + ".dir.wg");
  // A binary file cut short.
  {
    std::ifstream in(base + ".wg", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(base + ".cut.wg", std::ios::binary) << bytes.substr(0, bytes.size() - 3);
    std::ofstream(base + ".short.wg", std::ios::binary) << bytes.substr(0, bytes.size() / 2 / 8 * 8);
  }
  EXPECT_EQ(ReadGraphFile(base + ".cut.wg").status().message(),
            base + ".cut.wg: not a valid .wg graph file: its size (" +
                std::to_string(std::filesystem::file_size(base + ".cut.wg")) +
                " bytes) is not a whole number of 8-byte words; is it truncated?");
  const std::string short_message = ReadGraphFile(base + ".short.wg").status().message();
  EXPECT_EQ(short_message.rfind(base + ".short.wg: not a valid .wg graph file: ", 0), 0u) << short_message;
  std::remove((base + ".cut.wg").c_str());
  std::remove((base + ".short.wg").c_str());
  std::remove((base + ".wg").c_str());
  std::remove((base + ".wgt").c_str());
}

// WriteGraphFile places every tensor's contents at a multiple of 64 bytes
// into the file, and ReadGraphFile uses them where they lie in its mapping:
// every tensor of the file shares one buffer (the mapping), none is a
// copy, each is aligned as kernels expect, and writing one changes neither
// the file nor the next reader's values (copy-on-write).
TEST(Serialize, AlignedTensorsAreReadInPlace) {
  const std::string path = "/tmp/weft_serialize_inplace_" + std::to_string(getpid()) + ".wg";
  GraphDef def;
  for (int i = 0; i < 20; ++i) {
    NodeDef n;
    n.name = "c" + std::to_string(i);
    n.op = "Const";
    // Sizes that leave every remainder of 8 words behind them.
    std::vector<float> values(static_cast<std::size_t>(1 + 3 * i));
    for (std::size_t k = 0; k < values.size(); ++k) values[k] = static_cast<float>(i) + 0.25f * static_cast<float>(k);
    n.attrs = {{"value", AttrValue(Tensor::FromVector<float>(values))}, {"name_" + std::to_string(i), AttrValue(true)}};
    def.nodes.push_back(n);
  }
  ASSERT_TRUE(WriteGraphFile(path, def).ok());
  // The file ends in 64 zero bytes, so no tensor ends it (XNNPACK reads
  // up to 16 bytes past an input's end).
  {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(bytes.size(), 64u);
    EXPECT_EQ(bytes.substr(bytes.size() - 64), std::string(64, '\0'));
  }
  // Copied by default: a buffer each.
  auto copied = ReadGraphFile(path);
  ASSERT_TRUE(copied.ok());
  EXPECT_NE(copied->nodes[0].attrs.at("value").get<Tensor>().buffer(),
            copied->nodes[1].attrs.at("value").get<Tensor>().buffer());
  auto back = ReadGraphFile(path, TensorReading::kInPlace);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(def, *back);
  const std::shared_ptr<Buffer>& first = back->nodes[0].attrs.at("value").get<Tensor>().buffer();
  for (const NodeDef& n : back->nodes) {
    const Tensor& t = n.attrs.at("value").get<Tensor>();
    EXPECT_EQ(t.buffer(), first) << n.name << " was copied, not read in place";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u) << n.name;
  }
  // Copy-on-write: a write to one lands in this process's page only.
  back->nodes[3].attrs.at("value").get<Tensor>().data<float>()[0] = -1.0f;
  auto again = ReadGraphFile(path, TensorReading::kInPlace);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->nodes[3].attrs.at("value").get<Tensor>().data<float>()[0], 3.0f);
  // The bytes for a socket (SerializeGraphDef) are not padded, and read the same.
  auto parsed = ParseGraphDef(SerializeGraphDef(def, GraphFormat::kBinary), GraphFormat::kBinary, "g.wg");
  ASSERT_TRUE(parsed.ok());
  ExpectSame(def, *parsed);
  std::remove(path.c_str());
}

// Writing is atomic (graph files share core/base/file_util.h's writer), and
// an I/O failure is reported as one, with the path and the system's words.
TEST(Serialize, WriteFailuresAreIoErrorsNamingThePath) {
  const std::string base = "/tmp/weft_serialize_test_io_" + std::to_string(getpid());
  GraphDef def = EveryAttrKind();
  Status missing = WriteGraphFile(base + "/no/such/dir/g.wg", def);
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.ToString();
  EXPECT_EQ(
      missing.message().rfind("writing " + base + "/no/such/dir/g.wg: creating " + base + "/no/such/dir/g.wg.tmp-", 0),
      0u)
      << missing.message();
  EXPECT_NE(missing.message().find(": No such file or directory"), std::string::npos) << missing.message();
  // A path through a regular file.
  ASSERT_TRUE(WriteGraphFile(base + ".wg", def).ok());
  Status not_dir = WriteGraphFile(base + ".wg/g.wg", def);
  EXPECT_EQ(not_dir.code(), Code::kUnavailable) << not_dir.ToString();
  EXPECT_NE(not_dir.message().find("Not a directory"), std::string::npos) << not_dir.message();
  // No temporary file is left beside the graph.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().filename().string().rfind("weft_serialize_test_io_" + std::to_string(getpid()), 0) == 0) ++files;
  }
  EXPECT_EQ(files, 1);
  std::remove((base + ".wg").c_str());
}

}  // namespace
}  // namespace weft
