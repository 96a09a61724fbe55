// NodeDefs written by hand, for tests that build a GraphDef node by node
// (what the builders would not make, or must not be relied on for).
#ifndef WEFT_TESTS_SUPPORT_NODE_DEF_H_
#define WEFT_TESTS_SUPPORT_NODE_DEF_H_

#include <string>
#include <utility>
#include <vector>

#include "core/graph/graph_def.h"

namespace weft::testing {

// The node |name| running |op| on |inputs| ("node", "node:1", "^node"),
// with |attrs|.
inline NodeDef MakeNodeDef(std::string name, std::string op, std::vector<std::string> inputs = {}, AttrMap attrs = {}) {
  NodeDef def;
  def.name = std::move(name);
  def.op = std::move(op);
  def.inputs = std::move(inputs);
  def.attrs = std::move(attrs);
  return def;
}

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_NODE_DEF_H_
