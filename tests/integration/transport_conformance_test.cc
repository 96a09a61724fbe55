// The transport conformance suite: every transport plugin is held to the
// contract of weft_transport.h by the same tests.
//
// It runs on the transports named in $WEFT_TRANSPORT_SCHEMES (default
// "tcp,zmq,rdma"), loaded the way `weft` loads them (the build's plugin
// folder and $WEFT_PLUGIN_PATH). A scheme whose plugin is missing or
// unavailable on this machine is skipped with the reason. An outside
// author runs it on their own plugin with
//
//   WEFT_PLUGIN_PATH=/path/to/plugins WEFT_TRANSPORT_SCHEMES=mine transport_conformance_test
//
// Only loopback addresses are used; every wait has a deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include "core/base/strings.h"
#include "core/config/config.h"
#include "core/plugin/plugin_host.h"
#include "tests/integration/transport_harness.h"
#include "tests/support/loopback.h"
#include "tests/support/subprocess.h"

namespace weft::testing {
namespace {

using namespace std::chrono_literals;

plugin::PluginHost& Host() {
  static plugin::PluginHost* host = [] {
    auto* h = new plugin::PluginHost(*config::DefaultConfig());
    Status s = h->LoadAll();
    if (!s.ok()) std::fprintf(stderr, "loading plugins: %s\n", std::string(s.message()).c_str());
    return h;
  }();
  return *host;
}

std::vector<std::string> Schemes() {
  const char* env = std::getenv("WEFT_TRANSPORT_SCHEMES");
  std::vector<std::string> out;
  for (const std::string& s : StrSplit(env != nullptr && *env != '\0' ? env : "tcp,zmq,rdma", ',')) {
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

// The TCP port of an address "scheme://host:port", or 0.
int PortOf(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) return 0;
  return std::atoi(address.c_str() + colon + 1);
}

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// A payload of |n| bytes with a pattern that catches reordering and
// truncation.
std::string Pattern(uint64_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s[i] = static_cast<char>(x);
  }
  return s;
}

std::string U64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }
uint64_t ReadU64(const std::string& s, std::size_t at = 0) {
  uint64_t v = 0;
  std::memcpy(&v, s.data() + at, sizeof v);
  return v;
}

// Untouched zero pages, mapped read-only: a large payload that costs no
// memory; unmapped with the object.
struct ZeroPages {
  explicit ZeroPages(uint64_t bytes)
      : size(bytes), data(mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) {}
  ~ZeroPages() {
    if (data != MAP_FAILED) munmap(data, size);
  }
  ZeroPages(const ZeroPages&) = delete;
  ZeroPages& operator=(const ZeroPages&) = delete;
  uint64_t size;
  void* data;
};

class TransportConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& scheme = GetParam();
    const plugin::TransportPlugin* t = Host().transports().Find(scheme);
    if (t == nullptr) {
      std::string why = "no transport plugin serves '" + scheme + "' here";
      for (const plugin::PluginInfo& info : Host().plugins()) {
        if (info.name == scheme || info.path.find("weft_transport_" + scheme + ".so") != std::string::npos) {
          why += StrCat(": ", info.path, " is ", plugin::StateName(info.state), ": ", info.reason);
        }
      }
      GTEST_SKIP() << why;
    }
    table_ = t->table;
  }

  std::string Listen() const { return GetParam() + "://127.0.0.1:0"; }
  std::string AddressWithPort(int port) const { return GetParam() + "://127.0.0.1:" + std::to_string(port); }

  // A listening server and a connected client.
  struct Pair {
    std::unique_ptr<EndpointHarness> server, client;
    weft_connection_t to_server = nullptr;
  };
  Pair Connected(bool server_retains = false) {
    Pair p;
    p.server = std::make_unique<EndpointHarness>(table_, Listen(), server_retains);
    EXPECT_TRUE(p.server->open_status().ok()) << p.server->open_status().message;
    p.client = std::make_unique<EndpointHarness>(table_, "");
    EXPECT_TRUE(p.client->open_status().ok()) << p.client->open_status().message;
    CStatus s;
    p.to_server = p.client->Connect(p.server->Address(), 10000, &s);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(p.server->WaitUntil([&] { return p.server->accepted.size() == 1; }, 10s));
    return p;
  }

  const weft_transport_plugin_t* table_ = nullptr;
};

