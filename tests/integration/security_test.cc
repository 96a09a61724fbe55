// The cluster's connection security (docs/distributed.md, "Security"): the
// handshake protocol on its own (core/distributed/auth.h), the secret file's
// checks, and a real task service on a loopback port with a secret,
// attacked through its tcp port by real clients with the wrong secret or
// none and by raw sockets (a replayed handshake, one cut off halfway,
// garbage, an oversized length prefix, silence, a thousand connections at
// once). Each attack must be refused with a log line naming its address,
// run nothing, and leave the task serving its real clients. TLS and CURVE
// links are in security_tls_test.cc.

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/base/logging.h"
#include "core/config/config.h"
#include "core/distributed/auth.h"
#include "core/distributed/dist_session.h"
#include "core/distributed/task_service.h"
#include "core/graph/builder.h"
#include "tests/support/log_capture.h"
#include "tests/support/loopback.h"
#include "tests/support/two_tasks.h"

namespace weft::dist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ClosedByPeer;
using testing::ReadExactly;
using testing::WriteAll;

// --- Helpers ------------------------------------------------------------------------------------

fs::path TempDir() {
  static const fs::path dir = [] {
    std::string pattern = (fs::temp_directory_path() / "weft_security_XXXXXX").string();
    const char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    return fs::path(pattern);
  }();
  return dir;
}

std::string WriteSecret(const std::string& name, const std::string& content, mode_t mode = 0600) {
  const fs::path path = TempDir() / name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  chmod(path.c_str(), mode);
  return path.string();
}

// The tcp transport's framing (plugins/transports/tcp/framing.h), spoken by
// hand: "WFT1", the header size (u32 LE), the payload size (u64 LE).
std::string Preamble(uint32_t header_size, uint64_t payload_size) {
  std::string p = "WFT1";
  for (int i = 0; i < 4; ++i) p.push_back(static_cast<char>(header_size >> (8 * i)));
  for (int i = 0; i < 8; ++i) p.push_back(static_cast<char>(payload_size >> (8 * i)));
  return p;
}

bool SendFrame(int fd, const std::string& header) {
  return WriteAll(fd, Preamble(static_cast<uint32_t>(header.size()), 0) + header);
}

// The header of the next message on |fd|.
bool ReadFrame(int fd, std::string* header) {
  std::string preamble;
  if (!ReadExactly(fd, &preamble, 16)) return false;
  uint32_t size = 0;
  for (int i = 0; i < 4; ++i) size |= static_cast<uint32_t>(static_cast<unsigned char>(preamble[4 + i])) << (8 * i);
  return size <= 4096 && ReadExactly(fd, header, size);
}

// Raises the limit of open file descriptors towards |n| (as far as the
// hard limit allows); returns the limit now.
rlim_t RaiseDescriptorLimit(rlim_t n) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < n) {
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, n);
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  return limit.rlim_cur;
}

constexpr char kSecret[] = "correct horse battery staple 0123456789";

// --- The protocol alone -------------------------------------------------------------------------

TEST(AuthProtocol, BothSidesWithTheSameSecretAgree) {
  AuthClient client(kSecret);
  AuthServer server(kSecret);
  auto hello = client.Start();
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_EQ(hello->size(), 37u);
  auto challenge = server.OnFrame(*hello);
  ASSERT_TRUE(challenge.ok()) << challenge.status().ToString();
  EXPECT_EQ(challenge->size(), 69u);
  EXPECT_FALSE(server.authenticated());
  auto proof = client.Answer(*challenge);
  ASSERT_TRUE(proof.ok()) << proof.status().ToString();
  EXPECT_EQ(proof->size(), 37u);
  auto last = server.OnFrame(*proof);
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  EXPECT_TRUE(last->empty());
  EXPECT_TRUE(server.authenticated());
  // The secret itself never appears in what crossed the wire.
  for (const std::string* frame : {&*hello, &*challenge, &*proof}) {
    EXPECT_EQ(frame->find("horse"), std::string::npos);
  }
}

