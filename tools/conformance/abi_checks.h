// The device ABI checks of the conformance kit: a device plugin's table
// called directly, as the host would, each contract of weft/weft_device.h
// that can be observed from outside checked with data the check chooses.
#ifndef WEFT_TOOLS_CONFORMANCE_ABI_CHECKS_H_
#define WEFT_TOOLS_CONFORMANCE_ABI_CHECKS_H_

#include <string>
#include <vector>

#include "core/plugin/device_plugin.h"

namespace weft::conformance {

struct AbiResult {
  std::string device;
  std::string check;  // "copies", "streams and events", ...
  std::string what;   // one line: what was checked
  std::string error;  // empty: passed
};

// Runs every check on |device|, which stays usable afterwards: each check
// releases what it made. A check stops at its first failure.
std::vector<AbiResult> RunAbiChecks(const plugin::Device& device);

}  // namespace weft::conformance

#endif  // WEFT_TOOLS_CONFORMANCE_ABI_CHECKS_H_
