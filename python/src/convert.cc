#include "python/src/convert.h"

#include <array>

#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "core/base/strings.h"
#include "core/tensor/borrowed_buffer.h"

namespace weft::python {
namespace {

std::string Str(const py::handle& h) { return py::str(h).cast<std::string>(); }

py::dict& ErrorClasses() {
  // Leaked on purpose: Python objects must not be released after the
  // interpreter is gone, at process exit.
  static auto* classes = new py::dict();
  return *classes;
}

// NumPy memory a tensor borrows: it keeps the array alive (taking the GIL
// to let it go, from whichever thread drops the last reference), and is
// never written in place (core/tensor/borrowed_buffer.h).
class ArrayBuffer final : public BorrowedBuffer {
 public:
  ArrayBuffer(py::array array, void* data, uint64_t size)
      : BorrowedBuffer(data, size), array_(new py::array(std::move(array))) {}
  ~ArrayBuffer() override {
    if (!Py_IsInitialized()) return;  // process exit: the interpreter has gone
    py::gil_scoped_acquire gil;
    delete array_;
  }

 private:
  py::array* array_;
};

// The dtype NumPy uses for |dtype|'s elements, by its char code.
struct NumpyType {
  DType dtype;
  char kind;
  int size;
};
constexpr NumpyType kNumpyTypes[] = {
    {DType::kF32, 'f', 4}, {DType::kF64, 'f', 8}, {DType::kF16, 'f', 2}, {DType::kI8, 'i', 1},   {DType::kI16, 'i', 2},
    {DType::kI32, 'i', 4}, {DType::kI64, 'i', 8}, {DType::kU8, 'u', 1},  {DType::kBool, 'b', 1},
};

DType FromNumpy(const py::dtype& dt) {
  if (dt.byteorder() == '>') return DType::kInvalid;  // not this machine's order
  for (const NumpyType& t : kNumpyTypes) {
    if (dt.kind() == t.kind && dt.itemsize() == t.size) return t.dtype;
  }
  return DType::kInvalid;
}

// f32 -> bf16, rounding to nearest even (NaN stays NaN).
uint16_t ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

Tensor StringsFrom(const py::array& array, std::string_view what) {
  std::vector<std::string> values;
  values.reserve(static_cast<std::size_t>(array.size()));
  py::list flat = array.attr("ravel")().attr("tolist")();
  for (const py::handle& item : flat) {
    if (py::isinstance<py::bytes>(item)) {
      values.push_back(item.cast<std::string>());
    } else if (py::isinstance<py::str>(item)) {
      values.push_back(item.cast<std::string>());
    } else {
      Raise(InvalidArgumentError(what, ": an element is a ",
                                 py::str(py::type::of(item).attr("__name__")).cast<std::string>(),
                                 "; a string tensor takes str or bytes"));
    }
  }
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  return Tensor::Strings(values, Shape(dims));
}

}  // namespace

void SetErrorClasses(py::dict classes) { ErrorClasses() = std::move(classes); }

void Raise(const Status& status) {
  py::dict& classes = ErrorClasses();
  const std::string code(CodeName(status.code()));
  PyObject* cls = classes.contains(code) ? classes[code.c_str()].ptr() : PyExc_RuntimeError;
  PyErr_SetString(cls, std::string(status.message()).c_str());
  throw py::error_already_set();
}

DType ToDType(const py::handle& value, std::string_view what) {
  if (py::isinstance<py::str>(value)) {
    const std::string name = value.cast<std::string>();
    if (auto d = ParseDType(name)) return *d;
    Raise(InvalidArgumentError(what, ": unknown dtype ", Quote(name)));
  }
  py::dtype dt;
  try {
    dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(value));
  } catch (py::error_already_set&) {
    Raise(InvalidArgumentError(what, ": ", py::repr(value).cast<std::string>(),
                               " is not a dtype (give \"f32\", \"float32\" or a NumPy dtype)"));
  }
  const DType d = FromNumpy(dt);
  if (d != DType::kInvalid) return d;
  Raise(InvalidArgumentError(what, ": NumPy's ", Str(dt), " has no Weft dtype"));
}