// The MACs are HMAC-SHA256 over the documented labels and nonces: checked
// against Python's hmac module, which shares no code with Weft.
TEST(AuthProtocol, TheMacsAreHmacSha256AsDocumented) {
  const std::string client_nonce(32, '\x11');
  AuthServer server(kSecret);
  auto challenge = server.OnFrame(std::string("WFA1\x01", 5) + client_nonce);
  ASSERT_TRUE(challenge.ok()) << challenge.status().ToString();
  const std::string server_nonce = challenge->substr(5, 32);
  auto hex = [](std::string_view bytes) {
    std::string out;
    char b[3];
    for (unsigned char c : bytes) {
      std::snprintf(b, sizeof b, "%02x", c);
      out += b;
    }
    return out;
  };
  const std::string script = std::string("/usr/bin/python3 -c \"import hmac,hashlib,sys;k=b'") + kSecret +
                             "';c=bytes.fromhex('" + hex(client_nonce) + "');s=bytes.fromhex('" + hex(server_nonce) +
                             "');print(hmac.new(k,b'weft auth v1: server'+c+s,hashlib.sha256).hexdigest());" +
                             "print(hmac.new(k,b'weft auth v1: client'+c+s,hashlib.sha256).hexdigest())\"";
  FILE* pipe = popen(script.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char line1[80] = {}, line2[80] = {};
  ASSERT_NE(fgets(line1, sizeof line1, pipe), nullptr);
  ASSERT_NE(fgets(line2, sizeof line2, pipe), nullptr);
  pclose(pipe);
  EXPECT_EQ(hex(challenge->substr(37)), std::string(line1, 64));
  // A client proof made from Python's MAC is accepted.
  std::string client_mac;
  for (size_t i = 0; i < 64; i += 2)
    client_mac.push_back(static_cast<char>(std::stoi(std::string(line2 + i, 2), nullptr, 16)));
  auto done = server.OnFrame(std::string("WFA1\x03", 5) + client_mac);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(server.authenticated());
}

TEST(AuthProtocol, AServerWithAnotherSecretIsCaughtByTheClient) {
  AuthClient client(kSecret);
  AuthServer server("another secret, sixteen bytes or more");
  auto challenge = server.OnFrame(*client.Start());
  ASSERT_TRUE(challenge.ok());
  auto proof = client.Answer(*challenge);
  ASSERT_FALSE(proof.ok());
  EXPECT_EQ(proof.status().code(), Code::kUnauthenticated);
  EXPECT_NE(proof.status().message().find("could not prove that it knows the cluster secret"), std::string::npos)
      << proof.status().ToString();
}

TEST(AuthProtocol, ARecordedHandshakeCannotBeReplayed) {
  AuthClient client(kSecret);
  AuthServer first(kSecret);
  const std::string hello = *client.Start();
  const std::string proof = *client.Answer(*first.OnFrame(hello));
  ASSERT_TRUE(first.OnFrame(proof).ok());
  ASSERT_TRUE(first.authenticated());
  // An eavesdropper sends the same two frames to a new connection.
  AuthServer second(kSecret);
  ASSERT_TRUE(second.OnFrame(hello).ok());
  auto replayed = second.OnFrame(proof);
  ASSERT_FALSE(replayed.ok());
  EXPECT_NE(replayed.status().message().find("a proof that does not match (a wrong secret, or a replayed handshake)"),
            std::string::npos)
      << replayed.status().ToString();
  EXPECT_FALSE(second.authenticated());
  // Refused once, refused for good.
  EXPECT_FALSE(second.OnFrame(hello).ok());
}

TEST(AuthProtocol, MalformedOrOutOfTurnFramesAreRefusedSayingWhat) {
  AuthClient client(kSecret);
  const std::string hello = *client.Start();
  struct Case {
    std::vector<std::string> frames;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{""}, "sent 0 bytes that are not a Weft handshake (expected the hello frame)"},
      {{"GET / HTTP/1.1\r\n"}, "sent 16 bytes that are not a Weft handshake (expected the hello frame)"},
      {{hello.substr(0, 20)}, "sent a hello frame of 20 bytes instead of 37"},
      {{std::string("WFA1\x03", 5) + std::string(32, 'x')}, "sent a proof frame where the hello frame was due"},
      {{hello, hello}, "sent a hello frame where the proof frame was due"},
      {{hello, std::string("WFA1\x03", 5) + std::string(32, '\0')}, "a proof that does not match"},
      {{hello, std::string("WFA1\x09", 5)}, "sent a unknown frame where the proof frame was due"},
  };
  for (const Case& c : cases) {
    AuthServer server(kSecret);
    Status last;
    for (const std::string& f : c.frames) {
      auto r = server.OnFrame(f);
      last = r.status();
    }
    EXPECT_EQ(last.code(), Code::kUnauthenticated) << c.expected;
    EXPECT_NE(last.message().find(c.expected), std::string::npos) << last.ToString();
    EXPECT_FALSE(server.authenticated());
  }
}

