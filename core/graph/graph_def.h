// The serialisable form of a graph, exactly what .wg and .wgt files hold:
// nodes {name, op, inputs, requested device, attrs} plus a function library
// and the versions that say who may read it.
//
// Inputs are "node" or "node:k" for output k of a node (data edges), and
// "^node" for a control edge (run after node).
#ifndef WEFT_CORE_GRAPH_GRAPH_DEF_H_
#define WEFT_CORE_GRAPH_GRAPH_DEF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph/attr_value.h"

namespace weft {

// The graph format version this build writes, and the oldest reader that
// can understand what it writes. A file whose min_consumer is newer than
// kGraphVersion is refused with both numbers.
inline constexpr uint32_t kGraphVersion = 1;
inline constexpr uint32_t kGraphMinConsumer = 1;

struct NodeDef {
  std::string name;
  std::string op;
  std::vector<std::string> inputs;
  std::string device;  // requested device, possibly partial ("/device:CPU:*"); may be empty
  AttrMap attrs;
};

struct FunctionArg {
  std::string name;
  DType dtype = DType::kInvalid;
};

// A function: a named subgraph with typed arguments and results. Its nodes
// refer to arguments by name and list results as "node:k".
struct FunctionDef {
  std::string name;
  std::vector<FunctionArg> inputs;
  std::vector<FunctionArg> outputs;
  std::vector<NodeDef> nodes;
  std::vector<std::string> results;  // one per output: "node:k"
};

struct GraphDef {
  uint32_t producer = kGraphVersion;
  uint32_t min_consumer = kGraphMinConsumer;
  std::vector<NodeDef> nodes;
  std::vector<FunctionDef> library;
};

// A parsed input string.
struct InputRef {
  std::string node;
  int index = 0;  // output index; -1 for a control input
  bool control() const { return index < 0; }
};

// Parses "node", "node:3" or "^node". An error says what is malformed.
Expected<InputRef> ParseInputRef(std::string_view input);

// "node" for index 0, "node:k" otherwise, "^node" for control.
std::string InputRefString(std::string_view node, int index);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_GRAPH_DEF_H_
