// Weft SDK for C++ plugins: checked arithmetic for sizes and indices.
//
// A kernel that computes an output dimension from its inputs and attrs (a
// padded size, a tiled size, a count of steps) must not let the sum or
// product wrap: a wrapped dimension looks small, the host allocates that,
// and the kernel writes past it. These throw weft::sdk::Error
// (INVALID_ARGUMENT) instead, with |what| and the operands in the message:
//
//   int64_t PaddedSize(int64_t d, int64_t before, int64_t after) {
//     return weft::sdk::AddSize(weft::sdk::AddSize(d, before, "padded size"), after, "padded size");
//   }
//
// The host checks the product of the dimensions itself when it allocates
// (element count, byte size and the allocation limit), so a kernel needs
// these only for the dimensions it computes.
#ifndef WEFT_SDK_SIZE_H_
#define WEFT_SDK_SIZE_H_

#include <cstdint>
#include <string>

#include "weft/sdk/status.h"

namespace weft::sdk {

inline int64_t AddSize(int64_t a, int64_t b, const char* what) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) {
    throw Error(WEFT_INVALID_ARGUMENT,
                std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) + " does not fit in 64 bits");
  }
  return out;
}

inline int64_t MulSize(int64_t a, int64_t b, const char* what) {
  int64_t out;
  if (__builtin_mul_overflow(a, b, &out)) {
    throw Error(WEFT_INVALID_ARGUMENT,
                std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) + " does not fit in 64 bits");
  }
  return out;
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_SIZE_H_
