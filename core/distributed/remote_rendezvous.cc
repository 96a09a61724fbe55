#include "core/distributed/remote_rendezvous.h"

#include <optional>
#include <vector>

#include "core/runtime/executor.h"

namespace weft::dist {

std::string TaskOfDevice(std::string_view device) {
  const std::size_t at = device.find("/device:");
  if (at == std::string_view::npos || at == 0) return {};
  return std::string(device.substr(0, at));
}

namespace {

// A pull's answer as the item its _Recv gets; an error is said to come
// from pulling |key| from |peer| (|status| is rewritten).
runtime::Rendezvous::Item TakeAnswer(Status& status, Response& response, const runtime::RendezvousKey& key,
                                     const std::string& peer) {
  runtime::Rendezvous::Item item;
  if (status.ok()) {
    item.value = std::move(response.tensor);
    item.is_dead = response.is_dead;
  } else {
    status = Status(status.code(), StrCat("pulling ", key.ToString(), " from ", peer, ": ", status.message()));
  }
  return item;
}

}  // namespace

RemoteRendezvous::RemoteRendezvous(int64_t step_id, std::string local_task, RpcNode* rpc,
                                   std::function<std::optional<Peer>(const std::string&)> peer_of, int64_t timeout_ms)
    : step_id_(step_id),
      local_task_(std::move(local_task)),
      rpc_(rpc),
      peer_of_(std::move(peer_of)),
      timeout_ms_(timeout_ms) {}

RemoteRendezvous::~RemoteRendezvous() {
  Abort(CancelledError("step ", step_id_, " ended before this tensor arrived"));
  std::lock_guard<std::mutex> lock(*pulls_mutex_);
  *alive_ = false;
}

void RemoteRendezvous::RecvAsync(const runtime::RendezvousKey& key, DoneFn done) {
  const std::string src_task = TaskOfDevice(key.src_device);
  if (src_task.empty() || src_task == local_task_) {
    runtime::Rendezvous::RecvAsync(key, std::move(done));
    return;
  }
  {
    std::unique_lock<std::mutex> lock(*pulls_mutex_);
    if (auto it = prefetched_.find(key); it != prefetched_.end()) {
      if (!it->second.answered && aborted_status_.ok()) {
        it->second.waiter = std::move(done);
        return;
      }
      Status status = aborted_status_.ok() ? std::move(it->second.status) : aborted_status_;
      Item item = std::move(it->second.item);
      prefetched_.erase(it);
      lock.unlock();
      done(status, std::move(item));
      return;
    }
  }
  std::optional<Peer> peer = peer_of_(src_task);
  if (!peer) {
    done(NotFoundError("tensor ", key.ToString(), " comes from task ", src_task, ", which the cluster does not have"),
         Item{});
    return;
  }
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(*pulls_mutex_);
    id = aborted_status_.ok() ? next_pull_++ : 0;
    if (id != 0) pulls_.emplace(id, Pull{std::move(done)});
  }
  if (id == 0) {
    done(aborted(), Item{});
    return;
  }
  Request request;
  request.method = Method::kRecvTensor;
  request.step_id = step_id_;
  request.key = key;
  std::weak_ptr<bool> alive = alive_;
  auto mutex = pulls_mutex_;
  rpc_->Call(
      *peer, std::move(request), timeout_ms_,
      [this, id, alive, mutex, key, peer = *peer](Status status, Response response) {
        std::lock_guard<std::mutex> guard(*mutex);
        auto live = alive.lock();
        if (live == nullptr || !*live) return;
        // Still alive: finish under the pulls lock's protection of
        // |this| (the destructor takes it before it goes).
        const bool on_transport_thread = RpcNode::IsSmallAnswer(status, response);
        Item item = TakeAnswer(status, response, key, peer.name);
        auto it = pulls_.find(id);
        if (it == pulls_.end()) return;  // aborted meanwhile
        DoneFn waiter = std::move(it->second.done);
        pulls_.erase(it);
        // The receiver's continuation runs kernels: not under the lock.
        // A small answer runs here on the transport's thread
        // (AnswerOn::kTransportThreadIfSmall), which goes on with the
        // step's cheap nodes only and gives the next expensive one to
        // the RPC pool, where it ran before; a large one and an error
        // come on a pool thread.
        // (|this| may go once the lock is let go: the pool is read before.)
        std::optional<runtime::Executor::OnlyCheapNodesHere> cheap;
        if (on_transport_thread) cheap.emplace(rpc_->pool());
        mutex->unlock();
        waiter(status, std::move(item));
        cheap.reset();
        mutex->lock();
      },
      RpcNode::AnswerOn::kTransportThreadIfSmall);
}

