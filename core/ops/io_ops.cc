// Checkpoint I/O: Save writes tensors to a checkpoint bundle and Restore
// reads them back (core/checkpoint/bundle.h). The runtime implements both
// on every device: they copy through host memory.
#include <set>

#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

Status CheckPrefix(InferenceContext& c) {
  const Shape& prefix = c.input_shape(0);
  if (!prefix.unknown_rank() && prefix.rank() != 0) {
    return c.Error("prefix must be a string scalar, got shape ", prefix.ToString());
  }
  return Status();
}

// Names must be non-empty and unique, one per tensor.
Status CheckNames(InferenceContext& c, std::size_t tensors) {
  const auto& names = c.Get("tensor_names").get<std::vector<std::string>>();
  if (names.size() != tensors) {
    return c.Error("tensor_names has ", names.size(), " name", names.size() == 1 ? "" : "s", " for ", tensors,
                   " tensor", tensors == 1 ? "" : "s");
  }
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (name.empty()) return c.Error("tensor_names has an empty name");
    if (!seen.insert(name).second) return c.Error("tensor_names has ", Quote(name), " twice");
  }
  return Status();
}

Status SaveShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(CheckPrefix(c));
  const auto& names = c.Get("tensor_names").get<std::vector<std::string>>();
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (c.input_type(i) == DType::kResource) {
      const std::size_t k = static_cast<std::size_t>(i - 1);
      return c.Error("tensor ", k < names.size() ? Quote(names[k]) : StrCat("#", k),
                     " is a resource handle; save the variable's value "
                     "(ReadVariable) instead");
    }
  }
  return CheckNames(c, static_cast<std::size_t>(c.num_inputs() - 1));
}

Status SaveShardShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(SaveShape(c));
  const int64_t shard = c.Get("shard").get<int64_t>();
  const int64_t n = c.Get("num_shards").get<int64_t>();
  if (n < 1 || shard < 0 || shard >= n) return c.Error("shard ", shard, " of ", n, " is out of range");
  c.set_output(0, Shape{});
  return Status();
}

Status RestoreShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(CheckPrefix(c));
  const auto& dtypes = c.Get("dtypes").get<std::vector<DType>>();
  WEFT_RETURN_IF_ERROR(CheckNames(c, dtypes.size()));
  for (DType d : dtypes) {
    if (d == DType::kResource) return c.Error("dtypes lists resource, which a checkpoint cannot hold");
  }
  const auto& shapes = c.Get("shapes").get<std::vector<Shape>>();
  if (!shapes.empty() && shapes.size() != dtypes.size()) {
    return c.Error("shapes has ", shapes.size(), " entries for ", dtypes.size(),
                   " tensors (give one per tensor, or none)");
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) c.set_output(static_cast<int>(i), shapes[i]);
  return Status();
}

}  // namespace

Status RegisterIoOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Save")
                                      .Input("prefix: string")
                                      .Input("tensors: T")
                                      .Attr("tensor_names: list(string)")
                                      .Attr("T: list(type)")
                                      .Stateful()
                                      .Shape(SaveShape)
                                      .Doc("Writes 'tensors' (any dtypes but resource) to the "
                                           "checkpoint bundle 'prefix' (a string scalar: "
                                           "files prefix.index and prefix.data-00000-of-00001), "
                                           "under the names in 'tensor_names', one per "
                                           "tensor. The bundle replaces any of that name and "
                                           "appears atomically: a crash mid-save leaves "
                                           "no partial bundle. Runs on any device; the values "
                                           "are copied to the host.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("SaveShard")
                                      .Input("prefix: string")
                                      .Input("tensors: T")
                                      .Output("part: string")
                                      .Attr("tensor_names: list(string)")
                                      .Attr("T: list(type)")
                                      .Attr("shard: int")
                                      .Attr("num_shards: int")
                                      .Stateful()
                                      .Shape(SaveShardShape)
                                      .Doc("Writes 'tensors' as data shard 'shard' of 'num_shards' of the "
                                           "checkpoint bundle 'prefix' (file "
                                           "prefix.data-<shard>-of-<num_shards>, written crash-safely) and "
                                           "outputs its part of the bundle's "
                                           "index (hex text). The bundle exists once one process commits "
                                           "the parts of every shard "
                                           "(CommitShardedBundle): the ps tasks of a cluster save their "
                                           "own variables with it in parallel, "
                                           "and `weft train`'s chief commits.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Restore")
                                      .Input("prefix: string")
                                      .Output("tensors: dtypes")
                                      .Attr("tensor_names: list(string)")
                                      .Attr("dtypes: list(type)")
                                      .Attr("shapes: list(shape) = []")
                                      .Stateful()
                                      .Shape(RestoreShape)
                                      .Doc("Reads the tensors named 'tensor_names' from the "
                                           "checkpoint bundle 'prefix', checking each one's "
                                           "CRC32C. Each must have the dtype listed in 'dtypes' "
                                           "and, when 'shapes' is given (one per tensor; "
                                           "partial shapes allowed), a shape compatible with "
                                           "it; a mismatch, a missing tensor or corrupt "
                                           "data is an error naming the tensor and the "
                                           "checkpoint. Feed the results to Assign to restore "
                                           "variables.")));
  return Status();
}

}  // namespace weft::ops
