#include "core/runtime/collectives.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <future>

#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/plugin/host_services.h"

namespace weft::runtime {
namespace {

using Clock = std::chrono::steady_clock;

std::string Missing(const std::map<std::string, std::string, std::less<>>& values,
                    const std::vector<std::string>& keys) {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (values.find(key) == values.end()) missing.push_back(Quote(key));
  }
  return StrJoin(missing, ", ");
}

}  // namespace

// --- LocalKvStore -----------------------------------------------------------

Status LocalKvStore::Set(const std::string& key, std::string value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = std::move(value);
  }
  changed_.notify_all();
  return Status();
}

Expected<std::string> LocalKvStore::Get(const std::string& key, int64_t timeout_ms) {
  WEFT_RETURN_IF_ERROR(Wait({key}, timeout_ms));
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.find(key)->second;
}

Status LocalKvStore::Wait(const std::vector<std::string>& keys, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto all = [&] {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return values_.count(k) > 0; });
  };
  if (!changed_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)), all)) {
    return Status(Code::kDeadlineExceeded,
                  StrCat("rendezvous: ", Missing(values_, keys), " did not appear within ", timeout_ms, " ms"));
  }
  return Status();
}

std::optional<std::vector<std::string>> LocalKvStore::TryGet(const std::vector<std::string>& keys) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

std::size_t LocalKvStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.size();
}

// --- The C view of a store -------------------------------------------------

namespace {

weft_status_t KvSet(void* user, const char* key, const void* data, size_t size) {
  if (key == nullptr) return plugin::MakeStatus(InvalidArgumentError("kv set: the key is NULL"));
  if (data == nullptr && size > 0) return plugin::MakeStatus(InvalidArgumentError("kv set: data is NULL"));
  std::string value(static_cast<const char*>(data), size);
  return plugin::MakeStatus(static_cast<KvStore*>(user)->Set(key, std::move(value)));
}

weft_status_t KvGet(void* user, const char* key, int64_t timeout_ms, void** out_data, size_t* out_size) {
  if (key == nullptr || out_data == nullptr || out_size == nullptr) {
    return plugin::MakeStatus(InvalidArgumentError("kv get: key, out_data and out_size must not be NULL"));
  }
  *out_data = nullptr;
  *out_size = 0;
  auto value = static_cast<KvStore*>(user)->Get(key, timeout_ms);
  if (!value.ok()) return plugin::MakeStatus(value.status());
  if (value->empty()) return nullptr;
  void* copy = plugin::HostTable()->host_alloc(value->size(), alignof(std::max_align_t));
  if (copy == nullptr) return plugin::MakeStatus(ResourceExhaustedError("kv get: out of host memory"));
  std::memcpy(copy, value->data(), value->size());
  *out_data = copy;
  *out_size = value->size();
  return nullptr;
}

weft_status_t KvWait(void* user, const char* const* keys, size_t num_keys, int64_t timeout_ms) {
  std::vector<std::string> names;
  for (size_t i = 0; i < num_keys; ++i) {
    if (keys == nullptr || keys[i] == nullptr) {
      return plugin::MakeStatus(InvalidArgumentError("kv wait: key ", i, " is NULL"));
    }
    names.emplace_back(keys[i]);
  }
  return plugin::MakeStatus(static_cast<KvStore*>(user)->Wait(names, timeout_ms));
}

}  // namespace

KvStoreAdapter::KvStoreAdapter(KvStore* store) : table_{} {
  table_.struct_size = sizeof(table_);
  table_.user = store;
  table_.set = &KvSet;
  table_.get = &KvGet;
  table_.wait = &KvWait;
}

// --- CollectiveGroup --------------------------------------------------------

struct CollectiveGroup::InFlight {
  CollectiveGroup* group;
  std::function<void(Status)> done;
  std::string what;
  int64_t bytes;
  Clock::time_point start;
};

