#include "core/runtime/cancellation.h"

#include <utility>

namespace weft::runtime {

void CancellationManager::StartCancel() {
  std::map<Token, std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
    callbacks.swap(callbacks_);
  }
  for (auto& [token, callback] : callbacks) callback();
}

bool CancellationManager::IsCancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

CancellationManager::Token CancellationManager::Register(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cancelled_) return kInvalidToken;
  const Token token = next_++;
  callbacks_.emplace(token, std::move(callback));
  return token;
}

bool CancellationManager::Deregister(Token token) {
  std::lock_guard<std::mutex> lock(mutex_);
  return callbacks_.erase(token) != 0;
}

}  // namespace weft::runtime
