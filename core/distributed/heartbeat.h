// Failure detection: a process heartbeats the tasks it works with, and a
// task that has not answered for [cluster] heartbeat_timeout_ms is
// declared lost (docs/distributed.md, "Faults").
//
// Every interval the monitor sends each watched task a Heartbeat (one at a
// time per task, each with the timeout as its deadline). A task is "lost"
// once it has answered before and then stays silent past the timeout: a
// process that was killed, hangs (SIGSTOP, a deadlock) or sits behind a cut
// link. The owner hears of it once per loss, with how long the task has
// been silent, and fails what waits on it (RpcNode::FailPeer): a step that
// involves a lost task fails at once instead of at its RPC deadline. A lost
// task that answers again is alive again; one that answers with another
// incarnation was restarted, which the owner also hears of.
//
//   HeartbeatMonitor::Options o;  o.timeout_ms = 3000;
//   auto monitor = std::make_unique<HeartbeatMonitor>(rpc, peers, o, events);
#ifndef WEFT_CORE_DIST_HEARTBEAT_H_
#define WEFT_CORE_DIST_HEARTBEAT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/distributed/rpc.h"

namespace weft::dist {

class HeartbeatMonitor {
 public:
  struct Options {
    int64_t interval_ms = 1000;
    int64_t timeout_ms = 10000;
  };
  struct Events {
    // |peer| has been silent for |silent_ms| (it answered before).
    std::function<void(const Peer& peer, int64_t silent_ms)> lost;
    // |peer| answered with another incarnation than before: restarted.
    std::function<void(const Peer& peer, uint64_t before, uint64_t now)> restarted;
  };
  // What the monitor knows of one task, for `weft cluster status`.
  struct PeerState {
    Peer peer;
    enum class State { kUnknown, kAlive, kLost } state = State::kUnknown;
    uint64_t incarnation = 0;
    // Since its last answer; -1 when it never answered.
    int64_t silent_ms = -1;
    // The round trip of its last answer.
    int64_t round_trip_us = -1;
  };

  // Watches |peers| through |rpc| (which must outlive the monitor) until
  // destroyed. Events run on the monitor's thread, one at a time.
  HeartbeatMonitor(RpcNode* rpc, std::vector<Peer> peers, Options options, Events events);
  ~HeartbeatMonitor();
  HeartbeatMonitor(const HeartbeatMonitor&) = delete;
  HeartbeatMonitor& operator=(const HeartbeatMonitor&) = delete;

  std::vector<PeerState> Snapshot() const;
  const Options& options() const { return options_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Watched {
    PeerState state;
    Clock::time_point last_answer;
    bool in_flight = false;
  };
  // What the heartbeats' answers update: shared with them, since one may
  // arrive after the monitor is gone (it then changes nothing).
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    bool stopping = false;
    int events_running = 0;
    std::vector<Watched> watched;
    Events events;
  };
  void Loop();
  static void OnAnswer(const std::shared_ptr<Shared>& shared, std::size_t index, Clock::time_point sent,
                       const Status& status, uint64_t incarnation);

  RpcNode* rpc_;
  Options options_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::thread thread_;
};

// The error of a call to a task the heartbeats declared lost:
// "task /job:ps/task:1 (tcp://10.0.0.7:7071) has not answered for 3.0 s
// ([cluster] heartbeat_timeout_ms = 3000)".
Status LostPeerStatus(const Peer& peer, int64_t silent_ms, int64_t timeout_ms);
bool IsLostPeer(const Status& status);

// "3.0 s", "250 ms": a duration for people.
std::string FormatSilence(int64_t ms);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_HEARTBEAT_H_
