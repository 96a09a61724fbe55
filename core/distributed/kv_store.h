// The rendezvous store a cluster serves for itself (training.mode =
// "allreduce"): every task's TaskService holds a KvStoreService, and the
// workers use the chief's. A collectives plugin meets its peers through it
// (the addresses of Gloo's pairs, NCCL's unique id), so a job needs no
// store of its own (no Redis, no shared file system).
//
// A get that waits for keys not set yet never blocks an RPC thread: the
// reply is parked, and answered by the set that completes it or by the
// process's timer at its deadline (DEADLINE_EXCEEDED naming the missing
// keys).
#ifndef WEFT_CORE_DIST_KV_STORE_H_
#define WEFT_CORE_DIST_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/distributed/rpc.h"
#include "core/runtime/collectives.h"
#include "core/runtime/timer.h"

namespace weft::dist {

// Owned by a shared_ptr (the timer holds a weak one while a get waits).
class KvStoreService final : public runtime::KvStore, public std::enable_shared_from_this<KvStoreService> {
 public:
  using Answer = std::function<void(Status, std::vector<std::string> values)>;

  explicit KvStoreService(std::string owner) : owner_(std::move(owner)) {}
  // Answers every parked get with CANCELLED.
  ~KvStoreService() override;

  // Answers |answer| with the values of |keys| once all exist, or with
  // DEADLINE_EXCEEDED after |wait_ms|; from this thread when they exist
  // now, else from the thread of the set or the timer.
  void Serve(std::vector<std::string> keys, int64_t wait_ms, Answer answer);
  // Answers every parked get with |why| and refuses later ones.
  void Close(const Status& why);

  // runtime::KvStore, for the task's own use (the chief's rank).
  Status Set(const std::string& key, std::string value) override;
  Expected<std::string> Get(const std::string& key, int64_t timeout_ms) override;
  Status Wait(const std::vector<std::string>& keys, int64_t timeout_ms) override;

 private:
  struct Waiter {
    std::vector<std::string> keys;
    Answer answer;
    runtime::Timer::Id timer = runtime::Timer::kInvalidId;
    int64_t wait_ms = 0;
  };
  using Waiters = std::list<std::shared_ptr<Waiter>>;
  // The values of |keys| when all exist (under mutex_).
  bool Collect(const std::vector<std::string>& keys, std::vector<std::string>* values) const;
  void Expire(const std::shared_ptr<Waiter>& waiter);

  const std::string owner_;
  mutable std::mutex mutex_;
  std::map<std::string, std::string, std::less<>> values_;
  Waiters waiters_;
  Status closed_;
};

// The store of task |peer|, over |rpc|, which must outlive it.
class RemoteKvStore final : public runtime::KvStore {
 public:
  RemoteKvStore(RpcNode* rpc, Peer peer, int64_t rpc_timeout_ms)
      : rpc_(rpc), peer_(std::move(peer)), rpc_timeout_ms_(rpc_timeout_ms) {}
  Status Set(const std::string& key, std::string value) override;
  Expected<std::string> Get(const std::string& key, int64_t timeout_ms) override;
  Status Wait(const std::vector<std::string>& keys, int64_t timeout_ms) override;

 private:
  Expected<std::vector<std::string>> GetAll(const std::vector<std::string>& keys, int64_t timeout_ms);
  RpcNode* rpc_;
  Peer peer_;
  int64_t rpc_timeout_ms_;
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_KV_STORE_H_
