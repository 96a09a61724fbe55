// The one place sizes are checked: the element count and byte size of a
// shape, the maximum rank, and the allocation limit. Shape inference checks
// every output shape here (core/graph/graph.cc), and every allocation of a
// tensor goes through TensorBytes, so nothing is ever allocated from an
// unchecked product. Shape functions and kernels that compute a dimension
// from others (a padded size, a tiled size, a count of steps) use CheckedAdd
// and CheckedMul, or the SDK's twins in weft/sdk/size.h. See
// docs/graphs.md, "Sizes and limits".
#ifndef WEFT_CORE_TENSOR_SIZE_H_
#define WEFT_CORE_TENSOR_SIZE_H_

#include <cstdint>
#include <optional>

#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "weft/weft_tensor.h"

namespace weft {

// The highest rank a tensor may have.
inline constexpr int kMaxRank = WEFT_MAX_RANK;

// a + b and a * b, or nullopt when the result does not fit int64.
std::optional<int64_t> CheckedAdd(int64_t a, int64_t b);
std::optional<int64_t> CheckedMul(int64_t a, int64_t b);

// For shape inference: whether a (partial) shape of |dtype| can exist. Its
// rank must be at most kMaxRank and the product of its known dimensions, in
// elements and in bytes, must fit int64. The error says which and shows the
// shape; the caller names the node.
Status CheckShapeFits(const Shape& shape, DType dtype);

// For allocation: the byte size of a tensor of |dtype| and the fully defined
// |shape|. INVALID_ARGUMENT when a dimension is negative, the rank is above
// kMaxRank or the size does not fit int64; RESOURCE_EXHAUSTED when it is
// above MaxTensorBytes(). A string element counts what it costs on the host
// (a std::string and its weft_string_t); resources count one byte.
Expected<uint64_t> TensorBytes(DType dtype, const Shape& shape);

// The largest tensor the process allocates, in bytes: runtime.max_tensor_mb
// when the config sets it, else this machine's physical memory.
uint64_t MaxTensorBytes();
// Sets it; 0 goes back to the machine's physical memory.
void SetMaxTensorBytes(uint64_t bytes);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_SIZE_H_
