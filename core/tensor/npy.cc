#include "core/tensor/npy.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/base/file_util.h"

namespace weft {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

// The dtypes a .npy descr may name, by kind and size.
std::optional<DType> DTypeFor(char kind, int size) {
  if (kind == 'f' && size == 4) return DType::kF32;
  if (kind == 'f' && size == 8) return DType::kF64;
  if (kind == 'f' && size == 2) return DType::kF16;
  if (kind == 'i' && size == 1) return DType::kI8;
  if (kind == 'i' && size == 2) return DType::kI16;
  if (kind == 'i' && size == 4) return DType::kI32;
  if (kind == 'i' && size == 8) return DType::kI64;
  if (kind == 'u' && size == 1) return DType::kU8;
  if (kind == 'b' && size == 1) return DType::kBool;
  return std::nullopt;
}

std::string Descr(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "<f4";
    case DType::kF64: return "<f8";
    case DType::kF16: return "<f2";
    case DType::kI8: return "|i1";
    case DType::kI16: return "<i2";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    case DType::kU8: return "|u1";
    case DType::kBool: return "|b1";
    default: return "";
  }
}

// A tiny reader for the Python-literal dict of the header:
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  Status Parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    Skip();
    WEFT_RETURN_IF_ERROR(Expect('{'));
    while (true) {
      Skip();
      if (Peek() == '}') break;
      std::string key;
      WEFT_RETURN_IF_ERROR(ReadString(&key));
      Skip();
      WEFT_RETURN_IF_ERROR(Expect(':'));
      Skip();
      if (key == "descr") {
        if (Peek() == '[') return Error("structured dtypes are not supported");
        WEFT_RETURN_IF_ERROR(ReadString(descr));
        have_descr = true;
      } else if (key == "fortran_order") {
        if (Consume("True")) {
          *fortran = true;
        } else if (Consume("False")) {
          *fortran = false;
        } else {
          return Error("fortran_order is neither True nor False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        WEFT_RETURN_IF_ERROR(ReadShape(shape));
        have_shape = true;
      } else {
        return Error(StrCat("unexpected key '", key, "' in the header"));
      }
      Skip();
      if (Peek() == ',') ++pos_;
    }
    if (!have_descr || !have_fortran || !have_shape) {
      return Error("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return Status();
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void Skip() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
  }
  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  Status Expect(char c) {
    if (Peek() != c) {
      return Error(StrCat("malformed header: expected '", c, "' at byte ", pos_, " of the header"));
    }
    ++pos_;
    return Status();
  }
  Status ReadString(std::string* out) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error(StrCat("malformed header at byte ", pos_));
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return Error("malformed header: unterminated string");
    *out = std::string(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return Status();
  }
  Status ReadShape(std::vector<int64_t>* shape) {
    WEFT_RETURN_IF_ERROR(Expect('('));
    while (true) {
      Skip();
      if (Peek() == ')') {
        ++pos_;
        return Status();
      }
      if (!(Peek() >= '0' && Peek() <= '9')) return Error("malformed shape in the header");
      int64_t value = 0;
      while (Peek() >= '0' && Peek() <= '9') {
        if (value > (INT64_MAX - 9) / 10) return Error("a dimension in the shape is too large");
        value = value * 10 + (Peek() - '0');
        ++pos_;
      }
      // Python 2 headers write longs as 3L.
      if (Peek() == 'L') ++pos_;
      shape->push_back(value);
      if (shape->size() > WEFT_MAX_RANK) {
        return Error(StrCat("rank above the maximum of ", WEFT_MAX_RANK));
      }
      Skip();
      if (Peek() == ',') ++pos_;
    }
  }
  Status Error(const std::string& what) const { return InvalidArgumentError(name_, ": not a valid .npy file: ", what); }

  std::string_view text_;
  std::string_view name_;
  std::size_t pos_ = 0;
};

uint64_t ReadLittle(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

Expected<Tensor> ParseNpy(std::string_view bytes, std::string_view name) {
  auto error = [&](const std::string& what) { return InvalidArgumentError(name, ": not a valid .npy file: ", what); };
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view(kMagic, 6)) {
    return error("it does not start with the magic \"\\x93NUMPY\"");
  }
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
  const int major = raw[6];
  std::size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = ReadLittle(raw + 8, 2);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return error("truncated header");
    header_len = ReadLittle(raw + 8, 4);
    header_start = 12;
  } else {
    return error(StrCat("unsupported format version ", major, ".", static_cast<int>(raw[7])));
  }
  if (header_len > bytes.size() - header_start) return error("truncated header");
  const std::string_view header = bytes.substr(header_start, header_len);

  std::string descr;
  bool fortran = false;
  std::vector<int64_t> dims;
  HeaderParser parser(header, name);
  WEFT_RETURN_IF_ERROR(parser.Parse(&descr, &fortran, &dims));
  if (fortran) {
    return InvalidArgumentError(name,
                                ": Fortran-order arrays are not supported; save it in C order "
                                "(numpy.ascontiguousarray) and try again");
  }
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '>' && descr[0] != '|' && descr[0] != '=')) {
    return error(StrCat("unsupported dtype descr '", descr, "'"));
  }
  const char kind = descr[1];
  int size = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || size > 1000) {
      return error(StrCat("unsupported dtype descr '", descr, "'"));
    }
    size = size * 10 + (descr[i] - '0');
  }
  const std::optional<DType> dtype = DTypeFor(kind, size);
  if (!dtype) {
    return InvalidArgumentError(name, ": dtype '", descr,
                                "' is not supported (use float16/32/64, int8/16/32/64, uint8 or bool)");
  }
  const bool big_endian = descr[0] == '>' && size > 1;

  auto count = CheckedNumElements(dims);
  if (!count.ok()) return error(count.status().message());
  const std::size_t data_start = header_start + header_len;
  const uint64_t data_bytes = static_cast<uint64_t>(*count) * static_cast<uint64_t>(size);
  if (*count > 0 && data_bytes / static_cast<uint64_t>(*count) != static_cast<uint64_t>(size)) {
    return error("the shape is too large");
  }
  const uint64_t available = bytes.size() - data_start;
  if (available < data_bytes) {
    return InvalidArgumentError(name, ": truncated: shape ", Shape(dims).ToString(), " of ", descr, " needs ",
                                data_bytes, " bytes of data, the file has ", available);
  }
  if (available > data_bytes) {
    return InvalidArgumentError(name, ": ", available - data_bytes, " bytes of trailing data after the array");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(*dtype, Shape(dims)));
  if (data_bytes > 0) std::memcpy(tensor.raw_data(), bytes.data() + data_start, data_bytes);
  if (big_endian) {
    auto* p = static_cast<unsigned char*>(tensor.raw_data());
    for (uint64_t i = 0; i < data_bytes; i += static_cast<uint64_t>(size)) std::reverse(p + i, p + i + size);
  }
  if (*dtype == DType::kBool) {
    const auto* p = static_cast<const unsigned char*>(tensor.raw_data());
    for (int64_t i = 0; i < *count; ++i) {
      if (p[i] > 1) return error(StrCat("bool element ", i, " is ", static_cast<int>(p[i]), ", not 0 or 1"));
    }
  }
  return tensor;
}

