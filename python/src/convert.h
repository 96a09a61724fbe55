// What the Python module (_weft) shares between its files: Weft's errors as
// Python exceptions, NumPy arrays as tensors and back, attr values from
// Python objects, and dtypes by name (docs/python.md).
#ifndef WEFT_PYTHON_SRC_CONVERT_H_
#define WEFT_PYTHON_SRC_CONVERT_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/graph/attr_value.h"
#include "core/graph/op_def.h"
#include "core/tensor/tensor.h"

namespace weft::python {

namespace py = pybind11;

// Raises the weft.errors class of |status|'s code (weft.InvalidArgumentError
// for INVALID_ARGUMENT, ...) with its message. |status| is not OK.
[[noreturn]] void Raise(const Status& status);
inline void Check(const Status& status) {
  if (!status.ok()) Raise(status);
}
template <class T>
T Check(Expected<T> value) {
  if (!value.ok()) Raise(value.status());
  return std::move(*value);
}
// Keeps the classes Raise uses: {code name: class}, from weft/errors.py.
void SetErrorClasses(py::dict classes);

// A dtype from a name ("f32", "float32"), a NumPy dtype or scalar type.
DType ToDType(const py::handle& value, std::string_view what);
// The NumPy dtype of |dtype|; bf16 as uint16 (its bits, docs/python.md).
py::dtype NumpyDType(DType dtype);

// |array| as a tensor, without a copy when the array is C-contiguous,
// aligned to HostBuffer::kAlignment and of a dtype Weft has (the tensor
// then holds the array; Weft never writes into it). Else a copy, converted
// to |want| when given (a Python list, a scalar). |what| names the value in
// errors ("feed 'x'").
Tensor ToTensor(const py::handle& value, std::string_view what, DType want = DType::kInvalid);
// The fast path of ToTensor: |value| lent as a tensor when it is a
// C-contiguous, aligned, non-empty array of exactly |want|'s dtype; an
// invalid Tensor otherwise (ToTensor then converts it or says why).
Tensor BorrowArray(const py::handle& value, DType want);
// |tensor| as a NumPy array over its buffer (no copy); read-only when the
// buffer is shared (a variable's value), so that writing to the array
// cannot change the variable. Strings become an object array of bytes.
// The array keeps |keepalive| (what the buffer's device needs: the session
// and its plugins) alive as long as it lives.
py::object ToNumpy(const Tensor& tensor, std::shared_ptr<const void> keepalive = nullptr);

// An attr value of |def|'s type from a Python value: "node 'x' (Op): attr
// 'a': ..." errors through |what|.
AttrValue ToAttr(const AttrDef& def, const py::handle& value, std::string_view what);
// A shape from None (unknown rank) or a sequence of ints and None.
Shape ToShape(const py::handle& value, std::string_view what);
// (2, None) for a shape; None for an unknown rank.
py::object FromShape(const Shape& shape);

}  // namespace weft::python

#endif  // WEFT_PYTHON_SRC_CONVERT_H_