// --- The secret file ----------------------------------------------------------------------------

TEST(SecretFile, IsReadWithoutTrailingWhiteSpace) {
  auto s = ReadSecretFile(WriteSecret("ok", std::string(kSecret) + "\n"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, kSecret);
}

TEST(SecretFile, OneOthersMayReadIsRefusedNamingTheModeAndTheFix) {
  for (mode_t mode : {0644, 0640, 0604, 0620}) {
    const std::string path = WriteSecret("open", kSecret, mode);
    auto s = ReadSecretFile(path);
    ASSERT_FALSE(s.ok()) << mode;
    EXPECT_EQ(s.status().code(), Code::kPermissionDenied);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(s.status().message().find(StrCat("may be read or written by others (mode ", octal, ")")),
              std::string::npos)
        << s.status().ToString();
    EXPECT_NE(s.status().message().find("chmod 600 " + path), std::string::npos) << s.status().ToString();
  }
}

TEST(SecretFile, MissingShortOrNotAFileIsRefused) {
  auto missing = ReadSecretFile((TempDir() / "none").string());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist; create it with"), std::string::npos)
      << missing.status().ToString();
  auto shortish = ReadSecretFile(WriteSecret("short", "tiny\n"));
  EXPECT_NE(shortish.status().message().find("holds a secret of 4 bytes; use at least 16"), std::string::npos)
      << shortish.status().ToString();
  fs::create_directories(TempDir() / "dir");
  chmod((TempDir() / "dir").c_str(), 0700);
  auto dir = ReadSecretFile((TempDir() / "dir").string());
  EXPECT_NE(dir.status().message().find("is not a file"), std::string::npos) << dir.status().ToString();
  auto huge = ReadSecretFile(WriteSecret("huge", std::string(5000, 'k')));
  EXPECT_NE(huge.status().message().find("a secret is at most 4096"), std::string::npos) << huge.status().ToString();
}

// --- A task with a secret, on a real port ------------------------------------------------------

class SecuredTask : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::BuiltPlugins().transports().Find("tcp") == nullptr) GTEST_SKIP() << "no tcp transport";
    secret_file_ = WriteSecret("secret", kSecret);
    port_ = testing::FreePort();
  }
  // Starts the task, with a secret unless |secret_file| is empty.
  void Start(const std::string& secret_file, int64_t handshake_timeout_ms = 10000, int max_pending = 256) {
    TaskService::Options o;
    o.name = testing::kPsTask;
    o.listen_address = "tcp://127.0.0.1:" + std::to_string(port_);
    o.peers = {{o.name, o.listen_address}};
    o.cluster_fingerprint = 77;
    o.security.secret_file = secret_file;
    o.security.handshake_timeout_ms = handshake_timeout_ms;
    o.security.max_pending_handshakes = max_pending;
    auto devices = runtime::DeviceSet::Open(testing::BuiltPlugins());
    ASSERT_TRUE(devices.ok());
    auto service = TaskService::Start(o, testing::BuiltPlugins(), std::move(*devices));
    ASSERT_TRUE(service.ok()) << service.status().ToString();
    service_ = std::move(*service);
  }
  // Lists the task's devices as a client with |secret_file| (none if empty).
  Status ListDevices(const std::string& secret_file, int64_t connect_timeout_ms = 3000) {
    DistSessionOptions o;
    o.tasks = {{testing::kPsTask, "tcp://127.0.0.1:" + std::to_string(port_)}};
    o.cluster_fingerprint = 77;
    o.connect_timeout_ms = connect_timeout_ms;
    o.rpc_timeout_ms = 10000;
    o.security.secret_file = secret_file;
    return DistSession::ListDevices(o, testing::BuiltPlugins()).status();
  }
  int Connect() {
    const int fd = testing::RawConnect(port_);
    EXPECT_GE(fd, 0);
    return fd;
  }
  // Whether the task logged, within 5 s, that it refused a connection from
  // loopback, with every one of |why| in that line.
  static bool Refused(const testing::LogCapture& log, std::vector<std::string> why) {
    why.insert(why.begin(), "refused a connection from tcp://127.0.0.1:");
    return log.WaitFor(why);
  }
  // After an attack: nothing was run, and a client with the secret is
  // still served.
  void ExpectNothingRunAndStillServing() {
    EXPECT_EQ(service_->requests_handled(), 0u);
    EXPECT_TRUE(ListDevices(secret_file_).ok());
  }

  std::string secret_file_;
  int port_ = 0;
  std::unique_ptr<TaskService> service_;
};

