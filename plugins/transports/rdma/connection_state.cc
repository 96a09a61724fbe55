#include "rdma/connection_state.h"

#include <string>

namespace weft::rdma {

namespace {

using S = ConnState;
using E = ConnEvent;

constexpr Transition kTransitions[] = {
    {S::kIdle, E::kSideChannelConnected, S::kSideChannelConnected, false},
    {S::kIdle, E::kSetupFailed, S::kError, false},
    {S::kIdle, E::kCloseRequested, S::kClosed, false},

    {S::kSideChannelConnected, E::kQpInfoExchanged, S::kQpInfoExchanged, false},
    {S::kSideChannelConnected, E::kSetupFailed, S::kError, false},
    {S::kSideChannelConnected, E::kPeerClosed, S::kError, false},
    {S::kSideChannelConnected, E::kCloseRequested, S::kClosing, false},

    {S::kQpInfoExchanged, E::kQpReadyToReceive, S::kReadyToReceive, false},
    {S::kQpInfoExchanged, E::kSetupFailed, S::kError, false},
    {S::kQpInfoExchanged, E::kPeerClosed, S::kError, false},
    {S::kQpInfoExchanged, E::kCloseRequested, S::kClosing, false},

    {S::kReadyToReceive, E::kQpReadyToSend, S::kReadyToSend, false},
    {S::kReadyToReceive, E::kSetupFailed, S::kError, false},
    {S::kReadyToReceive, E::kQpError, S::kError, false},
    {S::kReadyToReceive, E::kPeerClosed, S::kError, false},
    {S::kReadyToReceive, E::kCloseRequested, S::kClosing, false},

    // Only an established connection has been handed to the host, so only
    // its failures are reported through on_closed; a failed setup is
    // reported by connection_open's status (or, for an accepted
    // connection, never reaches the host at all).
    {S::kReadyToSend, E::kQpError, S::kError, true},
    {S::kReadyToSend, E::kPeerClosed, S::kError, true},
    {S::kReadyToSend, E::kCloseRequested, S::kClosing, false},

    {S::kClosing, E::kDrained, S::kClosed, false},
    {S::kClosing, E::kPeerClosed, S::kClosed, false},
    {S::kClosing, E::kQpError, S::kClosed, false},

    {S::kError, E::kCloseRequested, S::kClosed, false},
};

}  // namespace

std::string_view StateName(ConnState state) {
  switch (state) {
    case S::kIdle: return "idle";
    case S::kSideChannelConnected: return "side channel connected";
    case S::kQpInfoExchanged: return "QP info exchanged";
    case S::kReadyToReceive: return "RTR";
    case S::kReadyToSend: return "RTS";
    case S::kClosing: return "closing";
    case S::kClosed: return "closed";
    case S::kError: return "error";
  }
  return "unknown";
}

std::string_view EventName(ConnEvent event) {
  switch (event) {
    case E::kSideChannelConnected: return "side channel connected";
    case E::kQpInfoExchanged: return "QP info exchanged";
    case E::kQpReadyToReceive: return "QP moved to RTR";
    case E::kQpReadyToSend: return "QP moved to RTS";
    case E::kCloseRequested: return "close requested";
    case E::kDrained: return "work requests drained";
    case E::kPeerClosed: return "side channel closed by the peer";
    case E::kQpError: return "QP error";
    case E::kSetupFailed: return "setup failed";
  }
  return "unknown";
}

std::span<const Transition> LegalTransitions() { return kTransitions; }

std::optional<Transition> FindTransition(ConnState state, ConnEvent event) {
  for (const Transition& t : kTransitions) {
    if (t.from == state && t.event == event) return t;
  }
  return std::nullopt;
}

Result<Transition> ConnectionStateMachine::Apply(ConnEvent event) {
  std::optional<Transition> t = FindTransition(state_, event);
  if (!t) {
    return Fail(WEFT_FAILED_PRECONDITION, "rdma connection: event '" + std::string(EventName(event)) +
                                              "' is not legal in state '" + std::string(StateName(state_)) + "'");
  }
  state_ = t->to;
  return *t;
}

}  // namespace weft::rdma