Expected<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read ", Quote(path), ": ", std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return ParseNpy(bytes.str(), path);
}

Expected<std::string> SerializeNpy(const Tensor& tensor) {
  const std::string descr = Descr(tensor.dtype());
  if (descr.empty()) {
    return InvalidArgumentError("a ", DTypeName(tensor.dtype()),
                                " tensor cannot be saved as .npy: NumPy has no such dtype",
                                tensor.dtype() == DType::kBF16 ? " (cast it to f32 first)" : "");
  }
  if (!tensor.host_visible()) return FailedPreconditionError("tensor is not in host memory");
  // As NumPy writes it: (), (5,), (2, 3).
  std::string shape = StrCat("(", StrJoin(tensor.shape().dims(), ", "), tensor.rank() == 1 ? ",)" : ")");
  std::string header = StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad so the data starts on a 64-byte boundary, ending with a newline.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  if (tensor.byte_size() > 0) out.append(static_cast<const char*>(tensor.raw_data()), tensor.byte_size());
  return out;
}

Status WriteNpy(const std::string& path, const Tensor& tensor) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(tensor));
  // Atomically (temporary file, fsync, rename, directory fsync): a reader
  // never sees half a file, and a crash leaves the old one.
  return WriteFileAtomically(path, bytes).WithContext(StrCat("writing ", path));
}

}  // namespace weft
