#include "core/tensor/borrowed_buffer.h"

namespace weft {

BorrowedBuffer::~BorrowedBuffer() = default;

bool BorrowedBuffer::Is(const Buffer* buffer) { return dynamic_cast<const BorrowedBuffer*>(buffer) != nullptr; }

}  // namespace weft
