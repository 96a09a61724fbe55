// The transports' benchmarks (weft_dist_bench):
//
//   tensor_send_64m  GB/s of a 64 MiB tensor sent from one process to
//                    another over loopback through each transport (the
//                    receiver answers with a 1-byte acknowledgement), vs a
//                    raw TCP socket pair doing the same with plain
//                    send/recv: the physical limit here
//   tensor_send_64m_tls  the same with TLS on the tcp transport
//                    ([transports.tcp] tls = true, a CA made for the run)
//   tensor_send_4k   microseconds per round trip of a 4 KiB tensor (sent,
//                    echoed back) through each transport vs the raw socket
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/distributed/transport.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/dist_bench.h"
#include "tools/bench/dist_bench_util.h"

namespace weft::bench {
namespace {

// Seconds per exchange (send |size| bytes, wait for the answer), median of
// |repeats| rounds of |per_round| exchanges, through the raw socket.
double RawExchange(uint64_t size, int64_t ack, int repeats, int per_round) {
  Peer peer = StartPeer({"", size, ack});
  const int fd = ConnectTo(peer.port);
  std::vector<char> data(size, 'x'), back(ack < 0 ? size : static_cast<size_t>(ack));
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < per_round; ++i) {
      SendAll(fd, data.data(), size);
      RecvAll(fd, back.data(), back.size());
    }
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / per_round);
  }
  close(fd);
  StopPeer(peer);
  return Median(times);
}

// The same through a transport plugin (the core's Endpoint over its C table).
double TransportExchange(const std::string& scheme, uint64_t size, int64_t ack, int repeats, int per_round) {
  Peer peer = StartPeer({scheme, size, ack});
  const plugin::TransportPlugin* transport = Plugins().transports().Find(scheme);
  std::mutex mutex;
  std::condition_variable cv;
  int64_t answers = 0;
  dist::Endpoint::Handlers handlers;
  handlers.on_message = [&](const std::shared_ptr<dist::Connection>&, dist::ReceivedMessage) {
    std::lock_guard<std::mutex> lock(mutex);
    ++answers;
    cv.notify_all();
  };
  handlers.on_closed = [](const std::shared_ptr<dist::Connection>&, const Status& s) {
    if (!s.ok()) Die("connection closed: " + std::string(s.message()));
  };
  auto endpoint = dist::Endpoint::Open(transport->table, "", handlers);
  Check(endpoint.status());
  auto connection = (*endpoint)->Connect(peer.address, 10000);
  Check(connection.status());
  auto data = std::make_shared<std::vector<char>>(size, 'x');
  std::vector<double> times;
  int64_t expected = 0;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < per_round; ++i) {
      Check((*connection)->Send("", {{data->data(), size}}, data));
      ++expected;
      std::unique_lock<std::mutex> lock(mutex);
      if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return answers >= expected; })) Die("no answer");
    }
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / per_round);
  }
  (*connection)->Close();
  endpoint->reset();
  StopPeer(peer);
  return Median(times);
}

std::vector<std::string> Transports() {
  std::vector<std::string> out;
  for (const char* scheme : {"tcp", "zmq"}) {
    if (Plugins().transports().Find(scheme) != nullptr) out.push_back(scheme);
  }
  return out;
}

}  // namespace

void TensorSend64M() {
  const uint64_t size = uint64_t{64} << 20;
  const int repeats = g_repeats > 0 ? g_repeats : 9;
  for (const std::string& scheme : Transports()) {
    if (g_security == Security::kTls && scheme != "tcp") continue;  // TLS is the tcp transport's
    // Alternate, so that both see the same machine.
    std::vector<double> weft, raw;
    for (int i = 0; i < 3; ++i) {
      weft.push_back(TransportExchange(scheme, size, 1, repeats, 4));
      raw.push_back(RawExchange(size, 1, repeats, 4));
    }
    const double gb = static_cast<double>(size) / 1e9;
    Bench("tensor_send_64m_" + scheme + SecuritySuffix(), gb / Median(weft), gb / Median(raw), "GB/s", true);
  }
}

void TensorSend4K() {
  const int repeats = g_repeats > 0 ? g_repeats : 9;
  for (const std::string& scheme : Transports()) {
    std::vector<double> weft, raw;
    for (int i = 0; i < 3; ++i) {
      weft.push_back(TransportExchange(scheme, 4096, -1, repeats, 2000));
      raw.push_back(RawExchange(4096, -1, repeats, 2000));
    }
    Bench("tensor_send_4k_" + scheme, Median(weft) * 1e6, Median(raw) * 1e6, "us", false);
  }
}

}  // namespace weft::bench
