// Partitioned variables: a model variable larger than [cluster]
// partition_mb is split along dimension 0 into one variable per parameter
// server ("<name>/part_<k>", rows [offset_k, offset_k + rows_k)), and the
// graph is rewritten so that nothing but the split moves:
//
//   ReadVariable(V)         -> Concat of ReadVariable(V/part_k), axis 0
//   ResourceGather(V, ids)  -> the distinct ids (Unique) split by part
//                              (DynamicPartition), a ResourceGather on
//                              each part where it lives, the rows stitched
//                              back in order (DynamicStitch) and repeated
//                              as the ids repeat them: only the distinct
//                              rows read move
//   Assign(V, value)        -> Assign(V/part_k, Slice of value); the
//                              original name becomes a NoOp after them
//   VarIsInitialized(V)     -> every part initialised
//
// A part read only through gathers then gets a sparse gradient of its rows
// (TrainingGraphOptions::sparse_updates), so the update moves only those
// rows back. Parts are as even as possible, the first (rows % parts) one
// row longer (TensorFlow's fixed-size partitioner). See docs/distributed.md,
// "Partitioned variables".
//
//   WEFT_ASSIGN_OR_RETURN(PartitionedModel p, PartitionVariables(model, 2, 64 << 20, "/job:worker/task:0"));
#ifndef WEFT_CORE_DIST_VARIABLE_PARTITION_H_
#define WEFT_CORE_DIST_VARIABLE_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"

namespace weft::dist {

struct VariablePart {
  std::string name;  // "<variable>/part_<k>"
  int index = 0;     // k: the ps task it goes to is k (mod the ps tasks)
  int64_t offset = 0;
  int64_t rows = 0;
};

struct PartitionedVariable {
  std::string name;  // the model's variable
  Shape shape;       // its whole shape
  DType dtype = DType::kF32;
  std::vector<VariablePart> parts;
};

struct PartitionedModel {
  Graph graph;
  std::vector<PartitionedVariable> variables;  // empty: nothing was split
};

// Row ranges of |rows| rows split into |parts| parts.
std::vector<VariablePart> SplitRows(const std::string& name, int64_t rows, int parts);

// Splits every VarHandle of |model| holding more than |threshold_bytes|
// (fully defined shape, at least 2 rows) into min(num_parts, rows) parts.
// |local_device| ("/job:worker/task:1") is requested for the nodes that
// route ids and rows, so they run where the reads are made. A variable
// used by an op the rewrite does not know (anything but the four above,
// through its handle) is an error naming the op, the node and the key to
// raise.
Expected<PartitionedModel> PartitionVariables(const Graph& model, int num_parts, int64_t threshold_bytes,
                                              const std::string& local_device);

// The model variable a checkpoint name belongs to and the part it is
// ("emb/part_1/adam/m" -> {"emb/adam/m", 1}); part -1 when the name has no
// "/part_<k>" component.
struct PartName {
  std::string whole;
  int part = -1;
};
PartName ParsePartName(const std::string& name);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_VARIABLE_PARTITION_H_