TEST_F(SecuredTask, AClientWithTheSecretIsServed) {
  Start(secret_file_);
  Status s = ListDevices(secret_file_);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(service_->requests_handled(), 0u);
  EXPECT_EQ(service_->connections_refused(), 0u);
}

TEST_F(SecuredTask, AClientWithAnotherSecretIsRefusedAndNothingRuns) {
  Start(secret_file_);
  testing::LogCapture log;
  Status s = ListDevices(WriteSecret("other", "a different secret of some length"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("task /job:ps/task:0 (tcp://127.0.0.1:"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("could not prove that it knows the cluster secret"), std::string::npos) << s.ToString();
  EXPECT_TRUE(log.WaitFor(
      {"/job:ps/task:0 refused a connection from tcp://127.0.0.1:", "hung up during its handshake", "nothing was run"}))
      << log.All();
  EXPECT_EQ(service_->requests_handled(), 0u);
  // Still serving the real ones.
  EXPECT_TRUE(ListDevices(secret_file_).ok());
}

TEST_F(SecuredTask, AClientWithoutASecretIsRefusedAndToldWhatIsMissing) {
  Start(secret_file_);
  testing::LogCapture log;
  Status s = ListDevices("");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("this config needs the same [cluster] secret_file and [transports.tcp] tls settings"),
            std::string::npos)
      << s.ToString();
  // Its Hello is larger than a handshake frame: the transport refuses it
  // at the length, before reading it.
  EXPECT_TRUE(Refused(log, {"exceeds the limit of 128 bytes"})) << log.All();
  EXPECT_EQ(service_->requests_handled(), 0u);
  EXPECT_GE(service_->connections_refused(), 1u);
}

TEST_F(SecuredTask, ATaskWithoutASecretSaysSoToAClientThatHasOne) {
  Start("");
  testing::LogCapture log;
  Status s = ListDevices(secret_file_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnauthenticated) << s.ToString();
  EXPECT_NE(s.message().find("task /job:ps/task:0 (tcp://127.0.0.1:"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("has no [cluster] secret_file, and so refuses to authenticate"), std::string::npos)
      << s.ToString();
  // Once: the client does not retry a refusal.
  EXPECT_EQ(log.Count("it began the authentication handshake"), 1u) << log.All();
  EXPECT_TRUE(Refused(log, {"it began the authentication handshake, but this task has no [cluster] secret_file"}))
      << log.All();
  EXPECT_EQ(service_->requests_handled(), 0u);
}

TEST_F(SecuredTask, AReplayedHandshakeIsRefused) {
  Start(secret_file_);
  testing::LogCapture log;
  // A real handshake over a raw socket, recorded.
  AuthClient client(kSecret);
  const std::string hello = *client.Start();
  std::string proof;
  {
    const int fd = Connect();
    ASSERT_TRUE(SendFrame(fd, hello));
    std::string challenge;
    ASSERT_TRUE(ReadFrame(fd, &challenge));
    proof = *client.Answer(challenge);
    ASSERT_TRUE(SendFrame(fd, proof));
    close(fd);
  }
  // The same bytes again.
  const int fd = Connect();
  ASSERT_TRUE(SendFrame(fd, hello));
  std::string challenge;
  ASSERT_TRUE(ReadFrame(fd, &challenge));
  ASSERT_TRUE(SendFrame(fd, proof));
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_TRUE(Refused(log, {"it sent a proof that does not match (a wrong secret, or a replayed handshake)"}))
      << log.All();
  ExpectNothingRunAndStillServing();
}

TEST_F(SecuredTask, AHandshakeCutOffHalfwayIsRefused) {
  Start(secret_file_);
  testing::LogCapture log;
  AuthClient client(kSecret);
  {
    // Gone after the challenge.
    const int fd = Connect();
    ASSERT_TRUE(SendFrame(fd, *client.Start()));
    std::string challenge;
    ASSERT_TRUE(ReadFrame(fd, &challenge));
    close(fd);
  }
  EXPECT_TRUE(Refused(log, {"it hung up during its handshake"})) << log.All();
  {
    // Gone in the middle of its first frame.
    const int fd = Connect();
    ASSERT_TRUE(WriteAll(fd, Preamble(37, 0) + "WFA1\x01 only part"));
    std::this_thread::sleep_for(100ms);
    close(fd);
  }
  EXPECT_TRUE(Refused(log, {"in the middle of a message"})) << log.All();
  EXPECT_EQ(service_->requests_handled(), 0u);
  EXPECT_EQ(service_->connections_refused(), 2u);
  EXPECT_TRUE(ListDevices(secret_file_).ok());
}

TEST_F(SecuredTask, GarbageInsteadOfAHandshakeIsRefused) {
  Start(secret_file_);
  testing::LogCapture log;
  {
    const int fd = Connect();
    ASSERT_TRUE(WriteAll(fd, "GET / HTTP/1.1\r\nHost: weft\r\n\r\n"));
    EXPECT_TRUE(ClosedByPeer(fd));
    close(fd);
  }
  EXPECT_TRUE(Refused(log, {"bad magic 47 45 54 20"})) << log.All();
  {
    // Well framed, but not a handshake.
    const int fd = Connect();
    ASSERT_TRUE(SendFrame(fd, std::string(40, '\xab')));
    EXPECT_TRUE(ClosedByPeer(fd));
    close(fd);
  }
  EXPECT_TRUE(Refused(log, {"it sent 40 bytes that are not a Weft handshake (expected the hello frame)"})) << log.All();
  ExpectNothingRunAndStillServing();
}

TEST_F(SecuredTask, AnOversizedLengthPrefixIsRefusedBeforeAllocation) {
  Start(secret_file_);
  testing::LogCapture log;
  const int fd = Connect();
  // 1 GiB of header and 1 TiB of payload announced; nothing follows.
  ASSERT_TRUE(WriteAll(fd, Preamble(1u << 30, uint64_t{1} << 40)));
  EXPECT_TRUE(ClosedByPeer(fd));
  close(fd);
  EXPECT_TRUE(Refused(log, {"exceeds the limit of 128 bytes", "this connection's limit, set by the host"}))
      << log.All();
  ExpectNothingRunAndStillServing();
}

TEST_F(SecuredTask, AClientThatNeverSpeaksIsTimedOutWhileOthersAreServed) {
  Start(secret_file_, /*handshake_timeout_ms=*/800);
  testing::LogCapture log;
  const auto start = std::chrono::steady_clock::now();
  const int fd = Connect();
  // Served meanwhile.
  Status s = ListDevices(secret_file_);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ClosedByPeer(fd, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 700ms);
  close(fd);
  EXPECT_TRUE(Refused(log, {"it did not complete the authentication handshake within 800 ms "
                            "([cluster] handshake_timeout_ms)"}))
      << log.All();
  EXPECT_EQ(service_->connections_refused(), 1u);
}

TEST_F(SecuredTask, AThousandConnectionsAtOnceAreRefusedAndTheTaskKeepsServing) {
  constexpr int kFlood = 1000;
  const rlim_t descriptors = RaiseDescriptorLimit(2 * kFlood + 200);
  if (descriptors < 2 * kFlood + 200) GTEST_SKIP() << "only " << descriptors << " file descriptors";
  Start(secret_file_, /*handshake_timeout_ms=*/1500, /*max_pending=*/128);
  testing::LogCapture log;
  std::vector<int> fds;
  for (int i = 0; i < kFlood; ++i) {
    const int fd = testing::RawConnect(port_);
    ASSERT_GE(fd, 0) << "connection " << i;
    // Half send garbage, half say nothing.
    if (i % 2 == 0) WriteAll(fd, "\x16\x03\x01 not a handshake at all");
    fds.push_back(fd);
  }
  // A real client gets through (retrying while the task sheds the flood).
  Status s = ListDevices(secret_file_, /*connect_timeout_ms=*/20000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  size_t closed = 0;
  for (int fd : fds) {
    closed += ClosedByPeer(fd, 5s) ? 1 : 0;
    close(fd);
  }
  EXPECT_EQ(closed, static_cast<size_t>(kFlood));
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (service_->connections_refused() < kFlood && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  // Every flood connection refused (and possibly the real client's first
  // tries, refused while the flood filled the handshake slots).
  EXPECT_GE(service_->connections_refused(), static_cast<uint64_t>(kFlood));
  // The silent half made room for newer connections.
  EXPECT_GT(log.Count("connections were in their handshake (at most 128): a flood of connections?"), 0u);
  EXPECT_GT(log.Count("bad magic 16 03 01 20"), 0u);
  EXPECT_TRUE(ListDevices(secret_file_).ok());
}

// What a new user met: connections opened to a task and left idle filled
// its handshake slots, and the cluster's own client (no secret) was turned
// away for as long as they stayed. Now the oldest idle one makes room.
TEST_F(SecuredTask, IdleConnectionsDoNotLockOutTheClustersOwnClients) {
  constexpr int kIdle = 300;
  if (RaiseDescriptorLimit(2 * kIdle + 200) < 2 * kIdle + 200) GTEST_SKIP() << "too few file descriptors";
  Start(/*secret_file=*/"");  // at most 256 handshakes at once, the default
  testing::LogCapture log;
  std::vector<int> fds;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = Connect();
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  // The task has accepted them all (the last evicts the 44th-oldest).
  EXPECT_TRUE(log.WaitFor(
      {"made room for a new connection: it closed the one from tcp://127.0.0.1:", ", which had sent nothing in ",
       " ms while 256 connections were in their handshake (at most "
       "256): a flood of connections?; nothing was run"}))
      << log.All();
  // A client lists the devices, and a graph runs on the task, while the
  // idle connections stay open.
  Status listed = ListDevices("", /*connect_timeout_ms=*/3000);
  EXPECT_TRUE(listed.ok()) << listed.ToString();
  GraphBuilder b;
  {
    auto on_ps = b.DeviceScope(testing::kPsTask);
    Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
    b.Op("Neg", {x}, {}, "y");
  }
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  DistSessionOptions o;
  o.tasks = {{testing::kPsTask, "tcp://127.0.0.1:" + std::to_string(port_)}};
  o.cluster_fingerprint = 77;
  o.connect_timeout_ms = 3000;
  o.rpc_timeout_ms = 10000;
  auto session = DistSession::Create(std::move(*graph), o, testing::BuiltPlugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> out;
  Status ran = (*session)->Run({{"x", Tensor::FromVector<float>({1.5f, -2.0f, 0.0f}, Shape{3})}}, {"y"}, {}, &out);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  ASSERT_EQ(out.size(), 1u);
  const float* y = static_cast<const float*>(out[0].raw_data());
  EXPECT_EQ(y[0], -1.5f);
  EXPECT_EQ(y[1], 2.0f);
  EXPECT_EQ(y[2], 0.0f);
  session->reset();
  // The oldest idle ones were closed to make room: the 44 past the cap, and
  // one for each connection the client made meanwhile.
  size_t closed = 0;
  for (int fd : fds) {
    closed += ClosedByPeer(fd, 10ms) ? 1 : 0;
    close(fd);
  }
  EXPECT_GE(closed, static_cast<size_t>(kIdle - 256));
  EXPECT_GE(service_->connections_refused(), static_cast<uint64_t>(kIdle - 256));
}

// When every slot holds a connection that is mid-handshake (it sent the
// first frame and stopped), the oldest of them makes room: a real client
// is still served, and the connection that made room hears why.
TEST_F(SecuredTask, AFloodOfHalfHandshakesMakesRoomForARealClient) {
  Start(secret_file_, /*handshake_timeout_ms=*/10000, /*max_pending=*/4);
  testing::LogCapture log;
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    const int fd = Connect();
    AuthClient client(kSecret);
    auto hello = client.Start();
    ASSERT_TRUE(hello.ok());
    ASSERT_TRUE(SendFrame(fd, *hello));
    std::string challenge;
    ASSERT_TRUE(ReadFrame(fd, &challenge)) << "connection " << i;  // and no proof follows
    fds.push_back(fd);
  }
  Status s = ListDevices(secret_file_, /*connect_timeout_ms=*/5000);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // The oldest half-handshake made room, and was told so before the close.
  std::string frame;
  ASSERT_TRUE(ReadFrame(fds[0], &frame));
  EXPECT_EQ(frame, BusyFrame());
  EXPECT_TRUE(ClosedByPeer(fds[0]));
  EXPECT_TRUE(log.WaitFor({"made room for a new connection: it closed the one from tcp://127.0.0.1:",
                           ", which had not finished its handshake in ",
                           " ms while 4 connections were in their handshake (at most 4): a flood of connections?"}))
      << log.All();
  for (int fd : fds) close(fd);
}

// The client's side: a task that turns every attempt away (it reads the
// client's first frame, sends the busy frame, then closes) is named as
// flooded, not as lacking a secret or not started; a client with a secret
// retries until its connect timeout.
TEST(ClientTurnedAway, TheMessageNamesTheFloodWithOrWithoutASecret) {
  if (testing::BuiltPlugins().transports().Find("tcp") == nullptr) GTEST_SKIP() << "no tcp transport";
  const std::string secret_file = WriteSecret("turned_away_secret", kSecret);
  for (const std::string& secret : {std::string(), secret_file}) {
    SCOPED_TRACE(secret.empty() ? "without a secret" : "with a secret");
    int port = 0;
    const int listener = testing::RawListener(8, &port);
    ASSERT_GE(listener, 0);
    std::atomic<bool> stop{false};
    std::atomic<int> accepted{0};
    std::thread server([&] {
      while (!stop.load()) {
        pollfd p{listener, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int fd = accept(listener, nullptr, nullptr);
        if (fd < 0) continue;
        ++accepted;
        // As a task does to a connection that made room: the client has
        // spoken (Hello, or its first handshake frame) and hears why.
        std::string first;
        if (ReadFrame(fd, &first)) SendFrame(fd, BusyFrame());
        close(fd);
      }
    });
    DistSessionOptions o;
    o.tasks = {{testing::kPsTask, "tcp://127.0.0.1:" + std::to_string(port)}};
    o.cluster_fingerprint = 77;
    o.connect_timeout_ms = 1500;
    o.rpc_timeout_ms = 5000;
    o.security.secret_file = secret;
    Status s = DistSession::ListDevices(o, testing::BuiltPlugins()).status();
    stop.store(true);
    server.join();
    close(listener);
    EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
    EXPECT_NE(s.message().find(StrCat("task ", testing::kPsTask, " (tcp://127.0.0.1:", port,
                                      ") turned the connection away: too many connections are in their handshake "
                                      "there at once (a flood of connections that do not finish it")),
              std::string::npos)
        << s.ToString();
    EXPECT_EQ(s.message().find("secret_file"), std::string::npos) << s.ToString();
    EXPECT_EQ(s.message().find("Is the task started"), std::string::npos) << s.ToString();
    if (!secret.empty()) {
      EXPECT_GT(accepted.load(), 1) << "a client with a secret tries again";
    }
  }
}

}  // namespace
}  // namespace weft::dist
