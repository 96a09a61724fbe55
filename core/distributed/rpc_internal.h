// What both halves of RpcNode share (internal to core/distributed): a
// channel to a peer, and the messages about peers. rpc.cc connects and
// calls; rpc_serve.cc accepts and serves (docs/distributed-internals.md).
#pragma once

#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/distributed/rpc.h"

namespace weft::dist {

struct RpcNode::Channel {
  Peer peer;
  enum class State { kIdle, kConnecting, kReady };
  State state = State::kIdle;
  std::shared_ptr<Connection> connection;
  // Calls waiting for the connection.
  std::vector<uint64_t> waiting;
  uint64_t peer_incarnation = 0;
  // Requests not yet sent, by call id.
  std::unordered_map<uint64_t, Request> unsent;
  // While authenticating: hears the server's challenge, or why none comes.
  std::shared_ptr<std::promise<std::pair<Status, std::string>>> auth_reply;
  // The connecting thread is in the handshake: it alone decides what a
  // close means (a refusal frame may have arrived just before it).
  bool authenticating = false;
};

namespace rpc_internal {

inline std::string Describe(const Peer& peer) { return StrCat("task ", peer.name, " (", peer.address, ")"); }

// The largest message a peer may send before it said Hello (Hello itself
// is a few hundred bytes).
inline constexpr uint64_t kHelloMaxMessage = 64 << 10;

// What a client hears from a task that turned its connection away
// (BusyFrame): too many connections were in their handshake there.
inline Status BusyStatus(const Peer& peer) {
  return Status(Code::kResourceExhausted,
                StrCat(Describe(peer), " turned the connection away: too many connections are in their handshake ",
                       "there at once (a flood of connections that do not finish it; the task's log names where ",
                       "they come from); try again, or find what opens them"));
}

// What a refusal adds for whoever reads the log.
inline constexpr std::string_view kRefusalHint =
    "; nothing was run. Every task and client of the cluster needs the same [cluster] secret_file";

}  // namespace rpc_internal

}  // namespace weft::dist
