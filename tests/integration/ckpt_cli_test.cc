// `weft ckpt ls` and `weft ckpt inspect`, running the real binary on
// checkpoints written by the library. CRC32C values are from a bit-at-a-time
// Python model; byte counts by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/checkpoint/bundle.h"
#include "core/checkpoint/manager.h"
#include "tests/support/test_dir.h"
#include "tests/support/weft_cli.h"

namespace weft {
namespace {

using testing::ProcessResult;
using testing::RunWeft;

class CkptCli : public ::testing::Test {
 protected:
  std::string P(const std::string& name) const { return dir_.File(name); }

  testing::TestDir dir_{"weft_ckpt_cli_test"};
};

// "x" f32[3] {1,2,3} (12 bytes, CRC32C 0x384de783) and "a" string[2]
// {"hi", ""} (18 bytes: two u64 lengths and "hi", CRC32C 0xc53d77cb).
std::vector<std::pair<std::string, Tensor>> Small() {
  return {{"x", Tensor::FromVector<float>({1, 2, 3})}, {"a", Tensor::Strings({"hi", ""}, Shape{2})}};
}

TEST_F(CkptCli, LsListsTheKeptCheckpointsWithTheNewestMarked) {
  checkpoint::CheckpointManager manager(P("run"), 2);
  for (int64_t step : {10, 20, 30}) {
    std::vector<std::pair<std::string, Tensor>> tensors = Small();
    if (step == 30) tensors.emplace_back("extra", *Tensor::Zeros(DType::kF64, Shape{5, 5}));  // 200 bytes
    ASSERT_TRUE(manager.Save(step, tensors, {}).ok());
  }
  ProcessResult r = RunWeft({"ckpt", "ls", P("run")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string p20 = P("run/ckpt-20"), p30 = P("run/ckpt-30");
  const std::string pad(p20.size() - 6, ' ');
  EXPECT_EQ(r.out, StrCat("PREFIX", pad, "  STEP  TENSORS  BYTES  NEWEST\n",  //
                          p20, "  20    2        30\n",                       //
                          p30, "  30    3        230    *\n"));
}

TEST_F(CkptCli, LsSaysWhenThereIsNothingToList) {
  ProcessResult r = RunWeft({"ckpt", "ls", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, StrCat("no checkpoints in ", dir_.path().string(), "\n"));

  r = RunWeft({"ckpt", "ls", P("missing")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, StrCat("weft: error: checkpoint directory ", P("missing"), " does not exist\n"));

  std::ofstream(P("file")) << "x";
  r = RunWeft({"ckpt", "ls", P("file")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, StrCat("weft: error: ", P("file"),
                          " is not a directory; to look at one checkpoint, run `weft ckpt inspect PREFIX`\n"));
}

TEST_F(CkptCli, LsMarksAnUnreadableCheckpointAndFails) {
  checkpoint::CheckpointManager manager(dir_.path().string(), 3);
  ASSERT_TRUE(manager.Save(1, Small(), {}).ok());
  ASSERT_TRUE(manager.Save(2, Small(), {}).ok());
  std::filesystem::remove(P("ckpt-2.data-00000-of-00001"));
  ProcessResult r = RunWeft({"ckpt", "ls", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  // The newest that opens is step 1; step 2 is listed as unreadable.
  EXPECT_NE(r.out.find("ckpt-1  1     2           30     *\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ckpt-2  2     unreadable  -\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find(StrCat("weft: error: checkpoint ", P("ckpt-2"), " is incomplete: its data shard ",
                              P("ckpt-2.data-00000-of-00001"), " is missing\n")),
            std::string::npos)
      << r.err;
}

TEST_F(CkptCli, InspectShowsMetadataAndVerifiesEveryTensor) {
  ASSERT_TRUE(checkpoint::WriteBundle(P("b"), Small(), {{"step", "7"}, {"note", "a \"quoted\" value"}}).ok());
  const std::string expected = StrCat("checkpoint ", P("b"), ": 2 tensors, 30 bytes in 1 shard\n",
                                      "metadata:\n"
                                      "  KEY   VALUE\n"
                                      "  note  \"a \\\"quoted\\\" value\"\n"
                                      "  step  \"7\"\n"
                                      "NAME  DTYPE   SHAPE  BYTES  CRC32C      STATUS\n"
                                      "a     string  [2]    18     0xc53d77cb  ok\n"
                                      "x     f32     [3]    12     0x384de783  ok\n");
  ProcessResult r = RunWeft({"ckpt", "inspect", P("b")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  EXPECT_EQ(r.err, "");
  // The index file itself names the bundle too.
  r = RunWeft({"ckpt", "inspect", P("b.index")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
}

TEST_F(CkptCli, InspectFailsOnCorruptData) {
  ASSERT_TRUE(checkpoint::WriteBundle(P("b"), Small(), {}).ok());
  const std::string shard = P("b.data-00000-of-00001");
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\xda');  // 0x80 ^ 0x5a: byte 2 of "x"
  }
  ProcessResult r = RunWeft({"ckpt", "inspect", P("b")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, StrCat("checkpoint ", P("b"), ": 2 tensors, 30 bytes in 1 shard\n",
                          "metadata: none\n"
                          "NAME  DTYPE   SHAPE  BYTES  CRC32C      STATUS\n"
                          "a     string  [2]    18     0xc53d77cb  ok\n"
                          "x     f32     [3]    12     0x384de783  CORRUPT\n"));
  // The corrupt bytes' CRC32C is from the Python model.
  EXPECT_EQ(r.err,
            StrCat("weft: error: checkpoint ", P("b"), ": tensor \"x\" is corrupt: its 12 bytes at offset 18 of ",
                   shard, " have CRC32C 0x5d6deeb8 but the index says 0x384de783\n"));
}

TEST_F(CkptCli, InspectReportsMissingAndDamagedBundles) {
  ProcessResult r = RunWeft({"ckpt", "inspect", P("nope")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, StrCat("weft: error: checkpoint ", P("nope"), " not found: ", P("nope"), ".index does not exist\n"));

  r = RunWeft({"ckpt", "inspect", dir_.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            StrCat("weft: error: checkpoint ", dir_.path().string(), " not found: it is a directory, not a bundle ",
                   "prefix (list its checkpoints with `weft ckpt ls ", dir_.path().string(), "`)\n"));

  ASSERT_TRUE(checkpoint::WriteBundle(P("b"), Small(), {{"step", "7"}}).ok());
  std::filesystem::resize_file(P("b.index"), 100);
  r = RunWeft({"ckpt", "inspect", P("b")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, StrCat("weft: error: checkpoint ", P("b.index"),
                          " is truncated: its header promises 151 bytes, the file has 100\n"));
}

TEST_F(CkptCli, HelpDescribesBothCommands) {
  ProcessResult r = RunWeft({"ckpt", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("ls"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("inspect"), std::string::npos) << r.out;
  r = RunWeft({"ckpt", "ls", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("List the checkpoints a directory keeps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DIR"), std::string::npos) << r.out;
  r = RunWeft({"ckpt", "inspect", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("verify every tensor's CRC32C"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PREFIX"), std::string::npos) << r.out;

  r = RunWeft({"ckpt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.err.starts_with("weft: error: ")) << r.err;
  r = RunWeft({"ckpt", "inspect"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.err.starts_with("weft: error: ")) << r.err;
  EXPECT_NE(r.err.find("PREFIX"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace weft
