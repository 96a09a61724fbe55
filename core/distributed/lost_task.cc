#include "core/distributed/lost_task.h"

#include "core/base/strings.h"

namespace weft::dist {
namespace {

// What the RPC layer (core/distributed/rpc.cc) and the heartbeats
// (core/distributed/heartbeat.cc) say of a task they lost, after "task NAME (ADDR)".
constexpr std::string_view kClosed = " closed the connection";
constexpr std::string_view kSilent = " has not answered for ";
constexpr std::string_view kTask = "task /job:";

// How LostTaskError leads.
constexpr std::string_view kWasLost = ") was lost: ";

// The longest "what failed" chain shown after the cause.
constexpr std::size_t kChainChars = 240;

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Whether LostTaskError told |status|: UNAVAILABLE whose first line is
// "/job:... (ADDR) was lost: ...". Its "what failed" may quote the cause
// again (heartbeats that timed out), which must not be told a second time.
bool AlreadyTold(const Status& status) {
  if (status.code() != Code::kUnavailable) return false;
  const std::string_view text = status.message();
  const std::string_view first = text.substr(0, text.find('\n'));
  return first.starts_with("/job:") && first.find(kWasLost) != std::string_view::npos;
}

}  // namespace

std::optional<LostTask> FindLostTask(const Status& status) {
  if (status.ok()) return std::nullopt;
  const std::string_view text = status.message();
  std::optional<LostTask> found;
  // The last report in the chain is the cause; earlier ones are contexts.
  for (std::size_t at = text.find(kTask); at != std::string_view::npos; at = text.find(kTask, at + 1)) {
    const std::size_t name_begin = at + 5;  // after "task "
    const std::size_t open = text.find(" (", name_begin);
    if (open == std::string_view::npos) break;
    const std::string_view name = text.substr(name_begin, open - name_begin);
    if (name.find(' ') != std::string_view::npos) continue;
    const std::size_t close = text.find(')', open + 2);
    if (close == std::string_view::npos) break;
    const std::string_view address = text.substr(open + 2, close - open - 2);
    const std::string_view rest = text.substr(close + 1);
    LostTask lost{std::string(name), std::string(address), ""};
    // A close during the handshake is a refusal (a secret, TLS, a flood),
    // not a loss.
    if (rest.starts_with(kClosed) && !rest.substr(kClosed.size()).starts_with(" during")) {
      lost.how = "it closed the connection (its process ended or was killed, or the link to it broke)";
    } else if (rest.starts_with(kSilent)) {
      // "has not answered for 10.0 s ([cluster] heartbeat_timeout_ms = 10000)"
      std::size_t end = rest.find(')');
      end = end == std::string_view::npos ? rest.size() : end + 1;
      lost.how = StrCat("it", rest.substr(0, end), ": hung, killed, or cut off");
    } else {
      continue;
    }
    found = std::move(lost);
  }
  return found;
}

std::string ShortenMiddle(std::string_view text, std::size_t max_chars) {
  if (text.size() <= max_chars || max_chars < 16) return std::string(text);
  std::size_t head = max_chars / 2 - 3;
  std::size_t tail = text.size() - (max_chars - head - 5);
  while (head > 0 && IsContinuationByte(text[head])) --head;
  while (tail < text.size() && IsContinuationByte(text[tail])) ++tail;
  return StrCat(text.substr(0, head), " ... ", text.substr(tail));
}

Status LostTaskError(const LostTask& lost, std::string_view what_to_do, std::string_view what_failed) {
  std::string text = StrCat(lost.task, " (", lost.address, kWasLost, lost.how, ".");
  if (!what_to_do.empty()) text += StrCat("\n", what_to_do);
  if (!what_failed.empty()) text += StrCat("\n(what failed: ", ShortenMiddle(what_failed, kChainChars), ")");
  return UnavailableError(text);
}

Status ExplainLostTask(const Status& status, std::string_view what_to_do) {
  if (AlreadyTold(status)) return status;
  const std::optional<LostTask> lost = FindLostTask(status);
  if (!lost.has_value()) return status;
  return LostTaskError(*lost, what_to_do, status.message());
}

bool IsLostTask(const Status& status) { return AlreadyTold(status) || FindLostTask(status).has_value(); }

}  // namespace weft::dist