void RemoteRendezvous::Prefetch(const std::map<std::string, std::vector<runtime::RendezvousKey>>& by_task) {
  for (const auto& [task, task_keys] : by_task) {
    std::optional<Peer> peer = peer_of_(task);
    if (!peer) continue;  // its _Recv pulls, and says the task is not the cluster's
    {
      std::lock_guard<std::mutex> lock(*pulls_mutex_);
      if (!aborted_status_.ok()) return;
      for (const runtime::RendezvousKey& key : task_keys) prefetched_.try_emplace(key);
    }
    std::vector<std::function<void(Status, Response)>> dones;
    dones.reserve(task_keys.size());
    std::weak_ptr<bool> alive = alive_;
    auto mutex = pulls_mutex_;
    for (const runtime::RendezvousKey& key : task_keys) {
      dones.push_back([this, alive, mutex, key, name = peer->name](Status status, Response response) {
        std::unique_lock<std::mutex> guard(*mutex);
        auto live = alive.lock();
        if (live == nullptr || !*live) return;
        // Alive while the pulls lock is held (the destructor takes it).
        const bool on_transport_thread = RpcNode::IsSmallAnswer(status, response);
        Item item = TakeAnswer(status, response, key, name);
        auto it = prefetched_.find(key);
        if (it == prefetched_.end() || it->second.answered) return;  // aborted and taken meanwhile
        if (!it->second.waiter) {
          it->second.answered = true;
          it->second.status = std::move(status);
          it->second.item = std::move(item);
          return;
        }
        DoneFn waiter = std::move(it->second.waiter);
        prefetched_.erase(it);
        // As in RecvAsync: the continuation runs without the lock, cheap
        // nodes only when on the transport's thread, and |this| may go
        // meanwhile (the pool is read before).
        std::optional<runtime::Executor::OnlyCheapNodesHere> cheap;
        if (on_transport_thread) cheap.emplace(rpc_->pool());
        guard.unlock();
        waiter(status, std::move(item));
        cheap.reset();
        guard.lock();
      });
    }
    Request request;
    request.method = Method::kRecvTensors;
    request.step_id = step_id_;
    request.keys = task_keys;
    rpc_->CallRecvTensors(*peer, std::move(request), timeout_ms_, std::move(dones),
                          RpcNode::AnswerOn::kTransportThreadIfSmall);
  }
}

void RemoteRendezvous::Abort(const Status& status) {
  runtime::Rendezvous::Abort(status);
  std::vector<DoneFn> waiting;
  Status why;
  {
    std::lock_guard<std::mutex> lock(*pulls_mutex_);
    if (aborted_status_.ok()) aborted_status_ = aborted();
    why = aborted_status_;
    for (auto& [id, pull] : pulls_) waiting.push_back(std::move(pull.done));
    pulls_.clear();
    for (auto it = prefetched_.begin(); it != prefetched_.end();) {
      if (it->second.waiter) {
        waiting.push_back(std::move(it->second.waiter));
        it = prefetched_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (DoneFn& done : waiting) done(why, Item{});
}

}  // namespace weft::dist