py::dtype NumpyDType(DType dtype) {
  // Made once per dtype (NumPy parses a dtype from its name each time
  // otherwise, on every run's outputs); kept to the end of the process.
  static std::array<PyObject*, 64> made{};
  const auto index = static_cast<std::size_t>(dtype);
  if (index < made.size() && made[index] != nullptr) return py::reinterpret_borrow<py::dtype>(made[index]);
  py::dtype dt;
  if (dtype == DType::kBF16) {
    dt = py::dtype("uint16");
  } else if (dtype == DType::kString) {
    dt = py::dtype("O");
  } else {
    bool found = false;
    for (const NumpyType& t : kNumpyTypes) {
      if (t.dtype != dtype) continue;
      dt = py::dtype(std::string(1, t.kind) + std::to_string(t.size));
      found = true;
      break;
    }
    if (!found) Raise(InvalidArgumentError("dtype ", DTypeName(dtype), " has no NumPy dtype"));
  }
  if (index < made.size()) made[index] = dt.inc_ref().ptr();
  return dt;
}

Tensor BorrowArray(const py::handle& value, DType want) {
  if (!py::isinstance<py::array>(value)) return Tensor();
  auto array = py::reinterpret_borrow<py::array>(value);
  if (want == DType::kBF16 || FromNumpy(array.dtype()) != want) return Tensor();
  if ((array.flags() & py::array::c_style) == 0 || array.nbytes() == 0 ||
      reinterpret_cast<uintptr_t>(array.data()) % HostBuffer::kAlignment != 0) {
    return Tensor();
  }
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  void* data = const_cast<void*>(array.data());
  const auto bytes = static_cast<uint64_t>(array.nbytes());
  return Tensor(want, Shape(std::move(dims)), std::make_shared<ArrayBuffer>(std::move(array), data, bytes));
}

Tensor ToTensor(const py::handle& value, std::string_view what, DType want) {
  if (!py::isinstance<py::array>(value)) {
    // Lists, scalars: NumPy's conversion, then the wanted dtype.
    py::module_ np = py::module_::import("numpy");
    py::object array;
    try {
      array = np.attr("asarray")(value);
    } catch (py::error_already_set& e) {
      Raise(InvalidArgumentError(what, ": cannot be made an array: ", e.what()));
    }
    if (want != DType::kInvalid && want != DType::kString && want != DType::kBF16 &&
        array.attr("dtype").attr("kind").cast<std::string>() != "O") {
      array = array.attr("astype")(NumpyDType(want));
    }
    return ToTensor(array, what, want);
  }
  py::array array = py::reinterpret_borrow<py::array>(value);
  const py::dtype dt = array.dtype();
  std::vector<int64_t> dims(array.shape(), array.shape() + array.ndim());
  const Shape shape(dims);
  if (dt.kind() == 'O' || dt.kind() == 'S' || dt.kind() == 'U') {
    if (dt.kind() == 'O' && want != DType::kString && want != DType::kInvalid) {
      Raise(InvalidArgumentError(what, ": an object array; give a ", DTypeName(want), " array"));
    }
    return StringsFrom(array, what);
  }
  DType dtype = FromNumpy(dt);
  if (want == DType::kBF16 && dt.kind() == 'u' && dt.itemsize() == 2) dtype = DType::kBF16;  // its bits
  if (dt.byteorder() == '>') {
    Raise(
        InvalidArgumentError(what, ": a big-endian array (", Str(dt),
                             "); convert it to this machine's order (array.astype(array.dtype.newbyteorder(\"=\")))"));
  }
  if (dtype == DType::kInvalid) {
    Raise(InvalidArgumentError(what, ": NumPy's ", Str(dt), " has no Weft dtype"));
  }
  if (want == DType::kBF16 && (dtype == DType::kF32 || dtype == DType::kF64)) {
    // Widened values narrowed here: bf16 has no NumPy type.
    py::array_t<float, py::array::c_style | py::array::forcecast> f(array);
    Tensor t = Check(Tensor::Allocate(DType::kBF16, shape));
    auto* out = t.data<uint16_t>();
    for (py::ssize_t i = 0; i < f.size(); ++i) out[i] = ToBf16(f.data()[i]);
    return t;
  }
  if (want == DType::kBF16 && dtype != DType::kBF16) {
    Raise(InvalidArgumentError(what, ": a ", Str(dt), " array cannot feed bf16 (give f32 values or uint16 bits)"));
  }
  const bool contiguous = (array.flags() & py::array::c_style) != 0;
  const bool aligned = reinterpret_cast<uintptr_t>(array.data()) % HostBuffer::kAlignment == 0;
  const uint64_t bytes = static_cast<uint64_t>(array.nbytes());
  if (contiguous && aligned && bytes > 0) {
    void* data = const_cast<void*>(array.data());
    return Tensor(dtype, shape, std::make_shared<ArrayBuffer>(array, data, bytes));
  }
  Tensor t = Check(Tensor::Allocate(dtype, shape));
  if (bytes == 0) return t;
  if (contiguous) {
    std::memcpy(t.raw_data(), array.data(), bytes);
  } else {
    // NumPy lays the elements out in C order into our buffer.
    py::array target(dt, array.request().shape, t.raw_data(), py::none());
    py::module_::import("numpy").attr("copyto")(target, array);
  }
  return t;
}

