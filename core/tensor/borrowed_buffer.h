// Memory Weft borrows from its caller and must never write: a NumPy array
// fed from Python without a copy (docs/python.md). A variable assigned a
// tensor over such a buffer copies it before its first in-place update
// (OpKernelContext's variable locking, core/runtime/op_kernel.cc).
#ifndef WEFT_CORE_TENSOR_BORROWED_BUFFER_H_
#define WEFT_CORE_TENSOR_BORROWED_BUFFER_H_

#include <cstdint>

#include "core/tensor/tensor.h"

namespace weft {

class BorrowedBuffer : public Buffer {
 public:
  ~BorrowedBuffer() override;

  // Whether |buffer| is borrowed memory.
  static bool Is(const Buffer* buffer);

 protected:
  BorrowedBuffer(void* data, uint64_t size) : Buffer(data, size, nullptr, nullptr) {}
};

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_BORROWED_BUFFER_H_
