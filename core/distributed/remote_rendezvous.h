// A step's rendezvous on one task of a cluster. _Send nodes leave their
// tensors here as in one process; a _Recv whose sender is on another task
// pulls the tensor from that task (RecvTensor) into a buffer of the right
// size, under the step id; a dead value (a branch not taken) comes back as
// a dead item without a tensor. Aborting the step fails the pulls in flight at
// once; their late answers are dropped.
#ifndef WEFT_CORE_DIST_REMOTE_RENDEZVOUS_H_
#define WEFT_CORE_DIST_REMOTE_RENDEZVOUS_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/distributed/rpc.h"
#include "core/runtime/rendezvous.h"

namespace weft::dist {

// "/job:ps/task:0/device:CPU:0" -> "/job:ps/task:0"; "" for a device name
// without a task.
std::string TaskOfDevice(std::string_view device);

class RemoteRendezvous : public runtime::Rendezvous {
 public:
  // |local_task| is this task's name; |peer_of| gives a task's address
  // (nullopt for a task the cluster does not have).
  RemoteRendezvous(int64_t step_id, std::string local_task, RpcNode* rpc,
                   std::function<std::optional<Peer>(const std::string& task)> peer_of, int64_t timeout_ms);
  ~RemoteRendezvous() override;

  void RecvAsync(const runtime::RendezvousKey& key, DoneFn done) override;
  void Abort(const Status& status) override;

  // Pulls the tensors this task's partitions receive once per step, as it
  // starts, before their _Recv ask: |by_task| maps each other task to the
  // keys it sends, and each gets one RecvTensors message, answered tensor
  // by tensor as each is sent there. An answer is kept here under its key
  // for its _Recv (delivered at once when the _Recv already waits), and so
  // is a failed pull's error. Call once, before the step's executors start.
  void Prefetch(const std::map<std::string, std::vector<runtime::RendezvousKey>>& by_task);

 private:
  struct Pull {
    DoneFn done;
  };
  void FinishPull(uint64_t id, const Status& status, Item item);

  int64_t step_id_;
  std::string local_task_;
  RpcNode* rpc_;
  std::function<std::optional<Peer>(const std::string&)> peer_of_;
  int64_t timeout_ms_;
  std::shared_ptr<std::mutex> pulls_mutex_ = std::make_shared<std::mutex>();
  std::map<uint64_t, Pull> pulls_;
  // What Prefetch asked for, by key, until its _Recv took it: the answer
  // (or why there is none) when it came first, else the _Recv waiting.
  struct Prefetched {
    bool answered = false;
    Status status;
    Item item;
    DoneFn waiter;
  };
  std::unordered_map<runtime::RendezvousKey, Prefetched, runtime::RendezvousKeyHash> prefetched_;
  uint64_t next_pull_ = 1;
  Status aborted_status_;
  // Answers that arrive after the rendezvous is gone check this.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_REMOTE_RENDEZVOUS_H_
