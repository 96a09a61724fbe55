#include "tests/integration/transport_harness.h"

#include <algorithm>
#include <memory>
#include <set>

#include "core/plugin/host_services.h"

namespace weft::testing {
namespace {

const weft_host_t* Host() { return plugin::HostTable(); }

// Released connections, per harness, to catch callbacks after release.
std::mutex g_released_mu;
std::set<std::pair<const void*, weft_connection_t>> g_released;

bool WasReleased(const void* harness, weft_connection_t c) {
  std::lock_guard<std::mutex> lock(g_released_mu);
  return g_released.count({harness, c}) > 0;
}

struct SendContext {
  virtual ~SendContext() = default;
  std::function<void(CStatus)> done;
};

void OnSendDone(void* user, weft_status_t status) {
  std::unique_ptr<SendContext> context(static_cast<SendContext*>(user));
  CStatus s = TakeStatus(status);
  if (context->done) context->done(s);
}

}  // namespace

CStatus TakeStatus(weft_status_t status) {
  CStatus s;
  if (status == nullptr) return s;
  s.code = Host()->status_code(status);
  s.message = Host()->status_message(status);
  Host()->status_free(status);
  return s;
}

EndpointHarness::EndpointHarness(const weft_transport_plugin_t* transport, const std::string& listen, bool retain)
    : transport_(transport), retain_(retain) {
  callbacks_.struct_size = sizeof callbacks_;
  callbacks_.user = this;
  callbacks_.on_accept = OnAccept;
  callbacks_.on_message = OnMessage;
  callbacks_.on_closed = OnClosed;
  open_status_ =
      TakeStatus(transport_->endpoint_open(listen.empty() ? nullptr : listen.c_str(), &callbacks_, &endpoint_));
}

EndpointHarness::~EndpointHarness() {
  CloseEndpoint();
  std::vector<weft_connection_t> owned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    owned.swap(owned_);
  }
  for (weft_connection_t c : owned) transport_->connection_close(c);
  std::lock_guard<std::mutex> lock(mu_);
  for (Received& r : messages) {
    if (r.token != nullptr) r.release(r.token);
  }
  std::lock_guard<std::mutex> released(g_released_mu);
  for (auto it = g_released.begin(); it != g_released.end();) {
    it = it->first == this ? g_released.erase(it) : std::next(it);
  }
}

std::string EndpointHarness::Address() const {
  char buffer[256];
  CStatus s = TakeStatus(transport_->endpoint_address(endpoint_, buffer, sizeof buffer));
  return s.ok() ? std::string(buffer) : std::string();
}

weft_connection_t EndpointHarness::Connect(const std::string& address, int64_t timeout_ms, CStatus* status) {
  weft_connection_t c = nullptr;
  *status = TakeStatus(transport_->connection_open(endpoint_, address.c_str(), timeout_ms, &c));
  if (status->ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    owned_.push_back(c);
    std::lock_guard<std::mutex> released(g_released_mu);
    g_released.erase({this, c});
  }
  return c;
}

void EndpointHarness::Release(weft_connection_t connection) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    owned_.erase(std::remove(owned_.begin(), owned_.end(), connection), owned_.end());
  }
  transport_->connection_close(connection);
  std::lock_guard<std::mutex> released(g_released_mu);
  g_released.insert({this, connection});
}

void EndpointHarness::CloseEndpoint() {
  if (endpoint_ == nullptr) return;
  transport_->endpoint_close(endpoint_);
  std::lock_guard<std::mutex> lock(mu_);
  endpoint_ = nullptr;
  endpoint_closed_ = true;
}

CStatus EndpointHarness::Send(weft_connection_t connection, const std::string& header,
                              const std::vector<std::pair<const void*, uint64_t>>& slices,
                              std::function<void(CStatus)> done) {
  // The message's memory must outlive the send: keep the header and the
  // slice table in the context until done runs.
  struct Owned : SendContext {
    std::string header;
    std::vector<const void*> data;
    std::vector<uint64_t> sizes;
  };
  auto context = std::make_unique<Owned>();
  // Waiters hear of a finished send too (the endpoint finishes every send
  // before it closes, so |this| is still here).
  context->done = [this, done = std::move(done)](CStatus s) {
    if (done) done(s);
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  };
  context->header = header;
  for (const auto& [p, n] : slices) {
    context->data.push_back(p);
    context->sizes.push_back(n);
  }
  weft_message_t message{};
  message.struct_size = sizeof message;
  message.header = context->header.empty() ? nullptr : context->header.data();
  message.header_size = context->header.size();
  message.slice_data = context->data.empty() ? nullptr : context->data.data();
  message.slice_sizes = context->sizes.empty() ? nullptr : context->sizes.data();
  message.num_slices = context->data.size();
  SendContext* raw = context.release();
  weft_status_t status = transport_->send(connection, &message, OnSendDone, raw);
  if (status != nullptr) {
    delete static_cast<Owned*>(raw);
    return TakeStatus(status);
  }
  return {};
}

bool EndpointHarness::WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, pred);
}

void EndpointHarness::OnAccept(void* user, weft_connection_t connection, const char* peer) {
  auto* self = static_cast<EndpointHarness*>(user);
  {
    std::lock_guard<std::mutex> released(g_released_mu);
    g_released.erase({self, connection});
  }
  std::lock_guard<std::mutex> lock(self->mu_);
  if (self->endpoint_closed_) ++self->late_callbacks;
  self->accepted.push_back(connection);
  self->accepted_peers.emplace_back(peer != nullptr ? peer : "");
  self->owned_.push_back(connection);
  self->cv_.notify_all();
}

void EndpointHarness::OnMessage(void* user, const weft_received_t* message) {
  auto* self = static_cast<EndpointHarness*>(user);
  Received r;
  r.connection = message->connection;
  if (message->header_size > 0) r.header.assign(static_cast<const char*>(message->header), message->header_size);
  r.payload_size = message->payload_size;
  if (self->retain_ && WEFT_STRUCT_HAS(message, weft_received_t, release) && message->retain != nullptr) {
    r.token = message->retain(message);
    r.release = message->release;
    r.payload_ptr = message->payload;
  } else if (message->payload_size > 0) {
    r.payload.assign(static_cast<const char*>(message->payload), message->payload_size);
  }
  const bool late = WasReleased(self, message->connection);
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    if (late || self->endpoint_closed_) ++self->late_callbacks;
    self->messages.push_back(std::move(r));
  }
  if (self->on_message_hook) self->on_message_hook(message);
  self->cv_.notify_all();
}

void EndpointHarness::OnClosed(void* user, weft_connection_t connection, weft_status_t status) {
  auto* self = static_cast<EndpointHarness*>(user);
  CStatus s = TakeStatus(status);
  const bool late = WasReleased(self, connection);
  std::lock_guard<std::mutex> lock(self->mu_);
  if (late || self->endpoint_closed_) ++self->late_callbacks;
  self->closed.emplace_back(connection, s);
  self->cv_.notify_all();
}

}  // namespace weft::testing