py::object ToNumpy(const Tensor& tensor, std::shared_ptr<const void> keepalive) {
  const std::vector<py::ssize_t> shape(tensor.shape().dims().begin(), tensor.shape().dims().end());
  if (tensor.dtype() == DType::kString) {
    py::array out(py::dtype("O"), shape);
    auto** items = static_cast<PyObject**>(out.mutable_data());
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      const std::string_view s = tensor.string_at(i);
      Py_XDECREF(items[i]);
      items[i] = PyBytes_FromStringAndSize(s.data(), static_cast<py::ssize_t>(s.size()));
    }
    return out;
  }
  if (tensor.dtype() == DType::kResource) {
    Raise(
        InvalidArgumentError("a resource (the handle of a variable or a queue) has no value to fetch; fetch "
                             "what reads it (a weft.Variable's value())"));
  }
  if (!tensor.host_visible()) Raise(InternalError("an output is not in host memory"));
  if (tensor.num_elements() == 0 || tensor.buffer() == nullptr) return py::array(NumpyDType(tensor.dtype()), shape);
  // The capsule owns a reference to the buffer for as long as the array
  // (or a view of it) lives.
  const bool shared = tensor.buffer().use_count() > 1 || BorrowedBuffer::Is(tensor.buffer().get());
  // The buffer goes first (members go in reverse order), then what its
  // device needs.
  struct Hold {
    std::shared_ptr<const void> keepalive;
    std::shared_ptr<Buffer> buffer;
  };
  auto* hold = new Hold{std::move(keepalive), tensor.buffer()};
  // The session's last reference may go with it; its deleter lets go of
  // the GIL then (python/src/session.cc).
  py::capsule owner(hold, [](void* p) { delete static_cast<Hold*>(p); });
  py::array out(NumpyDType(tensor.dtype()), shape, tensor.raw_data(), owner);
  if (shared) py::detail::array_proxy(out.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return out;
}

Shape ToShape(const py::handle& value, std::string_view what) {
  if (value.is_none()) return Shape::UnknownRank();
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) {
    Raise(InvalidArgumentError(what, ": a shape is a sequence of ints and None (unknown), or None"));
  }
  std::vector<int64_t> dims;
  for (const py::handle& d : value) {
    if (d.is_none()) {
      dims.push_back(-1);
    } else if (py::isinstance<py::int_>(d) || py::hasattr(d, "__index__")) {
      const int64_t v = py::int_(py::reinterpret_borrow<py::object>(d)).cast<int64_t>();
      if (v < -1) Raise(InvalidArgumentError(what, ": dimension ", v, " is negative"));
      dims.push_back(v);
    } else {
      Raise(InvalidArgumentError(what, ": a dimension is an int or None, not ",
                                 py::str(py::type::of(d).attr("__name__")).cast<std::string>()));
    }
  }
  return Shape(dims);
}

