// The passes of the pipeline (pipeline.cc runs them; docs/optimizer.md
// describes them). Each records its edits on |edit| and returns how many
// rewrites it made, noting examples and what it left alone in |report|.
#ifndef WEFT_CORE_PASSES_PASSES_INTERNAL_H_
#define WEFT_CORE_PASSES_PASSES_INTERNAL_H_

#include <string>

#include "core/passes/graph_edit.h"
#include "core/passes/pass.h"

namespace weft::passes::internal {

using PassFn = Expected<int64_t> (*)(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                     PassReport& report);

Expected<int64_t> RemoveIdentities(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                   PassReport& report);
Expected<int64_t> SimplifyArithmetic(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                     PassReport& report);
Expected<int64_t> FoldShapes(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                             PassReport& report);
Expected<int64_t> FoldConstants(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                PassReport& report);
Expected<int64_t> EliminateCommonSubexpressions(GraphEditor& edit, const PassContext& context,
                                                const OptimizeOptions& options, PassReport& report);
Expected<int64_t> FoldIntoWeights(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                  PassReport& report);
Expected<int64_t> FuseGelus(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                            PassReport& report);
Expected<int64_t> SinkReshapes(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                               PassReport& report);
Expected<int64_t> FuseConvolutions(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                   PassReport& report);
Expected<int64_t> FuseMatMuls(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                              PassReport& report);
Expected<int64_t> FuseQuantized(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                PassReport& report);
Expected<int64_t> AllowWinograd(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                PassReport& report);

// Records |node| as rewritten (the first few, for --explain).
void NoteExample(PassReport& report, const std::string& node);
// Records a sentence about what was left alone (the first few).
void NoteLeft(PassReport& report, std::string sentence);

// "node" or "node:k": how a NodeDef's input names output |e|.
std::string TensorName(const Graph& g, const Endpoint& e);
// The value of a Const node, or nullptr for any other node.
const Tensor* ConstValue(const Graph::Node& node);
// A Const node named |name| holding |value|.
NodeDef MakeConst(const std::string& name, const Tensor& value);

}  // namespace weft::passes::internal

#endif  // WEFT_CORE_PASSES_PASSES_INTERNAL_H_
