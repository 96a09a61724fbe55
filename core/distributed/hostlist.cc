#include "core/distributed/hostlist.h"

#include <algorithm>

namespace weft::dist {
namespace {

// |text| as a number when it is 1 to 18 digits.
bool ParseDigits(std::string_view text, uint64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = value;
  return true;
}

std::string Padded(uint64_t value, size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Splits |text| at the commas outside brackets, checking that brackets
// pair up and do not nest.
Expected<std::vector<std::string_view>> SplitEntries(std::string_view text) {
  std::vector<std::string_view> entries;
  size_t start = 0;
  bool open = false;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : ',';
    if (c == '[') {
      if (open) {
        return InvalidArgumentError("entry ", Quote(text.substr(start, text.find(',', i) - start)),
                                    " has a '[' inside brackets");
      }
      open = true;
    } else if (c == ']') {
      if (!open) {
        return InvalidArgumentError("entry ", Quote(text.substr(start, text.find(',', i) - start)),
                                    " has a ']' without '['");
      }
      open = false;
    } else if (c == ',' && (!open || i == text.size())) {
      if (open) return InvalidArgumentError("entry ", Quote(text.substr(start)), " has a '[' without ']'");
      std::string_view entry = text.substr(start, i - start);
      if (entry.empty()) {
        return InvalidArgumentError("entry ", entries.size() + 1, " is empty (two commas, or a comma at an end)");
      }
      entries.push_back(entry);
      start = i + 1;
    }
  }
  return entries;
}

// The values of one bracket's contents ("01-04,07").
Expected<std::vector<std::string>> ExpandBracket(std::string_view entry, std::string_view contents) {
  if (contents.empty()) return InvalidArgumentError("entry ", Quote(entry), " has empty brackets");
  std::vector<std::string> values;
  for (const std::string& range : StrSplit(contents, ',')) {
    const auto dash = range.find('-');
    const std::string lo_text = range.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : range.substr(dash + 1);
    uint64_t lo = 0;
    uint64_t hi = 0;
    if (!ParseDigits(lo_text, &lo) || !ParseDigits(hi_text, &hi)) {
      return InvalidArgumentError("entry ", Quote(entry), ": ", Quote(range),
                                  " is not a number or a range lo-hi of numbers");
    }
    if (hi < lo) return InvalidArgumentError("entry ", Quote(entry), ": the range ", Quote(range), " goes down");
    if (hi - lo >= kMaxHostlistSize || values.size() + (hi - lo + 1) > kMaxHostlistSize) {
      return InvalidArgumentError("entry ", Quote(entry), " expands to more than ", kMaxHostlistSize, " hosts");
    }
    for (uint64_t v = lo; v <= hi; ++v) values.push_back(Padded(v, lo_text.size()));
  }
  return values;
}

}  // namespace

Expected<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  if (hostlist.empty()) return InvalidArgumentError("the list is empty");
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string_view> entries, SplitEntries(hostlist));
  std::vector<std::string> hosts;
  for (std::string_view entry : entries) {
    // The entry as a sequence of parts, each a list of alternatives: text
    // outside brackets has one, a bracket has its values.
    std::vector<std::vector<std::string>> parts;
    size_t pos = 0;
    while (pos < entry.size()) {
      const size_t open = entry.find('[', pos);
      if (open != pos) {
        parts.push_back({std::string(entry.substr(pos, open - pos))});
        if (open == std::string_view::npos) break;
      }
      const size_t close = entry.find(']', open);
      WEFT_ASSIGN_OR_RETURN(std::vector<std::string> values,
                            ExpandBracket(entry, entry.substr(open + 1, close - open - 1)));
      parts.push_back(std::move(values));
      pos = close + 1;
    }
    size_t count = 1;
    for (const auto& part : parts) {
      count *= part.size();
      if (count + hosts.size() > kMaxHostlistSize) {
        return InvalidArgumentError("entry ", Quote(entry), " expands to more than ", kMaxHostlistSize, " hosts");
      }
    }
    // Odometer over the parts, the last varying fastest.
    std::vector<size_t> index(parts.size(), 0);
    for (size_t n = 0; n < count; ++n) {
      std::string host;
      for (size_t p = 0; p < parts.size(); ++p) host += parts[p][index[p]];
      hosts.push_back(std::move(host));
      for (size_t p = parts.size(); p-- > 0;) {
        if (++index[p] < parts[p].size()) break;
        index[p] = 0;
      }
    }
  }
  return hosts;
}

Expected<std::vector<int64_t>> ParseTasksPerNode(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("the list is empty");
  std::vector<int64_t> counts;
  for (const std::string& entry : StrSplit(text, ',')) {
    const auto paren = entry.find('(');
    uint64_t count = 0;
    uint64_t repeat = 1;
    const bool ok = paren == std::string::npos
                        ? ParseDigits(entry, &count)
                        : ParseDigits(entry.substr(0, paren), &count) && entry.ends_with(")") &&
                              entry.compare(paren, 2, "(x") == 0 &&
                              ParseDigits(std::string_view(entry).substr(paren + 2, entry.size() - paren - 3), &repeat);
    if (!ok) return InvalidArgumentError("entry ", Quote(entry), " is not a count N or N(xM) (M nodes of N tasks)");
    if (count < 1 || repeat < 1) return InvalidArgumentError("entry ", Quote(entry), " has a count of 0");
    if (counts.size() + repeat > kMaxHostlistSize) {
      return InvalidArgumentError("entry ", Quote(entry), " gives more than ", kMaxHostlistSize, " nodes");
    }
    counts.insert(counts.end(), repeat, static_cast<int64_t>(count));
  }
  return counts;
}

}  // namespace weft::dist
