// An endpoint of the rdma transport (endpoint.h): its lifetime, accepting
// and opening connections, and the progress thread.
//
// NOT RUN ON REAL HARDWARE (see rdma_transport.h): compiled, never executed.
#include "rdma/endpoint.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "rdma/side_channel.h"
#include "weft/sdk/log.h"
#include "weft/sdk/status.h"

namespace weft::rdma {
namespace {

void RunUntied(Work& work) {
  for (Task& task : work) task.fn();
  work.clear();
}

}  // namespace

Endpoint::Endpoint(const weft_transport_callbacks_t& callbacks, std::unique_ptr<DeviceContext> device, Options options)
    : callbacks_(callbacks),
      device_(std::move(device)),
      options_(options),
      cache_(
          options.registration_cache_bytes,
          [pd = device_->pd](void* address, uint64_t size) -> Result<RegisteredMemory> {
            errno = 0;
            // An int, not the enum: libibverbs' ibv_reg_mr macro ANDs it with
            // a flag of another enum type, which clang rejects
            // (-Wdeprecated-enum-enum-conversion).
            const int access = IBV_ACCESS_LOCAL_WRITE;
            ibv_mr* mr = ibv_reg_mr(pd, address, size, access);
            if (mr == nullptr) {
              return Fail(WEFT_RESOURCE_EXHAUSTED,
                          "ibv_reg_mr of " + std::to_string(size) + " bytes failed (" + ErrnoText(errno) + ")");
            }
            return RegisteredMemory{mr, mr->lkey, mr->rkey};
          },
          [](const RegisteredMemory& memory) { ibv_dereg_mr(static_cast<ibv_mr*>(memory.handle)); }) {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) ThrowVerbs("pipe2", errno);
}

Endpoint::~Endpoint() {
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  Work work;
  std::set<Connection*> connections;
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    connections.swap(connections_);
  }
  for (Connection* c : connections) {
    c->Close(true, &work);
    c->Detach();
    if (!c->host_owned) delete c;
  }
  // Done callbacks of cancelled sends still run exactly once.
  RunUntied(work);
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    posted_.clear();
  }
  CloseFd(listen_fd_);
  CloseFd(wake_[0]);
  CloseFd(wake_[1]);
}

void Endpoint::Listen(const RdmaAddress& address) {
  listen_fd_ = ListenOn(address.host, address.port);
  fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  RdmaAddress actual = address;
  actual.port = LocalPort(listen_fd_);
  actual.device = device_->name;
  address_ = FormatAddress(actual);
}

void Endpoint::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Endpoint::Wake() {
  const char byte = 0;
  (void)!write(wake_[1], &byte, 1);
}

void Endpoint::Post(Work work) {
  {
    std::lock_guard<std::mutex> lock(posted_mutex_);
    for (Task& task : work) posted_.push_back(std::move(task));
  }
  Wake();
}

void Endpoint::RunTasks(Work& work) {
  for (Task& task : work) {
    if (task.owner == nullptr || Alive(static_cast<Connection*>(const_cast<void*>(task.owner)))) task.fn();
  }
  work.clear();
}

Connection* Endpoint::Connect(const RdmaAddress& address, int64_t timeout_ms) {
  const int fd = ConnectTo(address.host, address.port, timeout_ms);
  auto connection = std::make_unique<Connection>(this, fd, address.host + ":" + std::to_string(address.port));
  connection->Establish(*device_, options_, timeout_ms);
  connection->host_owned = true;
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    connections_.insert(connection.get());
  }
  Wake();
  return connection.release();
}

void Endpoint::CloseConnection(Connection* connection) {
  Work work;
  {
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    connections_.erase(connection);
    connection->Close(true, &work);
  }
  RunUntied(work);
  delete connection;
  Wake();
}

void Endpoint::Accept() {
  std::string peer;
  int fd = -1;
  try {
    fd = AcceptFrom(listen_fd_, &peer);
  } catch (const sdk::Error& e) {
    WEFT_SDK_LOG(WARNING) << e.what();
    return;
  }
  auto connection = std::make_unique<Connection>(this, fd, peer);
  try {
    connection->Establish(*device_, options_, options_.handshake_timeout_ms);
  } catch (const std::exception& e) {
    WEFT_SDK_LOG(WARNING) << "rdma: refused a connection from " << peer << ": " << e.what();
    return;
  }
  Connection* accepted = connection.release();
  accepted->host_owned = true;
  connections_.insert(accepted);
  callbacks_.on_accept(callbacks_.user, reinterpret_cast<weft_connection_t>(accepted), peer.c_str());
}

void Endpoint::Run() {
  std::vector<pollfd> fds;
  std::vector<Connection*> owners;  // per entry of fds: the connection, or nullptr
  std::vector<int> kinds;           // 0 wake, 1 listen, 2 async, 3 completion, 4 side channel
  for (;;) {
    fds.clear();
    owners.clear();
    kinds.clear();
    auto add = [&](int fd, int kind, Connection* owner) {
      if (fd < 0) return;
      fds.push_back(pollfd{fd, POLLIN, 0});
      kinds.push_back(kind);
      owners.push_back(owner);
    };
    {
      std::lock_guard<std::recursive_mutex> lock(dispatch_);
      if (stopping_) return;
      add(wake_[0], 0, nullptr);
      add(listen_fd_, 1, nullptr);
      add(device_->context->async_fd, 2, nullptr);
      for (Connection* c : connections_) {
        if (!c->Watched()) continue;
        add(c->channel_fd(), 3, c);
        add(c->fd(), 4, c);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      WEFT_SDK_LOG(ERROR) << "rdma: poll failed (" << ErrnoText(errno) << "); the endpoint stops";
      return;
    }
    std::lock_guard<std::recursive_mutex> lock(dispatch_);
    if (stopping_) return;
    Work work;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Connection* owner = owners[i];
      if (owner != nullptr && !Alive(owner)) continue;  // closed by an earlier callback of this round
      switch (kinds[i]) {
        case 0: {
          char drain[64];
          while (read(wake_[0], drain, sizeof drain) > 0) {
          }
          Work posted;
          {
            std::lock_guard<std::mutex> posted_lock(posted_mutex_);
            posted.swap(posted_);
          }
          RunTasks(posted);
          break;
        }
        case 1: Accept(); break;
        case 2: {
          ibv_async_event event{};
          if (ibv_get_async_event(device_->context, &event) != 0) break;
          const bool qp_event = event.event_type == IBV_EVENT_QP_FATAL || event.event_type == IBV_EVENT_QP_REQ_ERR ||
                                event.event_type == IBV_EVENT_QP_ACCESS_ERR;
          Connection* target = nullptr;
          if (qp_event) {
            for (Connection* c : connections_) {
              if (c->qp() == event.element.qp) target = c;
            }
          }
          const char* what = ibv_event_type_str(event.event_type);
          ibv_ack_async_event(&event);
          if (target != nullptr) {
            target->OnQpEvent(what, &work);
          } else {
            WEFT_SDK_LOG(WARNING) << "rdma: device " << device_->name << ": " << what;
          }
          break;
        }
        case 3: owner->OnCompletionEvent(&work); break;
        case 4: owner->OnSideChannelReadable(&work); break;
        default: break;
      }
      RunTasks(work);
    }
  }
}

}  // namespace weft::rdma
