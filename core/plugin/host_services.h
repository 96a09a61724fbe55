// The services table (weft_host_t) the core hands every plugin, and the
// bridge between the ABI's opaque statuses and weft::Status.
//
// There is one table per process, built once and never changed after a
// plugin first sees it: its kernel and graph services forward to the
// runtime's and the trainer's, which offer them once they start
// (SetKernelServices, SetGraphServices).
//
// parallel_for and intra_op_threads answer for the thread calling them:
// a session runs its kernels with its own intra-op pool in scope
// (ScopedIntraOpPool), so two sessions with different thread counts in one
// process each keep theirs; outside any scope they use the process's
// default pool, one thread per core the process may run on.
#ifndef WEFT_CORE_PLUGIN_HOST_SERVICES_H_
#define WEFT_CORE_PLUGIN_HOST_SERVICES_H_

#include <memory>

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "weft/weft_plugin.h"

namespace weft::plugin {

// The process's services table. Never null; valid for the life of the
// process.
const weft_host_t* HostTable();

// A pool of threads for kernels' parallel loops: |threads()| in all (the
// calling thread counts as one).
class IntraOpPool;
int Threads(const IntraOpPool& pool);

// The pool of |threads| threads (at least 1), shared by everything that
// asks for that many while one is alive.
std::shared_ptr<const IntraOpPool> IntraOpPoolFor(int threads);

// While alive, parallel_for and intra_op_threads on this thread use |pool|
// (nullptr: the process's default pool). Scopes nest.
class ScopedIntraOpPool {
 public:
  explicit ScopedIntraOpPool(const IntraOpPool* pool);
  ~ScopedIntraOpPool();
  ScopedIntraOpPool(const ScopedIntraOpPool&) = delete;
  ScopedIntraOpPool& operator=(const ScopedIntraOpPool&) = delete;

 private:
  const IntraOpPool* previous_;
};

// The number of threads parallel_for uses on this thread now.
int IntraOpThreads();

// Where the host table's kernel and graph services forward to, from now
// on; the runtime (the trainer) calls this before it runs a kernel (builds
// an update). Set once per process, to the same table each time.
void SetKernelServices(const weft_kernel_api_t* kernel);
void SetGraphServices(const weft_graph_api_t* graph);

// Takes ownership of |status| (NULL is OK) and converts it.
Status TakeStatus(weft_status_t status);

// A new ABI status carrying |status|'s code and message (NULL for OK). The
// caller owns it.
weft_status_t MakeStatus(const Status& status);

// The opaque weft_options_t handed to plugins is an OptionValues.
inline const weft_options_t* AsOptionsHandle(const config::OptionValues* values) {
  return reinterpret_cast<const weft_options_t*>(values);
}

}  // namespace weft::plugin

#endif  // WEFT_CORE_PLUGIN_HOST_SERVICES_H_