Expected<std::shared_ptr<CollectiveGroup>> CollectiveGroup::Create(const plugin::PluginHost& host,
                                                                   CollectiveGroupOptions options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgumentError("collective group '", options.name, "': rank ", options.rank, " of ", options.size,
                                " is not a rank");
  }
  if (static_cast<int>(options.rank_names.size()) != options.size ||
      static_cast<int>(options.rank_hosts.size()) != options.size) {
    return InvalidArgumentError("collective group '", options.name, "': ", options.size, " ranks but ",
                                options.rank_names.size(), " names and ", options.rank_hosts.size(), " hosts");
  }
  if (options.store == nullptr) {
    return InvalidArgumentError("collective group '", options.name, "' has no rendezvous store");
  }
  // The plugin.
  std::vector<std::string> backends;
  const plugin::CollectivesPlugin* chosen = nullptr;
  for (const plugin::CollectivesPlugin* p : host.collectives().All()) {
    backends.emplace_back(p->table->backend);
    if (options.backend == "auto" ? (chosen == nullptr && p->Serves(options.device_type))
                                  : options.backend == p->table->backend) {
      chosen = p;
    }
  }
  if (chosen == nullptr) {
    if (options.backend == "auto") {
      return NotFoundError("no loaded collectives plugin serves ", options.device_type,
                           " memory (loaded: ", backends.empty() ? std::string("none") : StrJoin(backends, ", "),
                           "); `weft plugins` lists them, and tools/setup.sh installs Gloo (libgloo-dev) for the "
                           "gloo plugin");
    }
    std::string hint = ClosestMatch(options.backend, backends);
    return NotFoundError("cluster.collectives: no collectives plugin '", options.backend, "' is loaded",
                         hint.empty() ? std::string() : StrCat(" (did you mean '", hint, "'?)"),
                         "; loaded: ", backends.empty() ? std::string("none") : StrJoin(backends, ", "));
  }
  if (!chosen->Serves(options.device_type)) {
    return InvalidArgumentError("collectives plugin '", chosen->table->backend, "' serves ",
                                StrJoin(chosen->device_types, ", "), " memory, not ", options.device_type);
  }

  std::shared_ptr<CollectiveGroup> group(new CollectiveGroup(std::move(options), chosen));
  const CollectiveGroupOptions& o = group->options_;
  std::vector<const char*> names;
  std::vector<const char*> hosts;
  for (int i = 0; i < o.size; ++i) {
    names.push_back(o.rank_names[i].c_str());
    hosts.push_back(o.rank_hosts[i].c_str());
  }
  KvStoreAdapter store(o.store.get());
  weft_comm_args_t args{};
  args.struct_size = sizeof(args);
  args.rank = o.rank;
  args.size = o.size;
  args.rank_names = names.data();
  args.rank_hosts = hosts.data();
  args.key_prefix = o.key_prefix.c_str();
  args.store = store.table();
  args.timeout_ms = o.timeout_ms;
  args.device_type = o.device_type.c_str();
  args.device_ordinal = o.device_ordinal;
  Status created;
  try {
    created = plugin::TakeStatus(chosen->table->comm_create(&args, &group->comm_));
  } catch (...) {
    created = InternalError("comm_create let a C++ exception escape");
  }
  if (!created.ok()) {
    group->comm_ = nullptr;
    std::string diagnosis = o.diagnose ? o.diagnose() : std::string();
    return Status(created.code(),
                  StrCat("collective group '", o.name, "' (", o.rank_names[o.rank], ", rank ", o.rank, " of ", o.size,
                         ") could not join: ", diagnosis.empty() ? std::string() : StrCat(diagnosis, "; "),
                         group->backend_, " said: ", created.message()));
  }
  if (group->comm_ == nullptr) {
    return InternalError("collectives plugin '", group->backend_, "': comm_create returned OK but no communicator");
  }
  return group;
}

CollectiveGroup::CollectiveGroup(CollectiveGroupOptions options, const plugin::CollectivesPlugin* plugin)
    : options_(std::move(options)), plugin_(plugin), backend_(plugin->table->backend) {}

CollectiveGroup::~CollectiveGroup() {
  // Operations still waiting for their turn never get it now.
  bool waiting = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting = !early_.empty();
  }
  if (waiting) Abort(CancelledError("collective group '", options_.name, "' was destroyed"));
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return in_flight_ == 0 && !draining_; });
  }
  if (comm_ != nullptr) plugin_->table->comm_destroy(comm_);
}

void CollectiveGroup::AllReduce(std::optional<OrderKey> key, weft_comm_buffer_t in, weft_comm_buffer_t out,
                                weft_reduction_t reduction, std::function<void(Status)> done) {
  Pending p;
  p.bytes = static_cast<int64_t>(in.count * weft_dtype_size(in.dtype));
  p.what = StrCat("allreduce of ", HumanBytes(p.bytes));
  p.done = std::move(done);
  p.issue = [this, in, out, reduction](uint32_t tag, weft_done_fn fn, void* user) {
    weft_comm_op_t op{sizeof(weft_comm_op_t), tag, nullptr, options_.timeout_ms};
    return plugin_->table->all_reduce(comm_, &op, &in, &out, reduction, fn, user);
  };
  Enqueue(std::move(key), std::move(p));
}