py::object FromShape(const Shape& shape) {
  if (shape.unknown_rank()) return py::none();
  py::tuple out(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) {
    out[static_cast<std::size_t>(i)] = shape.dim(i) < 0 ? py::object(py::none()) : py::object(py::int_(shape.dim(i)));
  }
  return out;
}

namespace {

template <class T>
std::vector<T> ListOf(const py::handle& value, std::string_view what, const char* kind) {
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) {
    Raise(InvalidArgumentError(what, ": expected a list of ", kind));
  }
  std::vector<T> out;
  for (const py::handle& item : value) {
    try {
      out.push_back(item.cast<T>());
    } catch (const py::cast_error&) {
      Raise(InvalidArgumentError(what, ": expected a list of ", kind, "; an element is ",
                                 py::repr(item).cast<std::string>()));
    }
  }
  return out;
}

template <class T>
T One(const py::handle& value, std::string_view what, const char* kind) {
  // bool is an int in Python: refuse it where an int or float is meant,
  // and anything but a bool where a bool is.
  const bool is_bool = py::isinstance<py::bool_>(value);
  if (std::is_same_v<T, bool> != is_bool) {
    Raise(InvalidArgumentError(what, ": expected ", kind, ", got ", py::repr(value).cast<std::string>()));
  }
  if constexpr (std::is_same_v<T, std::string>) {
    if (!py::isinstance<py::str>(value) && !py::isinstance<py::bytes>(value)) {
      Raise(InvalidArgumentError(what, ": expected ", kind, ", got ", py::repr(value).cast<std::string>()));
    }
  }
  if constexpr (std::is_same_v<T, int64_t>) {
    if (py::isinstance<py::float_>(value)) {
      Raise(InvalidArgumentError(what, ": expected ", kind, ", got ", py::repr(value).cast<std::string>()));
    }
  }
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    Raise(InvalidArgumentError(what, ": expected ", kind, ", got ", py::repr(value).cast<std::string>()));
  }
}

}  // namespace

AttrValue ToAttr(const AttrDef& def, const py::handle& value, std::string_view what) {
  switch (def.type) {
    case AttrType::kInt: return AttrValue(One<int64_t>(value, what, "an int"));
    case AttrType::kFloat: return AttrValue(One<double>(value, what, "a float"));
    case AttrType::kBool: return AttrValue(One<bool>(value, what, "a bool"));
    case AttrType::kString: return AttrValue(One<std::string>(value, what, "a str"));
    case AttrType::kType: return AttrValue(ToDType(value, what));
    case AttrType::kShape: return AttrValue(ToShape(value, what));
    case AttrType::kTensor: return AttrValue(Check(ToTensor(value, what).DeepCopy()));  // never borrowed
    case AttrType::kIntList: return AttrValue(ListOf<int64_t>(value, what, "ints"));
    case AttrType::kFloatList: return AttrValue(ListOf<double>(value, what, "floats"));
    case AttrType::kBoolList: return AttrValue(ListOf<bool>(value, what, "bools"));
    case AttrType::kStringList: return AttrValue(ListOf<std::string>(value, what, "strs"));
    case AttrType::kTypeList: {
      std::vector<DType> types;
      for (const py::handle& item : value) types.push_back(ToDType(item, what));
      return AttrValue(types);
    }
    case AttrType::kShapeList: {
      std::vector<Shape> shapes;
      for (const py::handle& item : value) shapes.push_back(ToShape(item, what));
      return AttrValue(shapes);
    }
    case AttrType::kTensorList: {
      std::vector<Tensor> tensors;
      for (const py::handle& item : value) tensors.push_back(Check(ToTensor(item, what).DeepCopy()));
      return AttrValue(tensors);
    }
    default: break;
  }
  Raise(UnimplementedError(what, ": attrs of this kind (functions) cannot be set from Python"));
}

}  // namespace weft::python
