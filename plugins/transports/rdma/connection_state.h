// The life of one rdma connection, as a table of legal transitions.
//
//   idle --side channel connected--> side channel connected
//        --queue pair info exchanged--> QP info exchanged
//        --QP moved to RTR--> ready to receive (RTR)
//        --QP moved to RTS--> ready to send (RTS)
//        --close requested--> closing --drained--> closed
//
// Setup can fail in any state before RTS, the peer can close the side
// channel, and the queue pair can go to the error state; those lead to
// `error`, from which only the host's close leads on (to `closed`). While
// closing, a peer close or a QP error (flushed work requests) is expected
// and just finishes the close. `closed` is final.
//
// Whether a transition must tell the host (on_closed with a status) is part
// of the table: exactly the transitions into `error` from an established or
// establishing connection that the host did not ask to close.
//
// Not thread-safe; the owning connection serialises its events.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_CONNECTION_STATE_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_CONNECTION_STATE_H_

#include <optional>
#include <span>
#include <string_view>

#include "rdma/result.h"

namespace weft::rdma {

enum class ConnState {
  kIdle,
  kSideChannelConnected,
  kQpInfoExchanged,
  kReadyToReceive,
  kReadyToSend,
  kClosing,
  kClosed,
  kError,
};

enum class ConnEvent {
  kSideChannelConnected,  // the TCP side channel is up
  kQpInfoExchanged,       // both handshake messages were sent and read
  kQpReadyToReceive,      // ibv_modify_qp to RTR succeeded
  kQpReadyToSend,         // ibv_modify_qp to RTS succeeded
  kCloseRequested,        // the host called connection_close (or endpoint_close)
  kDrained,               // every posted work request has completed
  kPeerClosed,            // the side-channel socket reported EOF or hang-up
  kQpError,               // a completion with an error status, or an async QP error event
  kSetupFailed,           // a step of connection setup failed
};

inline constexpr ConnState kAllStates[] = {
    ConnState::kIdle,
    ConnState::kSideChannelConnected,
    ConnState::kQpInfoExchanged,
    ConnState::kReadyToReceive,
    ConnState::kReadyToSend,
    ConnState::kClosing,
    ConnState::kClosed,
    ConnState::kError,
};
inline constexpr ConnEvent kAllEvents[] = {
    ConnEvent::kSideChannelConnected, ConnEvent::kQpInfoExchanged, ConnEvent::kQpReadyToReceive,
    ConnEvent::kQpReadyToSend,        ConnEvent::kCloseRequested,  ConnEvent::kDrained,
    ConnEvent::kPeerClosed,           ConnEvent::kQpError,         ConnEvent::kSetupFailed,
};

// "side channel connected", "RTS", ...
std::string_view StateName(ConnState state);
// "QP moved to RTS", ...
std::string_view EventName(ConnEvent event);

struct Transition {
  ConnState from;
  ConnEvent event;
  ConnState to;
  // Whether the host hears of it through on_closed (with a status).
  bool notifies_host;
};

// Every legal transition, in the order of the state list.
std::span<const Transition> LegalTransitions();

// The transition |event| causes in |state|, or nullopt when it is illegal.
std::optional<Transition> FindTransition(ConnState state, ConnEvent event);

// One connection's current state.
class ConnectionStateMachine {
 public:
  ConnState state() const noexcept { return state_; }

  // Applies |event|. FAILED_PRECONDITION naming the event and the state
  // when it is illegal there; the state is then unchanged.
  Result<Transition> Apply(ConnEvent event);

  // Whether messages may be sent (RTS).
  bool can_send() const noexcept { return state_ == ConnState::kReadyToSend; }
  // Whether the connection is over for good (error or closed).
  bool finished() const noexcept { return state_ == ConnState::kClosed || state_ == ConnState::kError; }

 private:
  ConnState state_ = ConnState::kIdle;
};

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_CONNECTION_STATE_H_
