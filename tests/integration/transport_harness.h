// Test harness over a transport plugin's C table: an endpoint whose
// callbacks record what happened, and waits with deadlines. Used by the
// transport conformance suite and its peer process.
#ifndef WEFT_TESTS_INTEGRATION_TRANSPORT_HARNESS_H_
#define WEFT_TESTS_INTEGRATION_TRANSPORT_HARNESS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "weft/weft_plugin.h"

namespace weft::testing {

// A status from the C ABI, owned: code and message, or OK.
struct CStatus {
  weft_code_t code = WEFT_OK;
  std::string message;
  bool ok() const { return code == WEFT_OK; }
};
// Takes ownership of |status| (frees it).
CStatus TakeStatus(weft_status_t status);

struct Received {
  weft_connection_t connection;
  std::string header;
  std::string payload;  // copied, unless kept by a retain token
  const void* payload_ptr = nullptr;
  uint64_t payload_size = 0;
  void* token = nullptr;  // when the harness retained it
  void (*release)(void*) = nullptr;
};

class EndpointHarness {
 public:
  // Opens an endpoint of |transport|, listening on |listen| when it is not
  // empty. |retain| keeps received payloads alive with the transport's
  // retain (where it has one) instead of copying them.
  EndpointHarness(const weft_transport_plugin_t* transport, const std::string& listen, bool retain = false);
  ~EndpointHarness();
  EndpointHarness(const EndpointHarness&) = delete;
  EndpointHarness& operator=(const EndpointHarness&) = delete;

  const CStatus& open_status() const { return open_status_; }
  weft_endpoint_t endpoint() const { return endpoint_; }
  std::string Address() const;

  // Connects; the harness owns the connection (released in the destructor
  // unless Release was called).
  weft_connection_t Connect(const std::string& address, int64_t timeout_ms, CStatus* status);
  void Release(weft_connection_t connection);
  void CloseEndpoint();

  // Sends header + slices; |done| (may be null) hears the outcome. Returns
  // what send returned.
  CStatus Send(weft_connection_t connection, const std::string& header,
               const std::vector<std::pair<const void*, uint64_t>>& slices,
               std::function<void(CStatus)> done = nullptr);

  // Waits until |pred| (called under the lock) holds or |timeout| passes.
  bool WaitUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

  // Recorded events, read under lock() or after WaitUntil.
  std::mutex& mu() { return mu_; }
  std::vector<weft_connection_t> accepted;
  std::vector<std::string> accepted_peers;
  std::vector<Received> messages;
  std::vector<std::pair<weft_connection_t, CStatus>> closed;
  // A callback ran after the endpoint or its connection was released.
  int late_callbacks = 0;
  // Runs inside on_message (after recording), e.g. to echo.
  std::function<void(const weft_received_t*)> on_message_hook;

 private:
  static void OnAccept(void* user, weft_connection_t connection, const char* peer);
  static void OnMessage(void* user, const weft_received_t* message);
  static void OnClosed(void* user, weft_connection_t connection, weft_status_t status);

  const weft_transport_plugin_t* transport_;
  bool retain_;
  weft_transport_callbacks_t callbacks_{};
  weft_endpoint_t endpoint_ = nullptr;
  CStatus open_status_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<weft_connection_t> owned_;
  bool endpoint_closed_ = false;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_TRANSPORT_HARNESS_H_
