// Cancellation of one step: ops that wait (an async kernel parked on a
// queue) register a callback that wakes them, and the executor runs every
// callback when the step is cancelled — by its first error or by its
// deadline — so no cancelled step waits forever.
//
//   CancellationManager::Token token = step.cancellation.Register([w] { w->Wake(); });
//   if (token == CancellationManager::kInvalidToken) { /* already cancelled: give up now */ }
//   ...
//   step.cancellation.Deregister(token);  // finished normally
#ifndef WEFT_CORE_RUNTIME_CANCELLATION_H_
#define WEFT_CORE_RUNTIME_CANCELLATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace weft::runtime {

class CancellationManager {
 public:
  using Token = int64_t;
  static constexpr Token kInvalidToken = -1;

  // Marks the manager cancelled and runs every registered callback once,
  // on this thread, with no lock held (a callback may register, deregister
  // or complete other work). Later calls do nothing.
  void StartCancel();
  bool IsCancelled() const;

  // Keeps |callback| to run when the manager is cancelled. Returns its
  // token, or kInvalidToken when the manager is already cancelled: then
  // the callback is dropped unrun and the caller must react itself.
  Token Register(std::function<void()> callback);
  // Drops the callback of |token|. True when it was dropped before it ran;
  // false when cancellation has already taken it (it ran, or is running on
  // another thread), or for kInvalidToken.
  bool Deregister(Token token);

 private:
  mutable std::mutex mutex_;
  bool cancelled_ = false;
  Token next_ = 0;
  std::map<Token, std::function<void()>> callbacks_;
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_CANCELLATION_H_
