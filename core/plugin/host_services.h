// The services table (weft_host_t) the core hands every plugin, and the
// bridge between the ABI's opaque statuses and weft::Status.
//
// There is one table per process. Its thread pool for parallel_for is sized
// by ConfigureHostServices from [runtime]; until then it uses the cores the
// process may run on.
#ifndef WEFT_CORE_PLUGIN_HOST_SERVICES_H_
#define WEFT_CORE_PLUGIN_HOST_SERVICES_H_

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "weft/weft_plugin.h"

namespace weft::plugin {

// The process's services table. Never null; valid for the life of the
// process.
const weft_host_t* HostTable();

// Sizes the intra-op pool behind parallel_for: |intra_op_threads| threads
// in all (the caller counts as one). Takes effect for later calls.
void ConfigureHostServices(int intra_op_threads);

// The number of threads parallel_for uses now.
int IntraOpThreads();

// Offers kernel (and later graph-building) services in the host table from
// now on; the runtime calls this before it runs any kernel. Plugins read
// weft_host_t.kernel when they need it, so setting it late is fine.
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
