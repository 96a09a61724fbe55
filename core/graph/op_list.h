// The ops a graph runs, each with the dtype attributes that choose its
// kernel: what `weft optimize --list-ops` prints and what the lite build's
// selective registration compiles in (docs/lite.md).
//
//   std::set<std::string> lines;
//   AddKernelLines(def, lines);   // "Conv2D T=f32", "Cast DstT=i64 SrcT=f32"
#ifndef WEFT_CORE_GRAPH_OP_LIST_H_
#define WEFT_CORE_GRAPH_OP_LIST_H_

#include <set>
#include <string>

#include "core/graph/graph_def.h"

namespace weft {

// "Conv2D T=f32": |node|'s op and its type attributes ("name=[f32,i64]"
// for a list), in attribute-name order.
std::string KernelLine(const NodeDef& node);

// The lines of every node of |def| and of the functions it calls (loop
// and branch bodies), into |lines|.
void AddKernelLines(const GraphDef& def, std::set<std::string>& lines);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_OP_LIST_H_
