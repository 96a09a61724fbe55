// An endpoint of the rdma transport: the opened device, the listening
// side channel, the registration cache shared by its connections, and the
// one progress thread that polls the listening socket, the completion
// channels, the device's async events and every side channel, and runs
// all callbacks.
//
// NOT RUN ON REAL HARDWARE (see rdma_transport.h): compiled, never executed.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_ENDPOINT_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_ENDPOINT_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "rdma/address.h"
#include "rdma/connection.h"
#include "rdma/device.h"
#include "rdma/rdma_transport.h"
#include "rdma/registration_cache.h"
#include "weft/weft_transport.h"

namespace weft::rdma {

class Endpoint {
 public:
  Endpoint(const weft_transport_callbacks_t& callbacks, std::unique_ptr<DeviceContext> device, Options options);
  ~Endpoint();

  void Listen(const RdmaAddress& address);
  void Start();
  std::string Address() const { return address_; }
  Connection* Connect(const RdmaAddress& address, int64_t timeout_ms);
  void CloseConnection(Connection* connection);
  void Post(Work work);
  // Runs |work|, skipping tasks of connections closed meanwhile.
  void RunTasks(Work& work);

  RegistrationCache& cache() { return cache_; }
  std::mutex& cache_mutex() { return cache_mutex_; }
  const weft_transport_callbacks_t& callbacks() const { return callbacks_; }

 private:
  void Run();
  void Accept();
  void Wake();
  bool Alive(Connection* connection) const { return connections_.count(connection) != 0; }

  weft_transport_callbacks_t callbacks_;
  std::unique_ptr<DeviceContext> device_;
  Options options_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
  bool stopping_ = false;

  // Held by the progress thread while it handles events and runs
  // callbacks, and by every close: no callback for a connection runs after
  // its close returns. Recursive because a callback may close.
  std::recursive_mutex dispatch_;
  std::set<Connection*> connections_;
  std::mutex posted_mutex_;
  Work posted_;

  std::mutex cache_mutex_;
  RegistrationCache cache_;
};

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_ENDPOINT_H_