TEST_P(TransportConformance, ReportsTheChosenPort) {
  EndpointHarness server(table_, Listen());
  ASSERT_TRUE(server.open_status().ok()) << server.open_status().message;
  const std::string address = server.Address();
  EXPECT_EQ(address.rfind(GetParam(), 0), 0u) << address;
  EXPECT_GT(PortOf(address), 0) << address;
  char tiny[4];
  CStatus s = TakeStatus(table_->endpoint_address(server.endpoint(), tiny, sizeof tiny));
  EXPECT_EQ(s.code, WEFT_RESOURCE_EXHAUSTED) << s.message;
}

TEST_P(TransportConformance, RefusesMalformedListenAddresses) {
  for (const std::string& bad :
       {GetParam() + "://127.0.0.1:99999", GetParam() + "://127.0.0.1", GetParam() + "://127.0.0.1:12ab"}) {
    EndpointHarness e(table_, bad);
    EXPECT_FALSE(e.open_status().ok()) << bad;
    EXPECT_NE(e.open_status().message.find("127.0.0.1"), std::string::npos) << e.open_status().message;
  }
}

TEST_P(TransportConformance, RefusesAPortInUse) {
  EndpointHarness first(table_, Listen());
  ASSERT_TRUE(first.open_status().ok());
  const std::string taken = first.Address();
  EndpointHarness second(table_, taken);
  EXPECT_FALSE(second.open_status().ok());
  EXPECT_NE(second.open_status().message.find(std::to_string(PortOf(taken))), std::string::npos)
      << second.open_status().message;
}

TEST_P(TransportConformance, DeliversHeaderAndSlicesAsOneMessageBothWays) {
  Pair p = Connected();
  const std::string a = "ab", b = "", c = "cdef";
  std::atomic<int> done{0};
  ASSERT_TRUE(p.client
                  ->Send(p.to_server, "hello", {{a.data(), a.size()}, {b.data(), 0}, {c.data(), c.size()}},
                         [&](CStatus s) {
                           EXPECT_TRUE(s.ok()) << s.message;
                           ++done;
                         })
                  .ok());
  ASSERT_TRUE(p.server->WaitUntil([&] { return p.server->messages.size() == 1; }, 10s));
  EXPECT_EQ(p.server->messages[0].header, "hello");
  EXPECT_EQ(p.server->messages[0].payload, "abcdef");
  EXPECT_EQ(p.server->messages[0].connection, p.server->accepted[0]);
  const std::string reply = "pong";
  ASSERT_TRUE(p.server->Send(p.server->accepted[0], "echo", {{reply.data(), reply.size()}}).ok());
  ASSERT_TRUE(p.client->WaitUntil([&] { return p.client->messages.size() == 1; }, 10s));
  EXPECT_EQ(p.client->messages[0].header, "echo");
  EXPECT_EQ(p.client->messages[0].payload, "pong");
  EXPECT_EQ(p.client->messages[0].connection, p.to_server);
  EXPECT_TRUE(p.client->WaitUntil([&] { return done.load() == 1; }, 10s));
}

TEST_P(TransportConformance, CarriesMessagesFromZeroBytesToOneGiB) {
  Pair p = Connected(/*server_retains=*/true);
  struct Case {
    uint64_t header, payload;
  };
  const Case cases[] = {
      {0, 0}, {1, 0}, {0, 1}, {7, 4096}, {100, 1 << 20}, {0, uint64_t{64} << 20}, {16, uint64_t{1} << 30}};
  std::size_t expected = 0;
  for (const Case& c : cases) {
    const std::string header = Pattern(c.header, 1);
    std::string payload = Pattern(c.payload, c.payload + 7);
    std::atomic<bool> sent{false};
    ASSERT_TRUE(p.client
                    ->Send(p.to_server, header, {{payload.data(), payload.size()}},
                           [&](CStatus s) {
                             EXPECT_TRUE(s.ok()) << s.message;
                             sent = true;
                           })
                    .ok());
    ++expected;
    ASSERT_TRUE(p.server->WaitUntil([&] { return p.server->messages.size() == expected; }, 120s))
        << "message of " << c.header << "+" << c.payload << " bytes did not arrive";
    ASSERT_TRUE(p.client->WaitUntil([&] { return sent.load(); }, 60s));
    const Received& r = p.server->messages.back();
    EXPECT_EQ(r.header, header);
    ASSERT_EQ(r.payload_size, c.payload);
    const void* got = r.token != nullptr ? r.payload_ptr : r.payload.data();
    EXPECT_TRUE(c.payload == 0 || std::memcmp(got, payload.data(), c.payload) == 0)
        << "payload of " << c.payload << " bytes differs";
    // Free the big ones as we go.
    std::lock_guard<std::mutex> lock(p.server->mu());
    Received& last = p.server->messages.back();
    if (last.token != nullptr && c.payload > (1 << 20)) {
      last.release(last.token);
      last.token = nullptr;
    }
  }
}

