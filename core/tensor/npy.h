// NumPy .npy files (format versions 1.0, 2.0 and 3.0), for feeds and
// fetches: every numeric dtype and bool, C order. Fortran order, object
// arrays, structured dtypes and malformed files are errors naming the file
// and what is wrong; nothing in a file can make the reader crash or
// allocate more than the file holds.
//
//   WEFT_ASSIGN_OR_RETURN(Tensor x, ReadNpy("x.npy"));
//   WEFT_RETURN_IF_ERROR(WriteNpy("y.npy", y));
#ifndef WEFT_CORE_TENSOR_NPY_H_
#define WEFT_CORE_TENSOR_NPY_H_

#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/tensor/tensor.h"

namespace weft {

// Parses the bytes of a .npy file; |name| is used in messages.
Expected<Tensor> ParseNpy(std::string_view bytes, std::string_view name);
Expected<Tensor> ReadNpy(const std::string& path);

// The bytes of a .npy file (version 1.0, little-endian) holding |tensor|,
// which must be in host memory. bf16 has no NumPy dtype and is refused.
Expected<std::string> SerializeNpy(const Tensor& tensor);
// Writes |tensor| to |path| (through a temporary file and a rename, so a
// reader never sees half a file).
Status WriteNpy(const std::string& path, const Tensor& tensor);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_NPY_H_
