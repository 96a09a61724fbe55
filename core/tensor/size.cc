#include "core/tensor/size.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "core/base/strings.h"

namespace weft {
namespace {

std::atomic<uint64_t> g_max_tensor_bytes{0};

uint64_t PhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return uint64_t{1} << 62;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

// What one element costs in memory: a string element is a std::string on
// the host and the weft_string_t that points into it.
uint64_t ElementBytes(DType dtype) {
  if (dtype == DType::kString) return sizeof(std::string) + sizeof(weft_string_t);
  const uint64_t size = DTypeSize(dtype);
  return size == 0 ? 1 : size;
}

}  // namespace

std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

Status CheckShapeFits(const Shape& shape, DType dtype) {
  if (shape.unknown_rank()) return Status();
  if (shape.rank() > kMaxRank) {
    return InvalidArgumentError("shape ", shape.ToString(), " has rank ", shape.rank(), ", above the maximum of ",
                                kMaxRank);
  }
  int64_t elements = 1;
  bool zero = false;
  for (int64_t d : shape.dims()) {
    if (d == 0) zero = true;
    if (d <= 0) continue;
    auto product = CheckedMul(elements, d);
    if (!product) {
      return InvalidArgumentError("shape ", shape.ToString(), " has more than 2^63 elements");
    }
    elements = *product;
  }
  if (!zero && !CheckedMul(elements, static_cast<int64_t>(ElementBytes(dtype)))) {
    return InvalidArgumentError(DTypeName(dtype), shape.ToString(), " would take more than 2^63 bytes");
  }
  return Status();
}

Expected<uint64_t> TensorBytes(DType dtype, const Shape& shape) {
  if (!shape.IsFullyDefined()) {
    return InvalidArgumentError("cannot allocate a tensor of partial shape ", shape.ToString());
  }
  // Fully defined and fitting: the plain product below cannot overflow.
  WEFT_RETURN_IF_ERROR(CheckShapeFits(shape, dtype));
  const uint64_t bytes = static_cast<uint64_t>(shape.num_elements()) * ElementBytes(dtype);
  const uint64_t limit = MaxTensorBytes();
  if (bytes > limit) {
    return ResourceExhaustedError(DTypeName(dtype), shape.ToString(), " needs ", HumanBytes(bytes),
                                  ", more than the largest tensor allowed, ", HumanBytes(limit),
                                  " (runtime.max_tensor_mb; by default this machine's memory)");
  }
  return bytes;
}

uint64_t MaxTensorBytes() {
  const uint64_t set = g_max_tensor_bytes.load(std::memory_order_relaxed);
  if (set != 0) return set;
  static const uint64_t physical = PhysicalMemory();
  return physical;
}

void SetMaxTensorBytes(uint64_t bytes) { g_max_tensor_bytes.store(bytes, std::memory_order_relaxed); }

}  // namespace weft