void CollectiveGroup::AllGather(std::optional<OrderKey> key, weft_comm_buffer_t in, weft_comm_buffer_t out,
                                std::function<void(Status)> done) {
  Pending p;
  p.bytes = static_cast<int64_t>(out.count * weft_dtype_size(out.dtype));
  p.what = StrCat("allgather of ", HumanBytes(p.bytes));
  p.done = std::move(done);
  p.issue = [this, in, out](uint32_t tag, weft_done_fn fn, void* user) {
    weft_comm_op_t op{sizeof(weft_comm_op_t), tag, nullptr, options_.timeout_ms};
    return plugin_->table->all_gather(comm_, &op, &in, &out, fn, user);
  };
  Enqueue(std::move(key), std::move(p));
}

void CollectiveGroup::Broadcast(std::optional<OrderKey> key, weft_comm_buffer_t buffer, int root,
                                std::function<void(Status)> done) {
  Pending p;
  p.bytes = static_cast<int64_t>(buffer.count * weft_dtype_size(buffer.dtype));
  p.what = StrCat("broadcast of ", HumanBytes(p.bytes), " from rank ", root);
  p.done = std::move(done);
  p.issue = [this, buffer, root](uint32_t tag, weft_done_fn fn, void* user) {
    weft_comm_op_t op{sizeof(weft_comm_op_t), tag, nullptr, options_.timeout_ms};
    return plugin_->table->broadcast(comm_, &op, &buffer, root, fn, user);
  };
  Enqueue(std::move(key), std::move(p));
}

Status CollectiveGroup::AllReduce(weft_comm_buffer_t buffer, weft_reduction_t reduction) {
  std::promise<Status> promise;
  AllReduce(std::nullopt, buffer, buffer, reduction, [&](Status s) { promise.set_value(std::move(s)); });
  return promise.get_future().get();
}

Status CollectiveGroup::Broadcast(weft_comm_buffer_t buffer, int root) {
  std::promise<Status> promise;
  Broadcast(std::nullopt, buffer, root, [&](Status s) { promise.set_value(std::move(s)); });
  return promise.get_future().get();
}

void CollectiveGroup::Enqueue(std::optional<OrderKey> key, Pending pending) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!failed_.ok()) {
    Status failed = failed_;
    lock.unlock();
    pending.done(failed);
    return;
  }
  if (!key) {
    ready_.push_back(std::move(pending));
  } else {
    if (key->round_size < 1 || key->order < 0 || key->order >= key->round_size) {
      lock.unlock();
      // A round missing an operation can never complete: everything fails.
      Abort(InvalidArgumentError("collective order ", key->order, " of round '", key->round, "' (size ",
                                 key->round_size, ") is out of range"));
      pending.done(InvalidArgumentError("collective order ", key->order, " of round '", key->round, "' (size ",
                                        key->round_size, ") is out of range"));
      return;
    }
    if (round_.empty()) {
      round_ = key->round;
      round_size_ = key->round_size;
      next_order_ = 0;
    } else if (round_ != key->round || round_size_ != key->round_size) {
      const Status refused = FailedPreconditionError(
          "collective round '", key->round, "' (", key->round_size, " ops) started while round '", round_, "' (",
          round_size_, " ops) is incomplete: two graphs with collectives must not run at once in group '",
          options_.name, "'");
      lock.unlock();
      Abort(refused);
      pending.done(refused);
      return;
    }
    if (key->order < next_order_ || early_.count(key->order) > 0) {
      lock.unlock();
      Abort(InternalError("collective order ", key->order, " of round '", key->round, "' was issued twice"));
      pending.done(
          InternalError("collective order ", key->order, " of round '", key->round, "' was issued twice in one pass"));
      return;
    }
    early_.emplace(key->order, std::move(pending));
    for (auto it = early_.find(next_order_); it != early_.end(); it = early_.find(next_order_)) {
      ready_.push_back(std::move(it->second));
      early_.erase(it);
      if (++next_order_ == round_size_) {
        round_.clear();
        next_order_ = 0;
        break;
      }
    }
  }
  Drain(lock);
}

