// Incarnations: which start of a task a message comes from or is meant for
// (docs/distributed.md, "Restarts and incarnations").
//
// Every process of a cluster draws one incarnation when it starts, and its
// task service, its client session and its heartbeats all use it. A
// request carries the incarnation of the task it means to reach (the one
// that registered its graph); a response carries the responder's. A task
// refuses a request meant for an earlier start of itself, and a request
// from an earlier start of its caller, with ABORTED and a sentence that
// names both incarnations: state from before a restart is gone, and a
// message from a process that should be gone must change nothing.
//
// Incarnations are ordered by start time (milliseconds since the epoch in
// the high 48 bits, 16 random bits below), so that a zombie (a stopped
// process that resumes) can be told from its replacement.
#ifndef WEFT_CORE_DIST_INCARNATION_H_
#define WEFT_CORE_DIST_INCARNATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace weft::dist {

// A new incarnation, never 0; one drawn later compares greater (across
// machines, as far as their clocks agree).
uint64_t NewIncarnation();
// "18f3a2c41b2e-7d10": the start time in hex ms, then the random bits.
std::string FormatIncarnation(uint64_t incarnation);
// How long ago an incarnation drawn by NewIncarnation started: "2.1 s",
// "3m12s"; empty when it does not look like one (a test's made-up number).
std::string IncarnationAge(uint64_t incarnation);

// The refusal of a request meant for |expected|, by |task| at |address|,
// now incarnation |actual|.
Status RestartedTaskError(const std::string& task, const std::string& address, uint64_t actual, uint64_t expected,
                          const std::string& caller);
// The refusal of a request from |caller| incarnation |old|, since |newest|
// said Hello.
Status OlderCallerError(const std::string& task, const std::string& method, const std::string& caller, uint64_t old,
                        uint64_t newest);
// The phrases IsStaleIncarnation looks for.
inline constexpr std::string_view kRestartedPhrase = " was restarted: it is incarnation ";
inline constexpr std::string_view kOlderPhrase = " from an older incarnation ";
// Whether |status| is one of the two refusals above (a step that met a
// restarted task; the client registers its graph again before the next).
bool IsStaleIncarnation(const Status& status);

// Whether this is the first time this process hears that |task| runs as
// |incarnation| after an earlier one: the RPC layer, the heartbeats of the
// task service and of the client session all notice a restart, and only
// the first of them logs it at INFO (the others at DEBUG), so that one
// restart is one line. Thread-safe.
bool FirstToSeeRestart(const std::string& task, uint64_t incarnation);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_INCARNATION_H_
