#include "core/distributed/kv_store.h"

#include <algorithm>
#include <chrono>
#include <future>

#include "core/base/strings.h"

namespace weft::dist {
namespace {

// A get's own deadline comes first; the RPC's allows for the trip.
constexpr int64_t kTripMarginMs = 5000;

}  // namespace

KvStoreService::~KvStoreService() { Close(CancelledError("the store of ", owner_, " is shutting down")); }

bool KvStoreService::Collect(const std::vector<std::string>& keys, std::vector<std::string>* values) const {
  values->clear();
  for (const std::string& key : keys) {
    auto it = values_.find(key);
    if (it == values_.end()) return false;
    values->push_back(it->second);
  }
  return true;
}

void KvStoreService::Serve(std::vector<std::string> keys, int64_t wait_ms, Answer answer) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!closed_.ok()) {
    Status closed = closed_;
    lock.unlock();
    answer(closed, {});
    return;
  }
  std::vector<std::string> values;
  if (Collect(keys, &values)) {
    lock.unlock();
    answer(Status(), std::move(values));
    return;
  }
  auto waiter = std::make_shared<Waiter>();
  waiter->keys = std::move(keys);
  waiter->answer = std::move(answer);
  waiter->wait_ms = std::clamp<int64_t>(wait_ms, 0, kMaxKvWaitMs);
  waiters_.push_back(waiter);
  // The timer may fire before Schedule returns; Expire takes the lock, so
  // it waits until the id is stored.
  std::weak_ptr<Waiter> weak = waiter;
  std::weak_ptr<KvStoreService> self = weak_from_this();
  waiter->timer = runtime::Timer::Global().Schedule(
      std::chrono::steady_clock::now() + std::chrono::milliseconds(waiter->wait_ms), [self, weak] {
        auto store = self.lock();
        auto w = weak.lock();
        if (store != nullptr && w != nullptr) store->Expire(w);
      });
}

void KvStoreService::Expire(const std::shared_ptr<Waiter>& waiter) {
  std::vector<std::string> missing;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find(waiters_.begin(), waiters_.end(), waiter);
    if (it == waiters_.end()) return;  // answered meanwhile
    waiters_.erase(it);
    for (const std::string& key : waiter->keys) {
      if (values_.find(key) == values_.end()) missing.push_back(Quote(key));
    }
  }
  waiter->answer(Status(Code::kDeadlineExceeded, StrCat("rendezvous at ", owner_, ": ", StrJoin(missing, ", "),
                                                        " did not appear within ", waiter->wait_ms, " ms")),
                 {});
}

void KvStoreService::Close(const Status& why) {
  Waiters waiters;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_.ok()) closed_ = why.ok() ? CancelledError("the store of ", owner_, " is closed") : why;
    waiters.swap(waiters_);
  }
  for (const auto& w : waiters) {
    runtime::Timer::Global().Cancel(w->timer);
    w->answer(closed_, {});
  }
}

Status KvStoreService::Set(const std::string& key, std::string value) {
  std::vector<std::pair<std::shared_ptr<Waiter>, std::vector<std::string>>> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!closed_.ok()) return closed_;
    values_[key] = std::move(value);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      std::vector<std::string> values;
      if (std::find((*it)->keys.begin(), (*it)->keys.end(), key) != (*it)->keys.end() &&
          Collect((*it)->keys, &values)) {
        ready.emplace_back(*it, std::move(values));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [waiter, values] : ready) {
    runtime::Timer::Global().Cancel(waiter->timer);
    waiter->answer(Status(), std::move(values));
  }
  return Status();
}

Expected<std::string> KvStoreService::Get(const std::string& key, int64_t timeout_ms) {
  std::promise<Expected<std::string>> promise;
  Serve({key}, timeout_ms, [&](Status status, std::vector<std::string> values) {
    if (!status.ok()) {
      promise.set_value(std::move(status));
    } else {
      promise.set_value(std::move(values[0]));
    }
  });
  return promise.get_future().get();
}

Status KvStoreService::Wait(const std::vector<std::string>& keys, int64_t timeout_ms) {
  std::promise<Status> promise;
  Serve(keys, timeout_ms, [&](Status status, std::vector<std::string>) { promise.set_value(std::move(status)); });
  return promise.get_future().get();
}

Status RemoteKvStore::Set(const std::string& key, std::string value) {
  Request request;
  request.method = Method::kKvSet;
  request.kv_keys = {key};
  request.kv_value = std::move(value);
  return rpc_->CallSync(peer_, std::move(request), rpc_timeout_ms_).status();
}

Expected<std::vector<std::string>> RemoteKvStore::GetAll(const std::vector<std::string>& keys, int64_t timeout_ms) {
  Request request;
  request.method = Method::kKvGet;
  request.kv_keys = keys;
  const int64_t wait_ms = std::clamp<int64_t>(timeout_ms, 0, kMaxKvWaitMs);
  request.kv_wait_ms = wait_ms;
  WEFT_ASSIGN_OR_RETURN(Response response, rpc_->CallSync(peer_, std::move(request), wait_ms + kTripMarginMs));
  if (response.kv_values.size() != keys.size()) {
    return DataLossError(peer_.name, " answered a get of ", keys.size(), " keys with ", response.kv_values.size(),
                         " values");
  }
  return std::move(response.kv_values);
}

Expected<std::string> RemoteKvStore::Get(const std::string& key, int64_t timeout_ms) {
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> values, GetAll({key}, timeout_ms));
  return std::move(values[0]);
}

Status RemoteKvStore::Wait(const std::vector<std::string>& keys, int64_t timeout_ms) {
  return GetAll(keys, timeout_ms).status();
}

}  // namespace weft::dist
