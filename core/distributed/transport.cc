#include "core/distributed/transport.h"

#include <atomic>
#include <cstring>

#include "core/plugin/host_services.h"

namespace weft::dist {
namespace {

// What a send keeps alive until its done callback.
struct SendContext {
  std::string header;
  std::vector<const void*> data;
  std::vector<uint64_t> sizes;
  std::shared_ptr<const void> keepalive;
  std::function<void(Status)> done;
};

void OnSendDone(void* user, weft_status_t status) {
  std::unique_ptr<SendContext> context(static_cast<SendContext*>(user));
  Status s = plugin::TakeStatus(status);
  if (context->done) context->done(s);
}

}  // namespace

ReceivedMessage ReceivedMessage::Keep(const weft_received_t* message) {
  ReceivedMessage out;
  const bool can_retain =
      WEFT_STRUCT_HAS(message, weft_received_t, release) && message->retain != nullptr && message->release != nullptr;
  if (can_retain) {
    void* token = message->retain(message);
    auto release = message->release;
    out.owner_ = std::shared_ptr<void>(token, [release](void* t) { release(t); });
    out.header_ = message->header;
    out.header_size_ = message->header_size;
    out.payload_ = message->payload;
    out.payload_size_ = message->payload_size;
    return out;
  }
  // No retain: copy into one 64-byte aligned block (a tensor may live in
  // the payload), header after it.
  const uint64_t payload_padded = (message->payload_size + 63) & ~uint64_t{63};
  void* block =
      std::aligned_alloc(64, std::max<uint64_t>(64, payload_padded + ((message->header_size + 63) & ~uint64_t{63})));
  if (block == nullptr) return out;
  auto* bytes = static_cast<char*>(block);
  if (message->payload_size > 0) std::memcpy(bytes, message->payload, message->payload_size);
  if (message->header_size > 0) std::memcpy(bytes + payload_padded, message->header, message->header_size);
  out.owner_ = std::shared_ptr<void>(block, [](void* p) { std::free(p); });
  out.payload_ = message->payload_size > 0 ? bytes : nullptr;
  out.payload_size_ = message->payload_size;
  out.header_ = message->header_size > 0 ? bytes + payload_padded : nullptr;
  out.header_size_ = message->header_size;
  return out;
}

Connection::~Connection() { Close(); }

namespace {
std::atomic<uint64_t> g_sent_bytes{0}, g_sent_messages{0}, g_received_bytes{0}, g_received_messages{0};
}  // namespace

WireCounters ReadWireCounters() {
  WireCounters c;
  c.sent_bytes = g_sent_bytes.load(std::memory_order_relaxed);
  c.sent_messages = g_sent_messages.load(std::memory_order_relaxed);
  c.received_bytes = g_received_bytes.load(std::memory_order_relaxed);
  c.received_messages = g_received_messages.load(std::memory_order_relaxed);
  return c;
}

Status Connection::Send(std::string header, const std::vector<Slice>& slices, std::shared_ptr<const void> keepalive,
                        std::function<void(Status)> done) {
  auto context = std::make_unique<SendContext>();
  context->header = std::move(header);
  for (const Slice& s : slices) {
    if (s.size == 0) continue;
    context->data.push_back(s.data);
    context->sizes.push_back(s.size);
  }
  context->keepalive = std::move(keepalive);
  context->done = std::move(done);
  weft_message_t message{};
  message.struct_size = sizeof message;
  message.header = context->header.empty() ? nullptr : context->header.data();
  message.header_size = context->header.size();
  message.slice_data = context->data.empty() ? nullptr : context->data.data();
  message.slice_sizes = context->sizes.empty() ? nullptr : context->sizes.data();
  message.num_slices = context->data.size();
  weft_connection_t handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = handle_;
  }
  if (handle == nullptr) return UnavailableError("the connection to ", peer_, " is closed");
  uint64_t bytes = context->header.size();
  for (uint64_t size : context->sizes) bytes += size;
  SendContext* raw = context.release();
  Status sent = plugin::TakeStatus(table_->send(handle, &message, OnSendDone, raw));
  if (!sent.ok()) {
    delete raw;
    return sent;
  }
  if (!self()) {
    g_sent_bytes.fetch_add(bytes, std::memory_order_relaxed);
    g_sent_messages.fetch_add(1, std::memory_order_relaxed);
  }
  return sent;
}

