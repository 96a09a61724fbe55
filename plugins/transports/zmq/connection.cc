// connection_close and send: what the host does with a connection handle
// from its own threads, handed to the endpoint's loop as commands.
#include "endpoint.h"
#include "sockets.h"
#include "weft/sdk/log.h"
#include "weft/sdk/status.h"
#include "wire.h"

namespace weft::zmq_transport {

void CloseConnection(ConnectionHandle* handle) {
  std::shared_ptr<Connection> connection = handle->connection;
  EndpointCore& core = *connection->core;
  if (core.OnLoopThread()) {
    // From a callback: the loop is here, so close at once. The sockets go
    // at the next iteration and the dones run as ZeroMQ releases frames.
    if (core.endpoint != nullptr) core.endpoint->CloseOnLoop(connection);
    delete handle;
    return;
  }
  auto closed = std::make_shared<Latch>();
  Command command{Command::Type::kClose, connection, {}, nullptr, closed};
  if (core.Post(command)) {
    closed->Wait();
    if (!connection->tracker->WaitIdle(kDoneWait)) {
      WEFT_SDK_LOG(WARNING) << "zmq transport: closing the connection to " << connection->peer
                            << ": sends still unfinished after " << kDoneWait.count()
                            << " ms; their done runs when ZeroMQ releases them";
    }
  } else {
    // The endpoint is closing: once its loop is gone, every callback and
    // every done of this connection has run.
    core.WaitLoopFinished();
  }
  delete handle;
}

weft_status_t SendMessage(ConnectionHandle* handle, const weft_message_t* message, weft_done_fn done, void* user) {
  const std::shared_ptr<Connection>& connection = handle->connection;
  if (message == nullptr || message->struct_size < WEFT_MESSAGE_SIZE_V1_0) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: send to " + connection->peer +
                                                ": the message is NULL or smaller than weft_message_t of ABI 1.0");
  }
  if (message->header == nullptr && message->header_size != 0) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: send to " + connection->peer +
                                                ": the header is NULL but its size is " +
                                                std::to_string(message->header_size));
  }
  if (message->num_slices != 0 && (message->slice_data == nullptr || message->slice_sizes == nullptr)) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: send to " + connection->peer + ": " +
                                                std::to_string(message->num_slices) +
                                                " slices but slice_data or slice_sizes is NULL");
  }
  const auto limit = static_cast<uint64_t>(connection->core->settings.max_message_bytes);
  uint64_t total = message->header_size;
  for (std::size_t i = 0; i < message->num_slices; ++i) {
    const uint64_t size = message->slice_sizes[i];
    if (message->slice_data[i] == nullptr && size != 0) {
      throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: send to " + connection->peer + ": slice " +
                                                  std::to_string(i) + " is NULL but its size is " +
                                                  std::to_string(size));
    }
    total += size;
    if (size > limit || total > limit) {
      throw sdk::Error(WEFT_INVALID_ARGUMENT,
                       "zmq transport: send to " + connection->peer + ": the message is larger than " +
                           "transports.zmq.max_message_mb allows (" + std::to_string(limit >> 20) + " MiB)");
    }
  }
  if (!connection->open.load()) {
    throw sdk::Error(WEFT_UNAVAILABLE, "zmq transport: send to " + connection->peer + ": the connection is closed");
  }
  if (message->num_slices > wire::kMaxPayloadFrames) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: send to " + connection->peer + ": " +
                                                std::to_string(message->num_slices) + " slices, more than the " +
                                                std::to_string(wire::kMaxPayloadFrames) + " a message may have");
  }

  auto* state = new SendState(connection->tracker, connection->core, done, user);
  Command command{Command::Type::kSend, connection, {}, state, nullptr};
  try {
    command.frames.reserve(message->num_slices + 2);
    command.frames.emplace_back(&wire::kMessage, 1);
    auto add = [&](const void* data, uint64_t size) {
      if (size == 0) {
        command.frames.emplace_back();
        return;
      }
      state->AddFrameRef();
      try {
        command.frames.emplace_back(const_cast<void*>(data), size, &SendState::FreeFrame, state);
      } catch (...) {
        state->Unref();
        throw;
      }
    };
    add(message->header, message->header_size);
    for (std::size_t i = 0; i < message->num_slices; ++i) {
      if (message->slice_sizes[i] != 0) add(message->slice_data[i], message->slice_sizes[i]);
    }
  } catch (...) {
    state->Suppress();
    command.frames.clear();
    state->Unref();
    throw;
  }
  EndpointCore& core = *connection->core;
  if (core.OnLoopThread() && core.endpoint != nullptr && core.endpoint->SendNowOnLoop(command)) {
    state->Unref();
    return nullptr;
  }
  if (!core.Post(command)) {
    state->Suppress();
    command.frames.clear();
    state->Unref();
    throw sdk::Error(WEFT_UNAVAILABLE, "zmq transport: send to " + connection->peer + ": the endpoint is closed");
  }
  state->Unref();
  return nullptr;
}

}  // namespace weft::zmq_transport