void CollectiveGroup::Drain(std::unique_lock<std::mutex>& lock) {
  if (draining_) return;
  draining_ = true;
  while (!ready_.empty()) {
    Pending p = std::move(ready_.front());
    ready_.erase(ready_.begin());
    if (!failed_.ok()) {
      Status failed = failed_;
      lock.unlock();
      p.done(failed);
      lock.lock();
      continue;
    }
    const uint32_t tag = issued_++;
    ++in_flight_;
    auto op = std::make_unique<InFlight>(InFlight{this, std::move(p.done), std::move(p.what), p.bytes, Clock::now()});
    InFlight* raw = op.get();
    lock.unlock();
    Status issued;
    try {
      issued = plugin::TakeStatus(p.issue(tag, &CollectiveGroup::OnDone, raw));
    } catch (...) {
      issued = InternalError("the collectives plugin let a C++ exception escape");
    }
    if (issued.ok()) {
      op.release();  // OnDone owns it now
    } else {
      Finish(std::move(op), issued);
    }
    lock.lock();
  }
  draining_ = false;
  idle_.notify_all();
}

void CollectiveGroup::OnDone(void* user, weft_status_t status) {
  std::unique_ptr<InFlight> op(static_cast<InFlight*>(user));
  CollectiveGroup* group = op->group;
  group->Finish(std::move(op), plugin::TakeStatus(status));
}

void CollectiveGroup::Finish(std::unique_ptr<InFlight> op, Status status) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - op->start).count();
  if (!status.ok()) {
    // Close the links first, so that the peers fail at once; then find out
    // which peer is gone (pings that take up to a second each) for the
    // message.
    const bool first = AbortFirst(status);
    status = first ? Failure(status, op->what) : this->status();
    if (first) {
      std::lock_guard<std::mutex> lock(mutex_);
      failed_ = status;
    }
  }
  std::function<void(Status)> done = std::move(op->done);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (status.ok()) {
      stats_.ops += 1;
      stats_.bytes += op->bytes;
      stats_.busy_ms += ms;
    }
  }
  op.reset();
  done(status);
  std::lock_guard<std::mutex> lock(mutex_);
  --in_flight_;
  idle_.notify_all();
}

Status CollectiveGroup::Failure(const Status& plugin_status, const std::string& what) {
  std::string diagnosis = options_.diagnose ? options_.diagnose() : std::string();
  return Status(
      plugin_status.code() == Code::kOk ? Code::kInternal : plugin_status.code(),
      StrCat(what, " in group '", options_.name, "' (", options_.rank_names[options_.rank], ", rank ", options_.rank,
             " of ", options_.size, ") failed: ", diagnosis.empty() ? std::string() : StrCat(diagnosis, "; "), backend_,
             " said: ", plugin_status.message()));
}

void CollectiveGroup::Abort(const Status& why) { AbortFirst(why); }

bool CollectiveGroup::AbortFirst(const Status& why) {
  std::vector<Pending> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_.ok()) return false;
    failed_ = why.ok() ? AbortedError("collective group '", options_.name, "' was aborted") : why;
    for (auto& [order, p] : early_) waiting.push_back(std::move(p));
    early_.clear();
    round_.clear();
  }
  if (plugin_->table->comm_abort != nullptr && comm_ != nullptr) {
    try {
      plugin_->table->comm_abort(comm_, std::string(why.message()).c_str());
    } catch (...) {
      WEFT_LOG(ERROR) << "collectives plugin '" << backend_ << "': comm_abort let a C++ exception escape";
    }
  }
  Status failed = status();
  for (Pending& p : waiting) p.done(failed);
  return true;
}

Status CollectiveGroup::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

CollectiveGroup::Stats CollectiveGroup::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

// --- The registry -----------------------------------------------------------

namespace {

struct Groups {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<CollectiveGroup>, std::less<>> by_name;
};

Groups& AllGroups() {
  static auto* groups = new Groups();
  return *groups;
}

}  // namespace

Status RegisterCollectiveGroup(std::shared_ptr<CollectiveGroup> group) {
  Groups& groups = AllGroups();
  std::lock_guard<std::mutex> lock(groups.mutex);
  const std::string name = group->options().name;
  if (!groups.by_name.emplace(name, std::move(group)).second) {
    return AlreadyExistsError("a collective group named '", name, "' is already set up in this process");
  }
  return Status();
}

std::shared_ptr<CollectiveGroup> FindCollectiveGroup(std::string_view name) {
  Groups& groups = AllGroups();
  std::lock_guard<std::mutex> lock(groups.mutex);
  auto it = groups.by_name.find(name);
  return it == groups.by_name.end() ? nullptr : it->second;
}

void UnregisterCollectiveGroup(std::string_view name) {
  std::shared_ptr<CollectiveGroup> group;
  {
    Groups& groups = AllGroups();
    std::lock_guard<std::mutex> lock(groups.mutex);
    auto it = groups.by_name.find(name);
    if (it == groups.by_name.end()) return;
    group = std::move(it->second);
    groups.by_name.erase(it);
  }
}

}  // namespace weft::runtime