TEST_P(TransportConformance, KeepsTheOrderOfTenThousandMessages) {
  Pair p = Connected();
  constexpr uint64_t kCount = 10000;
  std::vector<std::string> payloads;
  payloads.reserve(kCount);
  for (uint64_t i = 0; i < kCount; ++i) payloads.push_back(Pattern(i % 300, i));
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(p.client->Send(p.to_server, U64(i), {{payloads[i].data(), payloads[i].size()}}).ok());
  }
  ASSERT_TRUE(p.server->WaitUntil([&] { return p.server->messages.size() == kCount; }, 60s))
      << p.server->messages.size() << " of " << kCount << " arrived";
  for (uint64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(ReadU64(p.server->messages[i].header), i);
    ASSERT_EQ(p.server->messages[i].payload, payloads[i]) << "message " << i;
  }
}

TEST_P(TransportConformance, ServesManyConnectionsAndThreadsAtOnce) {
  EndpointHarness server(table_, Listen());
  ASSERT_TRUE(server.open_status().ok());
  const std::string address = server.Address();
  constexpr int kConnections = 16, kSharedThreads = 4, kPerThread = 200;
  EndpointHarness client(table_, "");
  std::vector<weft_connection_t> conns(kConnections + 1);
  for (auto& c : conns) {
    CStatus s;
    c = client.Connect(address, 10000, &s);
    ASSERT_TRUE(s.ok()) << s.message;
  }
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  // The payloads stay put until every message has arrived.
  std::vector<std::vector<std::string>> bodies(kConnections + kSharedThreads);
  for (int t = 0; t < kConnections + kSharedThreads; ++t) {
    for (uint64_t i = 0; i < kPerThread; ++i) bodies[static_cast<std::size_t>(t)].push_back(Pattern(64 + t, i));
  }
  // One thread per connection, and kSharedThreads threads on the last one.
  for (int t = 0; t < kConnections + kSharedThreads; ++t) {
    weft_connection_t c = conns[std::min(t, kConnections)];
    threads.emplace_back([&, t, c] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const std::string& body = bodies[static_cast<std::size_t>(t)][i];
        if (!client.Send(c, U64(t) + U64(i), {{body.data(), body.size()}}).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  constexpr std::size_t kTotal = (kConnections + kSharedThreads) * kPerThread;
  ASSERT_TRUE(server.WaitUntil([&] { return server.messages.size() == kTotal; }, 60s))
      << server.messages.size() << " of " << kTotal;
  std::map<uint64_t, uint64_t> next;
  std::map<uint64_t, weft_connection_t> conn_of;
  for (const Received& r : server.messages) {
    const uint64_t t = ReadU64(r.header, 0), i = ReadU64(r.header, 8);
    ASSERT_EQ(i, next[t]) << "thread " << t << " out of order";
    ++next[t];
    // Each sending thread's messages arrive on one server connection.
    if (conn_of.count(t) == 0) conn_of[t] = r.connection;
    ASSERT_EQ(conn_of[t], r.connection);
    ASSERT_EQ(r.payload, Pattern(64 + t, i));
  }
  EXPECT_EQ(server.accepted.size(), static_cast<std::size_t>(kConnections + 1));
}

TEST_P(TransportConformance, AnOrderlyCloseIsSeenWithoutAnError) {
  Pair p = Connected();
  p.client->Release(p.to_server);
  ASSERT_TRUE(p.server->WaitUntil([&] { return p.server->closed.size() == 1; }, 10s));
  EXPECT_TRUE(p.server->closed[0].second.ok()) << p.server->closed[0].second.message;
  EXPECT_EQ(p.server->closed[0].first, p.server->accepted[0]);
  // The client asked for the close: it hears nothing of it.
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(p.client->closed.empty());
}

TEST_P(TransportConformance, APeerKilledMidMessageClosesTheConnectionWithAnError) {
  EndpointHarness server(table_, Listen());
  ASSERT_TRUE(server.open_status().ok());
  BackgroundProcess peer({WEFT_TRANSPORT_PEER, GetParam(), server.Address(), "flood"});
  ASSERT_TRUE(server.WaitUntil([&] { return !server.messages.empty(); }, 30s)) << peer.Output();
  ASSERT_EQ(server.messages[0].header, "ready");
  std::this_thread::sleep_for(100ms);  // the 1.5 GiB message is now on its way
  peer.Kill(SIGKILL);
  ASSERT_TRUE(server.WaitUntil([&] { return !server.closed.empty(); }, 20s)) << "no on_closed after the peer died";
  EXPECT_FALSE(server.closed[0].second.ok()) << "a peer that died mid-message is not an orderly close";
  EXPECT_FALSE(server.closed[0].second.message.empty());
  std::printf("on_closed: %s\n", server.closed[0].second.message.c_str());
  for (const Received& r : server.messages) EXPECT_NE(r.header, "flood") << "a partial message was delivered";
}

TEST_P(TransportConformance, ASendToAPeerKilledMidMessageFails) {
  EndpointHarness server(table_, Listen());
  ASSERT_TRUE(server.open_status().ok());
  BackgroundProcess peer({WEFT_TRANSPORT_PEER, GetParam(), server.Address(), "sink"});
  ASSERT_TRUE(server.WaitUntil([&] { return !server.messages.empty(); }, 30s)) << peer.Output();
  const ZeroPages big(uint64_t{3} << 29);  // 1.5 GiB
  ASSERT_NE(big.data, MAP_FAILED);
  std::atomic<int> done_calls{0};
  CStatus done_status;
  ASSERT_TRUE(server
                  .Send(server.accepted[0], "big", {{big.data, big.size}},
                        [&](CStatus s) {
                          done_status = s;
                          ++done_calls;
                        })
                  .ok());
  std::this_thread::sleep_for(50ms);
  peer.Kill(SIGKILL);
  ASSERT_TRUE(server.WaitUntil([&] { return done_calls.load() == 1 && !server.closed.empty(); }, 20s))
      << "done " << done_calls.load() << ", closed " << server.closed.size();
  EXPECT_FALSE(done_status.ok()) << "the send cannot have succeeded";
  EXPECT_FALSE(server.closed[0].second.ok());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(done_calls.load(), 1);
}

TEST_P(TransportConformance, ConnectingWhereNothingListensFailsNamingTheAddress) {
  int port = 0;
  const int fd = RawListener(-1, &port);  // bound, not listening: refuses
  EndpointHarness client(table_, "");
  CStatus s;
  const auto start = std::chrono::steady_clock::now();
  client.Connect(AddressWithPort(port), 2000, &s);
  const auto took = std::chrono::steady_clock::now() - start;
  close(fd);
  EXPECT_TRUE(s.code == WEFT_UNAVAILABLE || s.code == WEFT_DEADLINE_EXCEEDED) << s.code << " " << s.message;
  EXPECT_NE(s.message.find(std::to_string(port)), std::string::npos) << s.message;
  EXPECT_LT(took, 5s);
}

TEST_P(TransportConformance, ConnectGivesUpAtItsDeadline) {
  // A listener whose accept queue is full drops new SYNs: the connect
  // neither succeeds nor is refused.
  int port = 0;
  const int fd = RawListener(0, &port);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int f = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(f, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(100ms);
  EndpointHarness client(table_, "");
  CStatus s;
  const auto start = std::chrono::steady_clock::now();
  client.Connect(AddressWithPort(port), 300, &s);
  const auto took = std::chrono::steady_clock::now() - start;
  for (int f : fillers) close(f);
  close(fd);
  EXPECT_EQ(s.code, WEFT_DEADLINE_EXCEEDED) << s.message;
  EXPECT_NE(s.message.find(std::to_string(port)), std::string::npos) << s.message;
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);
}

TEST_P(TransportConformance, MalformedAndOversizedFramesAreRefusedWithoutHarm) {
  EndpointHarness server(table_, Listen());
  ASSERT_TRUE(server.open_status().ok());
  const int port = PortOf(server.Address());
  const int64_t rss_before = ResidentBytes();
  std::string huge = "WFT1";
  huge += std::string(12, '\xff');  // in any framing: lengths near 2^64
  const std::vector<std::string> garbage = {std::string(16, '\0'), huge, std::string(64, '\xff'), Pattern(4096, 3),
                                            "GET / HTTP/1.1\r\nHost: x\r\n\r\n"};
  for (const std::string& bytes : garbage) {
    const int fd = RawConnect(port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    std::this_thread::sleep_for(200ms);
    close(fd);
  }
  // Every connection the transport accepted from the garbage is closed
  // with an error, and nothing was delivered.
  EXPECT_TRUE(server.WaitUntil([&] { return server.closed.size() == server.accepted.size(); }, 10s))
      << server.accepted.size() << " accepted, " << server.closed.size() << " closed";
  for (const auto& [c, s] : server.closed) {
    EXPECT_FALSE(s.ok()) << "garbage closed as if orderly";
    std::printf("refused: %s\n", s.message.c_str());
  }
  EXPECT_TRUE(server.messages.empty());
  EXPECT_LT(ResidentBytes() - rss_before, int64_t{256} << 20) << "garbage made the endpoint allocate";
  // And it still serves a real peer.
  EndpointHarness client(table_, "");
  CStatus s;
  weft_connection_t c = client.Connect(server.Address(), 10000, &s);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_TRUE(client.Send(c, "still here", {}).ok());
  EXPECT_TRUE(server.WaitUntil([&] { return server.messages.size() == 1; }, 10s));
}

// The tcp transport reads what the socket has into a staging buffer and
// cuts messages from it: several frames in one segment, a frame dribbled a
// few bytes at a time (its preamble split across reads), and a frame larger
// than the stage must each arrive whole and in order; a frame cut short by
// the peer's close is an error naming the bytes that were missing.
TEST_P(TransportConformance, TcpCutsMessagesFromWhateverTheSocketReturns) {
  if (GetParam() != "tcp") GTEST_SKIP() << "tcp's own framing";
  EndpointHarness server(table_, Listen());
  ASSERT_TRUE(server.open_status().ok());
  auto frame = [](const std::string& header, const std::string& payload) {
    std::string out = "WFT1";
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(header.size() >> (8 * i)));
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(payload.size() >> (8 * i)));
    return out + header + payload;
  };
  std::vector<std::pair<std::string, std::string>> sent;
  std::string together;
  for (uint64_t i = 0; i < 3; ++i) {
    sent.emplace_back(U64(i), Pattern(i * 100, i));
    together += frame(sent.back().first, sent.back().second);
  }
  sent.emplace_back(U64(3), Pattern(5000, 3));
  const std::string dribbled = frame(sent.back().first, sent.back().second);
  sent.emplace_back(U64(4), Pattern(200000, 4));  // past the 64 KiB stage
  const std::string large = frame(sent.back().first, sent.back().second);
  sent.emplace_back("", "");  // an empty message between others
  const std::string empty = frame("", "");
  const int fd = RawConnect(PortOf(server.Address()));
  ASSERT_GE(fd, 0);
  auto write_all = [fd](const std::string& bytes) {
    for (std::size_t at = 0; at < bytes.size();) {
      const ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
      ASSERT_GT(n, 0);
      at += static_cast<std::size_t>(n);
    }
  };
  write_all(together);
  for (std::size_t at = 0; at < dribbled.size(); at += 7) {
    write_all(dribbled.substr(at, 7));
    if (at < 64) std::this_thread::sleep_for(2ms);  // the preamble and header, a few bytes per read
  }
  write_all(large.substr(0, 9));  // part of a preamble
  std::this_thread::sleep_for(20ms);
  write_all(large.substr(9) + empty);
  ASSERT_TRUE(server.WaitUntil([&] { return server.messages.size() == sent.size(); }, 10s))
      << server.messages.size() << " of " << sent.size() << " arrived";
  for (std::size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(server.messages[i].header, sent[i].first) << "message " << i;
    EXPECT_EQ(server.messages[i].payload, sent[i].second) << "message " << i;
  }
  const std::string cut = frame(U64(9), Pattern(1000, 9));
  write_all(cut.substr(0, 600));
  close(fd);
  ASSERT_TRUE(server.WaitUntil([&] { return !server.closed.empty(); }, 10s));
  EXPECT_NE(server.closed[0].second.message.find("in the middle of a message (584 of 1008 bytes)"), std::string::npos)
      << server.closed[0].second.message;
  EXPECT_EQ(server.messages.size(), sent.size());
}

TEST_P(TransportConformance, ClosingDuringASendFinishesItExactlyOnce) {
  Pair p = Connected();
  const ZeroPages big(uint64_t{1} << 30);
  ASSERT_NE(big.data, MAP_FAILED);
  std::atomic<int> done_calls{0};
  ASSERT_TRUE(p.client->Send(p.to_server, "big", {{big.data, big.size}}, [&](CStatus) { ++done_calls; }).ok());
  ASSERT_TRUE(p.client->Send(p.to_server, "queued", {}, [&](CStatus) { ++done_calls; }).ok());
  const auto start = std::chrono::steady_clock::now();
  p.client->Release(p.to_server);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "connection_close blocked";
  EXPECT_TRUE(p.client->WaitUntil([&] { return done_calls.load() == 2; }, 10s)) << done_calls.load();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(done_calls.load(), 2);
  // The server sees the connection end (with or without an error: the
  // close may fall between two messages).
  EXPECT_TRUE(p.server->WaitUntil([&] { return p.server->closed.size() == 1; }, 20s));
}

TEST_P(TransportConformance, ClosingTheEndpointFinishesPendingSendsAndStopsCallbacks) {
  Pair p = Connected();
  std::atomic<int> done_calls{0};
  const ZeroPages big(uint64_t{1} << 30);
  ASSERT_NE(big.data, MAP_FAILED);
  ASSERT_TRUE(p.client->Send(p.to_server, "big", {{big.data, big.size}}, [&](CStatus) { ++done_calls; }).ok());
  p.client->CloseEndpoint();
  EXPECT_EQ(done_calls.load(), 1) << "endpoint_close returned before finishing the send";
  // The handle is still the host's to release.
  p.client->Release(p.to_server);
  EXPECT_EQ(p.client->late_callbacks, 0);
  EXPECT_TRUE(p.server->WaitUntil([&] { return p.server->closed.size() == 1; }, 20s));
}

TEST_P(TransportConformance, SendingOnAConnectionThePeerClosedFails) {
  Pair p = Connected();
  p.server->Release(p.server->accepted[0]);
  ASSERT_TRUE(p.client->WaitUntil([&] { return p.client->closed.size() == 1; }, 10s));
  std::atomic<int> done_calls{0};
  CStatus done_status;
  const CStatus returned = p.client->Send(p.to_server, "late", {}, [&](CStatus s) {
    done_status = s;
    ++done_calls;
  });
  if (returned.ok()) {
    ASSERT_TRUE(p.client->WaitUntil([&] { return done_calls.load() == 1; }, 10s));
    EXPECT_FALSE(done_status.ok());
  } else {
    EXPECT_EQ(done_calls.load(), 0) << "done ran although send returned an error";
  }
}

TEST_P(TransportConformance, ARetainedMessageOutlivesItsCallback) {
  Pair p = Connected(/*server_retains=*/true);
  const std::string body = Pattern(100000, 5);
  ASSERT_TRUE(p.client->Send(p.to_server, "keep", {{body.data(), body.size()}}).ok());
  ASSERT_TRUE(p.server->WaitUntil([&] { return p.server->messages.size() == 1; }, 10s));
  const Received& r = p.server->messages[0];
  if (r.token == nullptr) GTEST_SKIP() << "this transport does not offer retain";
  // More traffic, so a transport that reused its buffer would overwrite it.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(p.client->Send(p.to_server, "more", {{body.data(), 1000}}).ok());
  ASSERT_TRUE(p.server->WaitUntil([&] { return p.server->messages.size() == 11; }, 10s));
  EXPECT_EQ(std::memcmp(p.server->messages[0].payload_ptr, body.data(), body.size()), 0);
}

TEST_P(TransportConformance, NoCallbackRunsAfterRelease) {
  Pair p = Connected();
  // Traffic in flight both ways while both sides release.
  const std::string body(4096, 'x');  // outlives every send
  std::thread flood([&] {
    for (int i = 0; i < 2000; ++i) {
      if (!p.server->Send(p.server->accepted[0], "x", {{body.data(), body.size()}}).ok()) break;
    }
  });
  std::this_thread::sleep_for(5ms);
  p.client->Release(p.to_server);
  flood.join();
  p.client->CloseEndpoint();
  p.server->CloseEndpoint();
  EXPECT_EQ(p.client->late_callbacks, 0);
  EXPECT_EQ(p.server->late_callbacks, 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformance, ::testing::ValuesIn(Schemes()),
                         [](const ::testing::TestParamInfo<std::string>& param) { return param.param; });

}  // namespace
}  // namespace weft::testing
