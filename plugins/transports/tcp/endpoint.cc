// An endpoint: its I/O thread, listening and accepting, endpoint_open,
// endpoint_close and endpoint_address; and connection_open, which connects
// from the caller's thread and hands the connection to the endpoint.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "address.h"
#include "tcp_internal.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/log.h"

namespace weft::transports::tcp {
namespace {

EndpointState* StateOf(weft_endpoint_t endpoint) { return endpoint->state.get(); }

void StartAccept(const std::shared_ptr<EndpointState>& ep) {
  if (!ep->acceptor || ep->closing) return;
  ep->acceptor->async_accept(
      [weak = std::weak_ptr<EndpointState>(ep)](const boost::system::error_code& ec, tcp::socket socket) {
        auto state = weak.lock();
        if (!state || state->closing) return;
        if (!ec) {
          boost::system::error_code peer_ec;
          const tcp::endpoint remote = socket.remote_endpoint(peer_ec);
          const std::string peer = peer_ec ? std::string("an unknown peer") : FormatEndpoint(remote);
          auto conn = std::make_shared<Conn>(state, peer);
          conn->socket = std::move(socket);
          conn->Configure();
          state->conns.insert(conn);
          if (state->tls) {
            AcceptTls(state, conn);
          } else {
            Admit(state, conn);
          }
        } else if (ec == asio::error::operation_aborted) {
          return;
        } else {
          WEFT_SDK_LOG(WARNING) << "accept failed: " << ec.message();
          if (ec == asio::error::no_descriptors) {
            // Out of file descriptors: pause instead of spinning.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }
        StartAccept(state);
      });
}

void CheckCallbacks(const weft_transport_callbacks_t* callbacks, bool listening) {
  if (callbacks == nullptr || callbacks->struct_size < WEFT_TRANSPORT_CALLBACKS_SIZE_V1_0) {
    Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: callbacks missing or smaller than ABI 1.0");
  }
  if (callbacks->on_message == nullptr || callbacks->on_closed == nullptr) {
    Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: on_message and on_closed are required");
  }
  if (listening && callbacks->on_accept == nullptr) {
    Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: a listening endpoint needs on_accept");
  }
}

}  // namespace

weft_status_t Entry::EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                                  weft_endpoint_t* out_endpoint) {
  return sdk::Guard([&] {
    if (out_endpoint == nullptr) Fail(WEFT_INVALID_ARGUMENT, "endpoint_open: out_endpoint is null");
    *out_endpoint = nullptr;
    CheckCallbacks(callbacks, listen_address != nullptr);
    auto state = std::make_shared<EndpointState>();
    state->tls = CurrentTls();
    std::memcpy(&state->callbacks, callbacks, std::min(sizeof(weft_transport_callbacks_t), callbacks->struct_size));
    state->callbacks.struct_size = sizeof(weft_transport_callbacks_t);
    if (listen_address != nullptr) {
      const HostPort hp = ParseAddress(listen_address, /*allow_port_zero=*/true);
      boost::system::error_code ec;
      tcp::resolver resolver(state->io);
      auto results = resolver.resolve(hp.host, hp.port, tcp::resolver::passive | tcp::resolver::numeric_service, ec);
      if (ec || results.empty()) {
        Fail(WEFT_INVALID_ARGUMENT, "cannot listen on '" + std::string(listen_address) + "': host '" + hp.host +
                                        "' does not resolve (" + ec.message() + ")");
      }
      const tcp::endpoint where = results.begin()->endpoint();
      tcp::acceptor acceptor(state->io);
      acceptor.open(where.protocol(), ec);
      if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
      if (!ec) acceptor.bind(where, ec);
      if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        std::string message = "cannot listen on " + FormatEndpoint(where) + ": " + ec.message();
        if (ec == asio::error::address_in_use) {
          message +=
              " (another process, perhaps a task of another cluster, listens there; "
              "choose another port)";
        }
        Fail(ec == asio::error::address_in_use ? WEFT_ALREADY_EXISTS : WEFT_UNAVAILABLE, message);
      }
      state->acceptor.emplace(std::move(acceptor));
    }
    state->work.emplace(state->io.get_executor());
    std::promise<void> started;
    auto started_future = started.get_future();
    state->thread = std::thread([raw = state.get(), &started] {
      raw->io_thread_id = std::this_thread::get_id();
      started.set_value();
      for (;;) {
        try {
          raw->io.run();
          break;
        } catch (const std::exception& e) {
          // A callback threw through the guard-free path: log and go on.
          WEFT_SDK_LOG(ERROR) << "tcp transport I/O thread: " << e.what();
        }
      }
    });
    started_future.wait();
    asio::post(state->io, [state] { StartAccept(state); });
    *out_endpoint = new weft_endpoint_s{std::move(state)};
  });
}

void Entry::EndpointClose(weft_endpoint_t endpoint) {
  sdk::GuardVoid("tcp endpoint_close", [&] {
    if (endpoint == nullptr) return;
    std::shared_ptr<EndpointState> state = endpoint->state;
    state->RunAndWait([&] {
      state->closing = true;
      boost::system::error_code ignored;
      if (state->acceptor) state->acceptor->close(ignored);
      std::set<std::shared_ptr<Conn>> conns;
      conns.swap(state->conns);
      for (const auto& conn : conns) conn->Close(nullptr, /*notify=*/false);
      state->work.reset();
      state->io.stop();
    });
    if (state->OnIoThread()) {
      // Closed from one of its own callbacks: the thread ends when the
      // callback returns.
      state->thread.detach();
    } else {
      if (state->thread.joinable()) state->thread.join();
      // Handlers still queued hold their connections, and through them
      // this state: run them out here (their sockets are closed, so they
      // only end, and a send posted before the close finishes with an
      // error), before endpoint_close returns.
      state->io.restart();
      state->io.poll();
    }
    {
      std::lock_guard<std::mutex> lock(state->post_mu);
      state->stopped = true;
    }
    if (!state->OnIoThread()) {
      // Sends posted between the run above and |stopped|.
      state->io.restart();
      state->io.poll();
    }
    delete endpoint;
  });
}

weft_status_t Entry::EndpointAddress(weft_endpoint_t endpoint, char* buffer, size_t size) {
  return sdk::Guard([&] {
    if (endpoint == nullptr || buffer == nullptr) Fail(WEFT_INVALID_ARGUMENT, "endpoint_address: null argument");
    EndpointState* state = StateOf(endpoint);
    if (!state->acceptor) Fail(WEFT_FAILED_PRECONDITION, "the endpoint does not listen (opened with no address)");
    boost::system::error_code ec;
    const std::string address = FormatEndpoint(state->acceptor->local_endpoint(ec));
    if (ec) Fail(WEFT_UNAVAILABLE, "cannot read the listening address: " + ec.message());
    if (address.size() + 1 > size) {
      Fail(WEFT_RESOURCE_EXHAUSTED, "the address '" + address + "' needs " + std::to_string(address.size() + 1) +
                                        " bytes, the buffer has " + std::to_string(size));
    }
    std::memcpy(buffer, address.c_str(), address.size() + 1);
  });
}

// Connects on a private io_context in the caller's thread (so it works
// from a callback too), then hands the socket to the endpoint's thread.
weft_status_t Entry::ConnectionOpen(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                                    weft_connection_t* out_connection) {
  return sdk::Guard([&] {
    if (endpoint == nullptr || address == nullptr || out_connection == nullptr) {
      Fail(WEFT_INVALID_ARGUMENT, "connection_open: null argument");
    }
    *out_connection = nullptr;
    const HostPort hp = ParseAddress(address, /*allow_port_zero=*/false);
    std::shared_ptr<EndpointState> state = endpoint->state;
    if (state->closing) Fail(WEFT_FAILED_PRECONDITION, "connection_open on a closed endpoint");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));

    asio::io_context io(1);
    tcp::resolver resolver(io);
    tcp::socket socket(io);
    boost::system::error_code result = asio::error::would_block;
    bool resolved = false;
    resolver.async_resolve(hp.host, hp.port, tcp::resolver::numeric_service,
                           [&](const boost::system::error_code& ec, tcp::resolver::results_type results) {
                             if (ec) {
                               result = ec;
                               return;
                             }
                             resolved = true;
                             asio::async_connect(
                                 socket, results,
                                 [&](const boost::system::error_code& cec, const tcp::endpoint&) { result = cec; });
                           });
    io.run_until(deadline);
    if (result == asio::error::would_block) {
      const std::string phase = resolved ? "connecting to" : "resolving";
      Fail(WEFT_DEADLINE_EXCEEDED, "timed out after " + std::to_string(timeout_ms) + " ms " + phase + " " +
                                       std::string(address) + " (is the task up, and the address right?)");
    }
    if (result) {
      if (!resolved) {
        Fail(WEFT_UNAVAILABLE,
             "cannot resolve host '" + hp.host + "' of " + std::string(address) + ": " + result.message());
      }
      Fail(WEFT_UNAVAILABLE, "cannot connect to " + std::string(address) + ": " + result.message() +
                                 (result == asio::error::connection_refused ? " (nothing listens there yet?)" : ""));
    }
    boost::system::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    const auto protocol = remote.protocol();
    const int fd = socket.release(ec);
    if (ec) Fail(WEFT_INTERNAL, "cannot take the connected socket: " + ec.message());
    auto conn = std::make_shared<Conn>(state, std::string(address));
    conn->socket.assign(protocol, fd, ec);
    if (ec) {
      ::close(fd);
      Fail(WEFT_INTERNAL, "cannot adopt the connected socket: " + ec.message());
    }
    conn->Configure();
    if (state->tls) {
      // However little of the caller's time is left, the handshake gets a
      // second: a connection attempt cut short mid-handshake helps nobody.
      const auto tls_deadline = std::max(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      ConnectTls(state, conn, address, tls_deadline,
                 std::chrono::duration_cast<std::chrono::milliseconds>(tls_deadline - std::chrono::steady_clock::now())
                     .count());
    }
    auto* handle = new weft_connection_s{conn};
    conn->handle = handle;
    bool registered = false;
    state->RunAndWait([&] {
      if (state->closing) return;
      state->conns.insert(conn);
      conn->StartRead();
      registered = true;
    });
    if (!registered) {
      conn->handle = nullptr;
      delete handle;
      Fail(WEFT_FAILED_PRECONDITION, "the endpoint was closed while connecting to " + std::string(address));
    }
    *out_connection = handle;
  });
}

}  // namespace weft::transports::tcp
