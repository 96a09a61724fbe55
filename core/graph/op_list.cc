#include "core/graph/op_list.h"

#include <vector>

#include "core/base/strings.h"

namespace weft {

std::string KernelLine(const NodeDef& node) {
  std::string line = node.op;
  for (const auto& [name, value] : node.attrs) {
    if (value.type() == AttrType::kType) {
      line += StrCat(" ", name, "=", DTypeName(value.get<DType>()));
    } else if (value.type() == AttrType::kTypeList) {
      std::vector<std::string> names;
      for (DType d : value.get<std::vector<DType>>()) names.emplace_back(DTypeName(d));
      line += StrCat(" ", name, "=[", StrJoin(names, ","), "]");
    }
  }
  return line;
}

void AddKernelLines(const GraphDef& def, std::set<std::string>& lines) {
  for (const NodeDef& node : def.nodes) lines.insert(KernelLine(node));
  for (const FunctionDef& f : def.library) {
    for (const NodeDef& node : f.nodes) lines.insert(KernelLine(node));
  }
}

}  // namespace weft
