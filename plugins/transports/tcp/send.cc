// What the host does with a connection from any thread: send (written at
// once when the connection is idle, else queued for the I/O thread); connection_set_max_message; connection_close.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tcp_internal.h"
#include "weft/sdk/guard.h"

namespace weft::transports::tcp {

weft_status_t Entry::ConnectionSetMaxMessage(weft_connection_t connection, uint64_t max_bytes) {
  return sdk::Guard([&] {
    if (connection == nullptr) Fail(WEFT_INVALID_ARGUMENT, "connection_set_max_message: connection is NULL");
    // Read by the I/O thread at the next preamble; on_accept runs before
    // the first read, so a limit set there covers the first message.
    connection->conn->max_message.store(max_bytes, std::memory_order_relaxed);
  });
}

void Entry::ConnectionClose(weft_connection_t connection) {
  sdk::GuardVoid("tcp connection_close", [&] {
    if (connection == nullptr) return;
    std::shared_ptr<Conn> conn = connection->conn;
    conn->dead = true;
    conn->ep->RunAndWait([&] {
      conn->handle = nullptr;
      conn->Close(nullptr, /*notify=*/false);
    });
    delete connection;
  });
}

weft_status_t Entry::Send(weft_connection_t connection, const weft_message_t* message, weft_done_fn done, void* user) {
  return sdk::Guard([&] {
    if (connection == nullptr || message == nullptr || done == nullptr) {
      Fail(WEFT_INVALID_ARGUMENT, "send: null argument");
    }
    if (message->struct_size < WEFT_MESSAGE_SIZE_V1_0) {
      Fail(WEFT_INVALID_ARGUMENT, "send: weft_message_t is smaller than ABI 1.0");
    }
    std::shared_ptr<Conn> conn = connection->conn;
    if (conn->dead.load()) Fail(WEFT_UNAVAILABLE, "connection to " + conn->peer + " is closed");
    if (message->header_size > 0 && message->header == nullptr) Fail(WEFT_INVALID_ARGUMENT, "send: header is null");
    if (message->num_slices > 0 && (message->slice_data == nullptr || message->slice_sizes == nullptr)) {
      Fail(WEFT_INVALID_ARGUMENT, "send: slices are null");
    }
    uint64_t payload = 0;
    const uint64_t limit = g_options.max_message_bytes.load(std::memory_order_relaxed);
    for (size_t i = 0; i < message->num_slices; ++i) {
      const uint64_t n = message->slice_sizes[i];
      if (n > 0 && message->slice_data[i] == nullptr) {
        Fail(WEFT_INVALID_ARGUMENT, "send: slice " + std::to_string(i) + " is null");
      }
      if (n > limit - payload) {
        Fail(WEFT_INVALID_ARGUMENT, "send: the payload exceeds the limit of " + std::to_string(limit) +
                                        " bytes ([transports.tcp] max_message_mb)");
      }
      payload += n;
    }
    if (message->header_size > limit - payload || message->header_size > UINT32_MAX) {
      Fail(WEFT_INVALID_ARGUMENT,
           "send: the header of " + std::to_string(message->header_size) + " bytes makes the message exceed the limit");
    }
    auto op = std::make_unique<SendOp>();
    EncodePreamble(static_cast<uint32_t>(message->header_size), payload, op->preamble);
    op->buffers.reserve(2 + message->num_slices);
    op->buffers.emplace_back(op->preamble, kPreambleSize);
    if (message->header_size > 0) op->buffers.emplace_back(message->header, message->header_size);
    for (size_t i = 0; i < message->num_slices; ++i) {
      if (message->slice_sizes[i] > 0) op->buffers.emplace_back(message->slice_data[i], message->slice_sizes[i]);
    }
    op->done = done;
    op->user = user;
    conn->Submit(std::move(op));
  });
}

}  // namespace weft::transports::tcp