void Connection::Close() {
  weft_connection_t handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = handle_;
    handle_ = nullptr;
  }
  if (handle == nullptr) return;
  // Forget first: a callback racing with the close finds no connection.
  {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    registry_->by_handle.erase(handle);
  }
  table_->connection_close(handle);
}

bool Connection::SetMaxMessage(uint64_t max_bytes) {
  if (table_->struct_size < WEFT_TRANSPORT_PLUGIN_SIZE_V1_3 || table_->connection_set_max_message == nullptr) {
    return false;
  }
  weft_connection_t handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = handle_;
  }
  if (handle == nullptr) return false;
  return plugin::TakeStatus(table_->connection_set_max_message(handle, max_bytes)).ok();
}

bool Connection::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return handle_ == nullptr || peer_closed_;
}

Expected<std::unique_ptr<Endpoint>> Endpoint::Open(const weft_transport_plugin_t* transport,
                                                   const std::string& listen_address, Handlers handlers) {
  std::unique_ptr<Endpoint> endpoint(new Endpoint(transport, std::move(handlers)));
  weft_transport_callbacks_t& cb = endpoint->callbacks_;
  cb.struct_size = sizeof cb;
  cb.user = endpoint.get();
  cb.on_accept = OnAccept;
  cb.on_message = OnMessage;
  cb.on_closed = OnClosed;
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(
      transport->endpoint_open(listen_address.empty() ? nullptr : listen_address.c_str(), &cb, &endpoint->endpoint_)));
  return endpoint;
}

Endpoint::~Endpoint() {
  // Connections still held elsewhere release their handles later, which
  // the ABI allows after endpoint_close.
  if (endpoint_ != nullptr) table_->endpoint_close(endpoint_);
}

Expected<std::string> Endpoint::Address() const {
  char buffer[512];
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(table_->endpoint_address(endpoint_, buffer, sizeof buffer)));
  return std::string(buffer);
}

Expected<std::shared_ptr<Connection>> Endpoint::Connect(const std::string& address, int64_t timeout_ms) {
  weft_connection_t handle = nullptr;
  WEFT_RETURN_IF_ERROR(plugin::TakeStatus(table_->connection_open(endpoint_, address.c_str(), timeout_ms, &handle)));
  return Adopt(handle, address);
}

std::shared_ptr<Connection> Endpoint::Adopt(weft_connection_t handle, std::string peer) {
  std::shared_ptr<Connection> c(new Connection(registry_, table_, handle, std::move(peer)));
  std::lock_guard<std::mutex> lock(registry_->mutex);
  registry_->by_handle[handle] = c;
  return c;
}

std::shared_ptr<Connection> Endpoint::Lookup(weft_connection_t handle) {
  std::lock_guard<std::mutex> lock(registry_->mutex);
  auto it = registry_->by_handle.find(handle);
  return it == registry_->by_handle.end() ? nullptr : it->second.lock();
}

void Endpoint::OnAccept(void* user, weft_connection_t connection, const char* peer) {
  auto* self = static_cast<Endpoint*>(user);
  std::shared_ptr<Connection> c = self->Adopt(connection, peer != nullptr ? peer : "");
  if (self->handlers_.on_accept) self->handlers_.on_accept(c);
}

void Endpoint::OnMessage(void* user, const weft_received_t* message) {
  auto* self = static_cast<Endpoint*>(user);
  std::shared_ptr<Connection> c = self->Lookup(message->connection);
  if (c == nullptr || !c->self()) {
    g_received_bytes.fetch_add(message->header_size + message->payload_size, std::memory_order_relaxed);
    g_received_messages.fetch_add(1, std::memory_order_relaxed);
  }
  if (c == nullptr || !self->handlers_.on_message) return;
  self->handlers_.on_message(c, ReceivedMessage::Keep(message));
}

void Endpoint::OnClosed(void* user, weft_connection_t connection, weft_status_t status) {
  auto* self = static_cast<Endpoint*>(user);
  Status s = plugin::TakeStatus(status);
  std::shared_ptr<Connection> c = self->Lookup(connection);
  if (c == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(c->mutex_);
    c->peer_closed_ = true;
  }
  if (self->handlers_.on_closed) self->handlers_.on_closed(c, s);
}

}  // namespace weft::dist
