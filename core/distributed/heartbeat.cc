#include "core/distributed/heartbeat.h"

#include <cstdio>

namespace weft::dist {

std::string FormatSilence(int64_t ms) {
  if (ms < 1000) return StrCat(ms, " ms");
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

namespace {
constexpr std::string_view kLostMarker = " has not answered for ";
}  // namespace

Status LostPeerStatus(const Peer& peer, int64_t silent_ms, int64_t timeout_ms) {
  return UnavailableError("task ", peer.name, " (", peer.address, ")", kLostMarker, FormatSilence(silent_ms),
                          " ([cluster] heartbeat_timeout_ms = ", timeout_ms, ")");
}

bool IsLostPeer(const Status& status) {
  return status.code() == Code::kUnavailable && status.message().find(kLostMarker) != std::string_view::npos;
}

HeartbeatMonitor::HeartbeatMonitor(RpcNode* rpc, std::vector<Peer> peers, Options options, Events events)
    : rpc_(rpc), options_(options) {
  options_.interval_ms = std::max<int64_t>(1, options_.interval_ms);
  options_.timeout_ms = std::max<int64_t>(options_.interval_ms, options_.timeout_ms);
  shared_->events = std::move(events);
  for (Peer& p : peers) {
    Watched w;
    w.state.peer = std::move(p);
    shared_->watched.push_back(std::move(w));
  }
  thread_ = std::thread([this] { Loop(); });
}

HeartbeatMonitor::~HeartbeatMonitor() {
  {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    shared_->stopping = true;
    shared_->cv.notify_all();
  }
  thread_.join();
  // An answer may be running an event that reaches the owner: wait for it.
  // Later answers see |stopping| and run none.
  std::unique_lock<std::mutex> lock(shared_->mutex);
  shared_->cv.wait(lock, [this] { return shared_->events_running == 0; });
}

std::vector<HeartbeatMonitor::PeerState> HeartbeatMonitor::Snapshot() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  std::vector<PeerState> out;
  const auto now = Clock::now();
  for (const Watched& w : shared_->watched) {
    PeerState s = w.state;
    if (s.state != PeerState::State::kUnknown) {
      s.silent_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_answer).count();
    }
    out.push_back(std::move(s));
  }
  return out;
}

void HeartbeatMonitor::OnAnswer(const std::shared_ptr<Shared>& shared, std::size_t index, Clock::time_point sent,
                                const Status& status, uint64_t incarnation) {
  std::unique_lock<std::mutex> lock(shared->mutex);
  Watched& w = shared->watched[index];
  w.in_flight = false;
  if (!status.ok()) return;
  const auto now = Clock::now();
  const uint64_t before = w.state.incarnation;
  w.last_answer = now;
  w.state.round_trip_us = std::chrono::duration_cast<std::chrono::microseconds>(now - sent).count();
  w.state.state = PeerState::State::kAlive;
  w.state.incarnation = incarnation;
  if (before == 0 || before == incarnation || !shared->events.restarted || shared->stopping) return;
  const Peer peer = w.state.peer;
  ++shared->events_running;
  lock.unlock();
  shared->events.restarted(peer, before, incarnation);
  lock.lock();
  --shared->events_running;
  shared->cv.notify_all();
}

void HeartbeatMonitor::Loop() {
  std::unique_lock<std::mutex> lock(shared_->mutex);
  while (!shared_->stopping) {
    const auto now = Clock::now();
    std::vector<std::pair<Peer, int64_t>> lost;
    std::vector<std::pair<std::size_t, Peer>> send;
    for (std::size_t i = 0; i < shared_->watched.size(); ++i) {
      Watched& w = shared_->watched[i];
      if (w.state.state == PeerState::State::kAlive) {
        const int64_t silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_answer).count();
        if (silent > options_.timeout_ms) {
          w.state.state = PeerState::State::kLost;
          lost.emplace_back(w.state.peer, silent);
        }
      }
      if (!w.in_flight) {
        w.in_flight = true;
        send.emplace_back(i, w.state.peer);
      }
    }
    lock.unlock();
    // Events from this thread need no count: the destructor joins it.
    for (const auto& [peer, silent] : lost) {
      if (shared_->events.lost) shared_->events.lost(peer, silent);
    }
    for (const auto& [i, peer] : send) {
      Request beat;
      beat.method = Method::kHeartbeat;
      const auto sent = Clock::now();
      rpc_->Call(peer, std::move(beat), options_.timeout_ms, [shared = shared_, i = i, sent](Status s, Response r) {
        OnAnswer(shared, i, sent, s, r.incarnation);
      });
    }
    lock.lock();
    shared_->cv.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [this] { return shared_->stopping; });
  }
}

}  // namespace weft::dist
