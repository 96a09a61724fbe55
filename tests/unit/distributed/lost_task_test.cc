#include "core/distributed/lost_task.h"

#include <gtest/gtest.h>

#include "core/distributed/heartbeat.h"
#include "core/distributed/incarnation.h"

namespace weft::dist {
namespace {

// What a worker's step met when its ps task was SIGKILLed (the chain the
// runtime builds, as a new user saw it).
const char kClosedChain[] =
    "training step 132: node 'gradients/dense1/Relu/ReluGrad/_recv_0_from_CPU_0' (_Recv) on "
    "/job:worker/task:0/device:CPU:0: pulling 'edge_17' from /job:ps/task:0: task /job:ps/task:0 "
    "(tcp://127.0.0.1:7080) closed the connection";

TEST(LostTask, AClosedConnectionNamesTheTaskItsAddressAndWhatWasSeen) {
  auto lost = FindLostTask(UnavailableError(kClosedChain));
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->task, "/job:ps/task:0");
  EXPECT_EQ(lost->address, "tcp://127.0.0.1:7080");
  EXPECT_EQ(lost->how, "it closed the connection (its process ended or was killed, or the link to it broke)");
}

TEST(LostTask, SilentHeartbeatsNameTheSilenceAndTheSetting) {
  Status s = LostPeerStatus({"/job:ps/task:1", "tcp://10.0.0.7:7071"}, 3000, 3000).WithContext("training step 9");
  auto lost = FindLostTask(s);
  ASSERT_TRUE(lost.has_value()) << s.ToString();
  EXPECT_EQ(lost->task, "/job:ps/task:1");
  EXPECT_EQ(lost->address, "tcp://10.0.0.7:7071");
  EXPECT_EQ(lost->how,
            "it has not answered for 3.0 s ([cluster] heartbeat_timeout_ms = 3000): hung, killed, or cut off");
}

TEST(LostTask, TheLastReportInTheChainIsTheCause) {
  auto lost = FindLostTask(
      UnavailableError("task /job:worker/task:1 (tcp://127.0.0.1:1) closed the connection; then task /job:ps/task:0 "
                       "(tcp://127.0.0.1:2) has not answered for 1.0 s ([cluster] heartbeat_timeout_ms = 1000)"));
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->task, "/job:ps/task:0");
}

TEST(LostTask, ARefusalDuringTheHandshakeOrAnyOtherErrorIsNoLoss) {
  EXPECT_FALSE(FindLostTask(Status()).has_value());
  EXPECT_FALSE(FindLostTask(UnavailableError("task /job:ps/task:0 (tcp://127.0.0.1:7080) closed the connection "
                                             "during Weft's handshake (if the cluster authenticates ...)"))
                   .has_value());
  EXPECT_FALSE(FindLostTask(UnavailableError("cannot reach task /job:ps/task:0 (tcp://127.0.0.1:7080) within "
                                             "1000 ms (3 attempts): connection refused"))
                   .has_value());
  EXPECT_FALSE(FindLostTask(InvalidArgumentError("node 'x' (MatMul): inner dimensions differ")).has_value());
  EXPECT_FALSE(IsLostTask(InvalidArgumentError("the loss became nan")));
}

TEST(LostTask, ExplainedItLeadsWithTheCauseThenWhatToDoThenTheChainShortened) {
  // The cause at the end is what a long chain keeps, with its start.
  const std::string chain = "training step 132: " + std::string(400, 'x') + ": " + kClosedChain;
  Status s = ExplainLostTask(UnavailableError(chain), "Start it again, then --resume.");
  EXPECT_EQ(s.code(), Code::kUnavailable);
  const std::string m(s.message());
  EXPECT_EQ(m.find("/job:ps/task:0 (tcp://127.0.0.1:7080) was lost: it closed the connection (its process ended or "
                   "was killed, or the link to it broke).\nStart it again, then --resume.\n(what failed: training "
                   "step 132: xxx"),
            0u)
      << m;
  const std::size_t what = m.find("(what failed: ");
  EXPECT_LE(m.size() - what, std::string("(what failed: )").size() + 240) << m;
  EXPECT_NE(m.find(" ... "), std::string::npos) << m;
  EXPECT_NE(m.find("(tcp://127.0.0.1:7080) closed the connection)"), std::string::npos) << m;
  EXPECT_TRUE(IsLostTask(s));
  EXPECT_TRUE(IsLostTask(UnavailableError(kClosedChain)));
  // Anything else comes back as it was.
  Status other = InvalidArgumentError("a bad feed");
  EXPECT_EQ(ExplainLostTask(other, "x").message(), other.message());
}

