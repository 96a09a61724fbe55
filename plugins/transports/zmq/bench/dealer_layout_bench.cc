// Which socket layout the zmq transport should use, measured with raw
// cppzmq on loopback (the result is quoted in endpoint.h):
//
//   per-connection  every logical connection has its own DEALER (and TCP
//                   stream) to the listener's ROUTER
//   shared          all logical connections from one endpoint to one peer
//                   share a single DEALER, told apart by an id frame
//
// Workloads: 4 KiB round trips (each connection sends one message, the
// listener echoes it; repeat), and 64 MiB transfers (each connection sends
// 64 MiB messages zero-copy; the listener acknowledges each).
//
//   build/bin/weft_zmq_layout_bench [connections=1,4] [round_trips=5000] [transfers=4]
#include <zmq.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Echoes 4 KiB messages; answers a big one with a one-byte ack. Keeps the
// routing id and, in the shared layout, the connection id frame.
void Serve(zmq::context_t& context, const std::string& endpoint, bool* ready) {
  zmq::socket_t router(context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::sndhwm, 0);
  router.set(zmq::sockopt::rcvhwm, 0);
  router.bind(endpoint);
  *ready = true;
  for (;;) {
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t frame;
      if (!router.recv(frame)) return;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    if (frames.size() >= 2 && frames[1].to_string() == "stop") return;
    const bool big = frames.back().size() > 65536;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const bool last = i + 1 == frames.size();
      if (last && big) {
        router.send(zmq::str_buffer("a"), zmq::send_flags::none);
      } else {
        router.send(frames[i], last ? zmq::send_flags::none : zmq::send_flags::sndmore);
      }
    }
  }
}

struct Result {
  double round_trip_us;
  double transfer_gbps;
  // A 4 KiB round trip on connection 0 while connection 1 is sending
  // 2 x 64 MiB (head-of-line blocking); 0 with one connection.
  double busy_round_trip_us;
};

Result Run(bool shared, int connections, int round_trips, int transfers, int port) {
  zmq::context_t server_context;
  const std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  bool ready = false;
  std::thread server([&] { Serve(server_context, endpoint, &ready); });
  while (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  zmq::context_t context;
  std::vector<zmq::socket_t> dealers;
  for (int i = 0; i < (shared ? 1 : connections); ++i) {
    dealers.emplace_back(context, zmq::socket_type::dealer);
    dealers.back().set(zmq::sockopt::linger, 0);
    dealers.back().set(zmq::sockopt::sndhwm, 0);
    dealers.back().set(zmq::sockopt::rcvhwm, 0);
    dealers.back().connect(endpoint);
  }
  auto socket_of = [&](int c) -> zmq::socket_t& { return dealers[shared ? 0 : c]; };
  auto send = [&](int c, const void* data, std::size_t size, bool zero_copy) {
    zmq::socket_t& s = socket_of(c);
    if (shared) s.send(zmq::buffer(&c, sizeof c), zmq::send_flags::sndmore);
    s.send(zmq::str_buffer("M"), zmq::send_flags::sndmore);
    if (zero_copy) {
      zmq::message_t m(
          const_cast<void*>(data), size, [](void*, void*) {}, nullptr);
      s.send(m, zmq::send_flags::none);
    } else {
      s.send(zmq::const_buffer(data, size), zmq::send_flags::none);
    }
  };
  auto recv_all = [&](int expected) {
    // Every connection's reply, from whichever socket has it.
    std::vector<zmq_pollitem_t> items;
    for (auto& d : dealers) items.push_back({d.handle(), 0, ZMQ_POLLIN, 0});
    int got = 0;
    while (got < expected) {
      zmq::poll(items);
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (items[i].revents == 0) continue;
        for (;;) {
          zmq::message_t frame;
          if (!dealers[i].recv(frame, zmq::recv_flags::dontwait)) break;
          if (!frame.more()) ++got;
        }
      }
    }
  };

  std::string small(4096, 's');
  // Warm up the connections.
  for (int c = 0; c < connections; ++c) send(c, small.data(), small.size(), false);
  recv_all(connections);

  auto start = Clock::now();
  for (int r = 0; r < round_trips; ++r) {
    for (int c = 0; c < connections; ++c) send(c, small.data(), small.size(), false);
    recv_all(connections);
  }
  const double rtt = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / round_trips;

  std::vector<char> big(64u << 20, 'b');
  start = Clock::now();
  for (int t = 0; t < transfers; ++t) {
    for (int c = 0; c < connections; ++c) send(c, big.data(), big.size(), true);
  }
  recv_all(transfers * connections);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double gbps = static_cast<double>(big.size()) * transfers * connections / seconds / 1e9;

  double busy_rtt = 0;
  if (connections >= 2) {
    constexpr int kBusyTrips = 20;
    send(1, big.data(), big.size(), true);
    send(1, big.data(), big.size(), true);
    // The replies of connection 0 and the two acks of connection 1 come in
    // any order: count them together, timing until connection 0 is done.
    start = Clock::now();
    int acks = 0;
    for (int r = 0; r < kBusyTrips; ++r) {
      send(0, small.data(), small.size(), false);
      std::vector<zmq_pollitem_t> items;
      for (auto& d : dealers) items.push_back({d.handle(), 0, ZMQ_POLLIN, 0});
      bool echoed = false;
      while (!echoed) {
        zmq::poll(items);
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (items[i].revents == 0) continue;
          for (;;) {
            zmq::message_t frame;
            if (!dealers[i].recv(frame, zmq::recv_flags::dontwait)) break;
            if (frame.more()) continue;
            if (frame.size() == 1) {
              ++acks;
            } else {
              echoed = true;
            }
          }
        }
      }
    }
    busy_rtt = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kBusyTrips;
    recv_all(2 - acks);
  }

  {
    zmq::socket_t stopper(context, zmq::socket_type::dealer);
    stopper.set(zmq::sockopt::linger, 1000);
    stopper.connect(endpoint);
    stopper.send(zmq::str_buffer("stop"), zmq::send_flags::none);
    server.join();
  }
  dealers.clear();
  return {rtt, gbps, busy_rtt};
}

}  // namespace

int main(int argc, char** argv) {
  const int round_trips = argc > 2 ? std::atoi(argv[2]) : 5000;
  const int transfers = argc > 3 ? std::atoi(argv[3]) : 4;
  std::vector<int> counts = {1, 4};
  if (argc > 1) counts = {std::atoi(argv[1])};
  int port = 47000 + static_cast<int>(Clock::now().time_since_epoch().count() % 1000);
  for (int connections : counts) {
    for (bool shared : {false, true}) {
      const Result r = Run(shared, connections, round_trips, transfers, port++);
      std::printf(
          "%-15s connections=%d  4KiB round trip (all connections): %7.1f us   64MiB transfers: %5.2f GB/s"
          "   4KiB round trip beside 64MiB: %8.1f us\n",
          shared ? "shared" : "per-connection", connections, r.round_trip_us, r.transfer_gbps, r.busy_round_trip_us);
    }
  }
  return 0;
}
