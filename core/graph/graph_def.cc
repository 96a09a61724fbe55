#include "core/graph/graph_def.h"

#include <charconv>

namespace weft {

Expected<InputRef> ParseInputRef(std::string_view input) {
  InputRef ref;
  if (!input.empty() && input[0] == '^') {
    ref.node = std::string(input.substr(1));
    ref.index = -1;
    if (ref.node.empty()) return InvalidArgumentError("control input ", Quote(input), " names no node");
    return ref;
  }
  const auto colon = input.rfind(':');
  if (colon == std::string_view::npos) {
    ref.node = std::string(input);
  } else {
    ref.node = std::string(input.substr(0, colon));
    const std::string_view digits = input.substr(colon + 1);
    int index = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || index < 0) {
      return InvalidArgumentError("input ", Quote(input), " is not 'node', 'node:k' or '^node'");
    }
    ref.index = index;
  }
  if (ref.node.empty()) return InvalidArgumentError("input ", Quote(input), " names no node");
  return ref;
}

std::string InputRefString(std::string_view node, int index) {
  if (index < 0) return StrCat("^", node);
  if (index == 0) return std::string(node);
  return StrCat(node, ":", index);
}

}  // namespace weft
