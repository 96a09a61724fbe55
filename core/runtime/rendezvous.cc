#include "core/runtime/rendezvous.h"

#include <vector>

#include "core/base/hash.h"

namespace weft::runtime {
namespace {

// FNV-1a over the key's parts, each followed by a separator byte so that
// ("ab", "c") and ("a", "bc") differ.
struct Hasher {
  Fnv1a h;
  void Str(const std::string& s) { h.AddField(s); }
  template <class T>
  void Pod(T v) {
    h.Add(&v, sizeof v);
    h.AddByte(0xff);
  }
};

}  // namespace

RendezvousKey RendezvousKey::Make(std::string src_device, uint64_t src_incarnation, std::string dst_device,
                                  std::string edge_name, int64_t frame, int64_t iteration) {
  RendezvousKey key;
  key.src_device = std::move(src_device);
  key.src_incarnation = src_incarnation;
  key.dst_device = std::move(dst_device);
  key.edge_name = std::move(edge_name);
  key.frame = frame;
  key.iteration = iteration;
  Hasher h;
  h.Str(key.src_device);
  h.Pod(key.src_incarnation);
  h.Str(key.dst_device);
  h.Str(key.edge_name);
  h.Pod(key.frame);
  h.Pod(key.iteration);
  key.hash = static_cast<std::size_t>(h.h.value());
  return key;
}

bool RendezvousKey::operator==(const RendezvousKey& other) const {
  return hash == other.hash && src_incarnation == other.src_incarnation && frame == other.frame &&
         iteration == other.iteration && edge_name == other.edge_name && src_device == other.src_device &&
         dst_device == other.dst_device;
}

std::string RendezvousKey::ToString() const {
  std::string s = StrCat(edge_name, " from ", src_device, " to ", dst_device);
  if (frame != 0 || iteration != 0) s += StrCat(" (frame ", frame, ", iteration ", iteration, ")");
  return s;
}

Rendezvous::~Rendezvous() {
  // A receiver still waiting when the step is torn down would never be
  // called back: fail it rather than drop it.
  Abort(CancelledError("the step ended before this tensor was sent"));
}

Status Rendezvous::Send(const RendezvousKey& key, Item item) {
  DoneFn waiter;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_.ok()) return aborted_;
    Slot& slot = table_[key];
    if (slot.has_item) return InternalError("tensor ", key.ToString(), " was sent twice in one step");
    if (!slot.waiter) {
      slot.has_item = true;
      slot.item = std::move(item);
      return Status();
    }
    waiter = std::move(slot.waiter);
    table_.erase(key);
  }
  waiter(Status(), std::move(item));
  return Status();
}

void Rendezvous::RecvAsync(const RendezvousKey& key, DoneFn done) {
  Item item;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted_.ok()) {
      status = aborted_;
    } else {
      auto it = table_.find(key);
      if (it == table_.end() || !it->second.has_item) {
        Slot& slot = table_[key];
        if (slot.waiter) {
          status = InternalError("tensor ", key.ToString(), " is received twice in one step");
        } else {
          slot.waiter = std::move(done);
          return;
        }
      } else {
        item = std::move(it->second.item);
        table_.erase(it);
      }
    }
  }
  done(status, std::move(item));
}

Status Rendezvous::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

void Rendezvous::Abort(const Status& status) {
  std::vector<DoneFn> waiters;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.ok()) aborted_ = status.ok() ? CancelledError("the step was aborted") : status;
    for (auto& [key, slot] : table_) {
      if (slot.waiter) waiters.push_back(std::move(slot.waiter));
    }
    table_.clear();
  }
  for (DoneFn& w : waiters) w(aborted_, Item{});
}

}  // namespace weft::runtime
