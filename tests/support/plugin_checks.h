// Checks shared by the tests of real plugin files (the GPU devices, the
// rdma transport): what the file exports and links, the reason a plugin
// gives in `weft plugins`, and a completion callback of the C ABI to wait
// for.
#ifndef WEFT_TESTS_SUPPORT_PLUGIN_CHECKS_H_
#define WEFT_TESTS_SUPPORT_PLUGIN_CHECKS_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "weft/weft_plugin.h"

namespace weft::testing {

// Checks, with the binutils |nm| and |readelf|, that the plugin |file|
// exports its entry point weft_plugin_init_v1 and nothing else, and does
// not link libweft (plugins see the SDK only). Returns readelf's listing of
// the dynamic section for more checks ("" when a tool failed).
std::string ExpectOnlyTheEntryPointExported(const std::string& nm, const std::string& readelf, const std::string& file);

// readelf's listing of the dynamic section of |file| (the libraries it
// needs), asking the binutils |readelf|; "" (and a failure) when it fails.
std::string DynamicSection(const std::string& readelf, const std::string& file);

// Checks that in strict mode ([plugins] strict = true) an isolated host
// lists the plugin |file|, which cannot serve on this machine, as
// unavailable rather than refusing it.
void ExpectStrictModeLeavesItUnavailable(const std::string& file);

// What follows |prefix| in |out| up to the end of that line, or nothing
// when |out| has no |prefix|.
std::optional<std::string> RestOfLine(const std::string& out, const std::string& prefix);

// A done callback of the C ABI (void (*)(void* user, weft_status_t)): pass
// Done::Call with the object as |user|, then wait for it.
class Done {
 public:
  static void Call(void* user, weft_status_t status);
  // Waits for the call; returns the status it was given ("OK" or the
  // status's ToString()).
  std::string Wait();
  // Waits at most |timeout|; false when the call did not come.
  bool WaitFor(std::chrono::milliseconds timeout);
  std::string status() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool called_ = false;
  std::string status_;
};

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_PLUGIN_CHECKS_H_
