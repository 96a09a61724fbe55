#include "core/distributed/incarnation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>

namespace weft::dist {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

uint64_t NewIncarnation() {
  std::random_device entropy;
  const uint64_t ms = static_cast<uint64_t>(NowMs()) & ((uint64_t{1} << 48) - 1);
  uint64_t value = 0;
  while (value == 0) value = (ms << 16) | (entropy() & 0xffffu);
  return value;
}

std::string FormatIncarnation(uint64_t incarnation) {
  char text[32];
  std::snprintf(text, sizeof(text), "%llx-%04llx", static_cast<unsigned long long>(incarnation >> 16),
                static_cast<unsigned long long>(incarnation & 0xffffu));
  return text;
}

std::string IncarnationAge(uint64_t incarnation) {
  const int64_t started = static_cast<int64_t>(incarnation >> 16);
  const int64_t age = NowMs() - started;
  // Before 2020 or in the future by more than a minute: not a start time.
  if (started < int64_t{1577836800000} || age < -60000) return {};
  const int64_t ms = std::max<int64_t>(age, 0);
  char text[48];
  if (ms < 60000) {
    std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3600000) {
    std::snprintf(text, sizeof(text), "%lldm%02llds", static_cast<long long>(ms / 60000),
                  static_cast<long long>(ms / 1000 % 60));
  } else {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", static_cast<long long>(ms / 3600000),
                  static_cast<long long>(ms / 60000 % 60));
  }
  return text;
}

Status RestartedTaskError(const std::string& task, const std::string& address, uint64_t actual, uint64_t expected,
                          const std::string& caller) {
  const std::string age = IncarnationAge(actual);
  return Status(Code::kAborted,
                StrCat(task, " (", address, ")", kRestartedPhrase, FormatIncarnation(actual),
                       age.empty() ? std::string() : StrCat(" (up ", age, ")"), ", not ", FormatIncarnation(expected),
                       ", to which ", caller, " registered this graph; its graphs, steps and variables from before ",
                       "are gone (the client registers the graph again before its next step; variables come back ",
                       "from a checkpoint: [cluster] recovery = \"auto\", or start the chief again with --resume)"));
}

Status OlderCallerError(const std::string& task, const std::string& method, const std::string& caller, uint64_t old,
                        uint64_t newest) {
  return Status(Code::kAborted,
                StrCat(task, " refuses ", method, " from ", caller, kOlderPhrase, FormatIncarnation(old),
                       ": that task has started again since (incarnation ", FormatIncarnation(newest),
                       "), so this message is from a process that should be gone"));
}

bool IsStaleIncarnation(const Status& status) {
  if (status.code() != Code::kAborted) return false;
  const std::string& m = status.message();
  return m.find(kRestartedPhrase) != std::string::npos || m.find(kOlderPhrase) != std::string::npos;
}

bool FirstToSeeRestart(const std::string& task, uint64_t incarnation) {
  static std::mutex mutex;
  static std::map<std::string, uint64_t>* seen = new std::map<std::string, uint64_t>();  // never freed: no exit order
  std::lock_guard<std::mutex> lock(mutex);
  uint64_t& last = (*seen)[task];
  if (last == incarnation) return false;
  last = incarnation;
  return true;
}

}  // namespace weft::dist
