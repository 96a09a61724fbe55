// Lets GoogleTest print a Status (code and message) where an EXPECT on one
// fails, instead of its bytes: include it in tests that compare statuses.
#ifndef WEFT_TESTS_SUPPORT_STATUS_PRINTER_H_
#define WEFT_TESTS_SUPPORT_STATUS_PRINTER_H_

#include <ostream>

#include "core/base/status.h"

namespace weft {

// Found by argument-dependent lookup: it must be in Status's namespace.
inline void PrintTo(const Status& status, std::ostream* out) { *out << status.ToString(); }

}  // namespace weft

#endif  // WEFT_TESTS_SUPPORT_STATUS_PRINTER_H_
