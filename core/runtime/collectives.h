// Collective groups: the ranks of a data-parallel job and the collectives
// plugin (weft/weft_collectives.h) that reduces among them.
//
//   CollectiveGroupOptions o;
//   o.name = "train"; o.rank = r; o.size = n; o.store = store; ...
//   WEFT_ASSIGN_OR_RETURN(auto group, CollectiveGroup::Create(host, o));
//   group->AllReduce(key, buffer, buffer, WEFT_REDUCE_SUM, done);
//
// Ordering is what makes collectives from a dataflow graph safe: the
// executor makes the gradient buckets of one step ready in whatever order
// the inter-op threads finish them, which differs between ranks, but every
// rank must issue them in one order. An operation carries an OrderKey
// (round, order, round_size): it is issued only after orders 0..order-1 of
// the round's current pass were, and the pass ends after round_size
// operations. Tags come from the issue count, so they match on every rank.
// docs/distributed.md, "Allreduce", has the user's side;
// docs/distributed-internals.md, "Allreduce", the buckets.
#ifndef WEFT_CORE_RUNTIME_COLLECTIVES_H_
#define WEFT_CORE_RUNTIME_COLLECTIVES_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/plugin/plugin_host.h"
#include "weft/weft_collectives.h"

namespace weft::runtime {

// A rendezvous store: set once, never deleted; Get waits for the key.
class KvStore {
 public:
  virtual ~KvStore() = default;
  virtual Status Set(const std::string& key, std::string value) = 0;
  // DEADLINE_EXCEEDED naming the key when it does not appear in time.
  virtual Expected<std::string> Get(const std::string& key, int64_t timeout_ms) = 0;
  virtual Status Wait(const std::vector<std::string>& keys, int64_t timeout_ms) = 0;
};

// A store in this process: for ranks that are threads of one process (the
// tests, the benchmarks) and for the chief's own view of its served store.
class LocalKvStore final : public KvStore {
 public:
  Status Set(const std::string& key, std::string value) override;
  Expected<std::string> Get(const std::string& key, int64_t timeout_ms) override;
  Status Wait(const std::vector<std::string>& keys, int64_t timeout_ms) override;
  // The values of |keys| if all exist now.
  std::optional<std::vector<std::string>> TryGet(const std::vector<std::string>& keys) const;
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;
};

// The C view of |store| a plugin's comm_create borrows.
class KvStoreAdapter {
 public:
  explicit KvStoreAdapter(KvStore* store);
  const weft_kv_store_t* table() const { return &table_; }

 private:
  weft_kv_store_t table_;
};

struct CollectiveGroupOptions {
  // The name collective ops find the group by ("train").
  std::string name = "train";
  int rank = 0;
  int size = 1;
  // Each rank's task ("/job:worker/task:1") and host; |size| entries each.
  std::vector<std::string> rank_names;
  std::vector<std::string> rank_hosts;
  std::shared_ptr<KvStore> store;
  // Unique to this group's communicator (the store's keys are never
  // deleted).
  std::string key_prefix;
  // [cluster] collectives: "auto" or a backend name.
  std::string backend = "auto";
  // [cluster] collective_timeout_ms: the rendezvous and every operation.
  int64_t timeout_ms = 60000;
  std::string device_type = "CPU";
  int device_ordinal = 0;
  // After a failure: which ranks do not answer, as a clause for the
  // message ("/job:worker/task:2 (127.0.0.1:7093) does not answer"). Empty
  // when unknown.
  std::function<std::string()> diagnose;
};

// Where an operation stands in the order every rank issues.
struct OrderKey {
  std::string round;
  int64_t order = 0;
  int64_t round_size = 1;
};

class CollectiveGroup {
 public:
  struct Stats {
    int64_t ops = 0;
    int64_t bytes = 0;
    // Summed time from an operation's arrival to its completion.
    double busy_ms = 0;
  };

  // Picks the plugin, then joins the communicator (a blocking rendezvous
  // of every rank, up to timeout_ms).
  static Expected<std::shared_ptr<CollectiveGroup>> Create(const plugin::PluginHost& host,
                                                           CollectiveGroupOptions options);
  ~CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;

  // The operations. With a key they are issued in the key's order; without
  // one, in call order (the caller orders them the same on every rank).
  // Buffers are lent until |done|, which runs exactly once, from any
  // thread, possibly before the call returns.
  void AllReduce(std::optional<OrderKey> key, weft_comm_buffer_t in, weft_comm_buffer_t out, weft_reduction_t reduction,
                 std::function<void(Status)> done);
  void AllGather(std::optional<OrderKey> key, weft_comm_buffer_t in, weft_comm_buffer_t out,
                 std::function<void(Status)> done);
  void Broadcast(std::optional<OrderKey> key, weft_comm_buffer_t buffer, int root, std::function<void(Status)> done);

  // Blocking forms of the above, for code outside a graph.
  Status AllReduce(weft_comm_buffer_t buffer, weft_reduction_t reduction);
  Status Broadcast(weft_comm_buffer_t buffer, int root);

  // Fails what is in flight and everything later with |why|, and makes the
  // peers fail at once (the plugin closes its links).
  void Abort(const Status& why);
  // The first failure; OK while the group is healthy.
  Status status() const;

  const CollectiveGroupOptions& options() const { return options_; }
  const std::string& backend() const { return backend_; }
  Stats stats() const;

 private:
  using Issue = std::function<weft_status_t(uint32_t tag, weft_done_fn done, void* user)>;
  struct Pending {
    Issue issue;
    std::function<void(Status)> done;
    int64_t bytes = 0;
    std::string what;
  };
  struct InFlight;

  CollectiveGroup(CollectiveGroupOptions options, const plugin::CollectivesPlugin* plugin);
  void Enqueue(std::optional<OrderKey> key, Pending pending);
  void Drain(std::unique_lock<std::mutex>& lock);
  static void OnDone(void* user, weft_status_t status);
  void Finish(std::unique_ptr<InFlight> op, Status status);
  Status Failure(const Status& plugin_status, const std::string& what);
  // Abort; true when this call failed the group (it was healthy).
  bool AbortFirst(const Status& why);

  CollectiveGroupOptions options_;
  const plugin::CollectivesPlugin* plugin_;
  std::string backend_;
  weft_communicator_t comm_ = nullptr;

  mutable std::mutex mutex_;
  Status failed_;
  // The round being issued and the operations waiting for their turn.
  std::string round_;
  int64_t round_size_ = 0;
  int64_t next_order_ = 0;
  std::map<int64_t, Pending> early_;
  // Ready, in issue order; one thread at a time issues them (draining_).
  std::vector<Pending> ready_;
  bool draining_ = false;
  uint32_t issued_ = 0;
  int64_t in_flight_ = 0;
  std::condition_variable idle_;
  Stats stats_;
};

// The groups collective ops find by name (one process may hold several).
Status RegisterCollectiveGroup(std::shared_ptr<CollectiveGroup> group);
std::shared_ptr<CollectiveGroup> FindCollectiveGroup(std::string_view name);
void UnregisterCollectiveGroup(std::string_view name);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_COLLECTIVES_H_
