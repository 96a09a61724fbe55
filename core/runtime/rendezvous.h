// Where a step's _Send and _Recv nodes meet. Every tensor that crosses a
// device boundary has a key: which device sent it (and that device's
// incarnation, so that a restarted peer's stale message cannot match),
// which device receives it, the edge's name, and the loop frame and
// iteration it belongs to. The key is a struct, hashed once when it is
// made. One Rendezvous serves one step; whichever side arrives first
// waits for the other. Abort wakes every waiting receiver with the error,
// so a failed step never leaves a _Recv parked.
//
//   RendezvousKey key = RendezvousKey::Make("/device:CPU:0", 7, "/device:OPENCL:0", "dense1/matmul:0");
//   rendezvous.Send(key, value, src_device);           // the producer's side
//   rendezvous.RecvAsync(key, [](Status s, Rendezvous::Item item) { ... });
#ifndef WEFT_CORE_RUNTIME_RENDEZVOUS_H_
#define WEFT_CORE_RUNTIME_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/base/status.h"
#include "core/tensor/tensor.h"

namespace weft::runtime {

class RuntimeDevice;

struct RendezvousKey {
  std::string src_device;
  uint64_t src_incarnation = 0;
  std::string dst_device;
  std::string edge_name;  // "dense1/matmul:0"
  int64_t frame = 0;      // 0: the root frame (loops come with control flow)
  int64_t iteration = 0;
  std::size_t hash = 0;

  static RendezvousKey Make(std::string src_device, uint64_t src_incarnation, std::string dst_device,
                            std::string edge_name, int64_t frame = 0, int64_t iteration = 0);
  bool operator==(const RendezvousKey& other) const;
  // "dense1/matmul:0 from /device:CPU:0 to /device:OPENCL:0"
  std::string ToString() const;
};

struct RendezvousKeyHash {
  std::size_t operator()(const RendezvousKey& key) const { return key.hash; }
};

class Rendezvous {
 public:
  // What a sender hands over: the value, in its device's memory. A dead
  // item (the sender's input was dead: a branch not taken, a loop's last
  // check) has no value; its receiver's output is dead too.
  struct Item {
    Tensor value;
    const RuntimeDevice* device = nullptr;
    bool is_dead = false;
  };
  using DoneFn = std::function<void(const Status&, Item)>;

  Rendezvous() = default;
  virtual ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  // Delivers |item| under |key|: to a receiver already waiting (its
  // callback runs on this thread), or kept for the one that comes. Sending
  // one key twice in a step, or after Abort, is an error.
  virtual Status Send(const RendezvousKey& key, Item item);
  // Calls |done| once with the item sent under |key|, at once when it is
  // already here, else when it arrives or the rendezvous is aborted.
  virtual void RecvAsync(const RendezvousKey& key, DoneFn done);
  // Fails every waiting and later receive with |status| (the first abort
  // wins).
  virtual void Abort(const Status& status);
  // The status of the first Abort; OK while the step goes on.
  Status aborted() const;

 private:
  struct Slot {
    bool has_item = false;
    Item item;
    DoneFn waiter;
  };
  mutable std::mutex mutex_;
  Status aborted_;
  std::unordered_map<RendezvousKey, Slot, RendezvousKeyHash> table_;
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_RENDEZVOUS_H_