// A worker that lost the chief tells it itself (the chief, the step, what
// to do); the silent heartbeats it quotes in "what failed" must not make
// the command tell it again, leading with the generic advice.
TEST(LostTask, ATaleAlreadyToldIsNotToldAgain) {
  const Status told = LostTaskError(
      {"/job:worker/task:0", "tcp://127.0.0.1:7081", "the chief did not answer at this worker's step 276"},
      "This worker stops.",
      "task /job:worker/task:0 (tcp://127.0.0.1:7081) has not answered for 10.0 s ([cluster] heartbeat_timeout_ms = "
      "10000)");
  const Status again = ExplainLostTask(told, "start it again");
  EXPECT_EQ(again.message(), told.message());
  EXPECT_EQ(std::string(again.message())
                .find("/job:worker/task:0 (tcp://127.0.0.1:7081) was lost: the chief did not "
                      "answer at this worker's step 276.\nThis worker stops.\n"),
            0u)
      << again.message();
  EXPECT_TRUE(IsLostTask(told));
  // A chain that only mentions "was lost" deep inside is told afresh.
  const Status deep = UnavailableError(std::string("step 3: /job:ps/task:1 (tcp://h:1) was lost: x; ") + kClosedChain);
  EXPECT_EQ(std::string(ExplainLostTask(deep, "go").message()).find("/job:ps/task:0 (tcp://127.0.0.1:7080) was lost: "),
            0u);
}

TEST(LostTask, ShortenMiddleKeepsBothEndsAndWholeCharacters) {
  EXPECT_EQ(ShortenMiddle("short", 40), "short");
  const std::string text = std::string(50, 'a') + std::string(50, 'b');
  const std::string cut = ShortenMiddle(text, 40);
  EXPECT_EQ(cut.size(), 40u) << cut;
  EXPECT_EQ(cut.substr(0, 17), std::string(17, 'a'));
  EXPECT_EQ(cut.substr(cut.size() - 18), std::string(18, 'b'));
  // "é" is two bytes: a cut never splits it.
  std::string accents;
  for (int i = 0; i < 50; ++i) accents += "\xc3\xa9";
  const std::string short_accents = ShortenMiddle(accents, 41);
  for (std::size_t i = 0; i < short_accents.size(); ++i) {
    if (short_accents[i] == ' ' || short_accents[i] == '.') continue;
    const unsigned char c = static_cast<unsigned char>(short_accents[i]);
    if (c == 0xc3) {
      ASSERT_LT(i + 1, short_accents.size());
      EXPECT_EQ(static_cast<unsigned char>(short_accents[i + 1]), 0xa9) << i;
      ++i;
    } else {
      ADD_FAILURE() << "a split character at " << i << ": " << short_accents;
    }
  }
}

// The RPC layer and two heartbeat monitors each notice one restart; only
// the first to ask logs it at INFO.
TEST(FirstToSeeRestart, OncePerTaskAndIncarnation) {
  EXPECT_TRUE(FirstToSeeRestart("/job:ps/task:97", 0x1a2200000001ull));
  EXPECT_FALSE(FirstToSeeRestart("/job:ps/task:97", 0x1a2200000001ull));
  EXPECT_FALSE(FirstToSeeRestart("/job:ps/task:97", 0x1a2200000001ull));
  EXPECT_TRUE(FirstToSeeRestart("/job:worker/task:97", 0x1a2200000001ull));
  // Restarted again: a new incarnation is news again.
  EXPECT_TRUE(FirstToSeeRestart("/job:ps/task:97", 0x1a2200000002ull));
  EXPECT_FALSE(FirstToSeeRestart("/job:ps/task:97", 0x1a2200000002ull));
}

}  // namespace
}  // namespace weft::dist
