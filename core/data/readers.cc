#include "core/data/readers.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/tensor/npy.h"
#include "weft/sdk/half.h"

namespace weft::data {
namespace {

// Decompressed data larger than this is refused rather than allocated: a
// few hundred bytes of gzip can claim gigabytes.
constexpr uint64_t kMaxDecompressedBytes = uint64_t{8} << 30;

std::string Hex(uint64_t value, int digits) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) out[static_cast<std::size_t>(i)] = kDigits[value & 0xf];
  return "0x" + out;
}

Expected<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read ", Quote(path), ": ", std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return NotFoundError("cannot read ", Quote(path), ": read error");
  return std::move(bytes).str();
}

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// --- IDX ------------------------------------------------------------------------

struct IdxType {
  unsigned char code;
  DType dtype;
};

constexpr IdxType kIdxTypes[] = {{0x08, DType::kU8},  {0x09, DType::kI8},  {0x0B, DType::kI16},
                                 {0x0C, DType::kI32}, {0x0D, DType::kF32}, {0x0E, DType::kF64}};

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// --- Conversions ------------------------------------------------------------------

template <class T>
void Convert(const Tensor& in, float* out) {
  const T* p = in.data<T>();
  for (int64_t i = 0; i < in.num_elements(); ++i) out[i] = static_cast<float>(p[i]);
}

Expected<Tensor> ToF32(const Tensor& in, std::string_view name) {
  if (in.dtype() == DType::kF32) return in;
  WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DType::kF32, in.shape()));
  float* o = out.data<float>();
  switch (in.dtype()) {
    case DType::kF64: Convert<double>(in, o); break;
    case DType::kI8: Convert<int8_t>(in, o); break;
    case DType::kI16: Convert<int16_t>(in, o); break;
    case DType::kI32: Convert<int32_t>(in, o); break;
    case DType::kI64: Convert<int64_t>(in, o); break;
    case DType::kU8: Convert<uint8_t>(in, o); break;
    case DType::kBool: Convert<bool>(in, o); break;
    case DType::kF16: {
      const auto* p = in.data<uint16_t>();
      for (int64_t i = 0; i < in.num_elements(); ++i) o[i] = sdk::HalfToFloat(p[i]);
      break;
    }
    case DType::kBF16: {
      const auto* p = in.data<uint16_t>();
      for (int64_t i = 0; i < in.num_elements(); ++i) o[i] = sdk::Bfloat16ToFloat(p[i]);
      break;
    }
    default:
      return InvalidArgumentError(name, ": features of dtype ", DTypeName(in.dtype()), " cannot be read as numbers");
  }
  return out;
}

// Label |i| of |in| as an integer, or an error saying why it is not one.
template <class T>
Status IntegerLabels(const Tensor& in, int64_t* out, std::string_view name) {
  const T* p = in.data<T>();
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      const double v = static_cast<double>(p[i]);
      // 2^63 is the first double that does not fit in int64.
      if (!(v == std::floor(v)) || !(std::fabs(v) < 9223372036854775808.0)) {
        return InvalidArgumentError(name, ": label ", v, " of example ", i, " is not an integer");
      }
      out[i] = static_cast<int64_t>(v);
    } else {
      out[i] = static_cast<int64_t>(p[i]);
    }
    if (out[i] < 0) return InvalidArgumentError(name, ": label ", out[i], " of example ", i, " is negative");
  }
  return Status();
}

Expected<Tensor> ToLabels(const Tensor& in, std::string_view name) {
  if (in.rank() != 1) {
    return InvalidArgumentError(name, ": labels must be a vector [n], one per example; got ", in.TypeString());
  }
  WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(DType::kI64, in.shape()));
  int64_t* o = out.data<int64_t>();
  switch (in.dtype()) {
    case DType::kI8: WEFT_RETURN_IF_ERROR(IntegerLabels<int8_t>(in, o, name)); break;
    case DType::kI16: WEFT_RETURN_IF_ERROR(IntegerLabels<int16_t>(in, o, name)); break;
    case DType::kI32: WEFT_RETURN_IF_ERROR(IntegerLabels<int32_t>(in, o, name)); break;
    case DType::kI64: WEFT_RETURN_IF_ERROR(IntegerLabels<int64_t>(in, o, name)); break;
    case DType::kU8: WEFT_RETURN_IF_ERROR(IntegerLabels<uint8_t>(in, o, name)); break;
    case DType::kF32: WEFT_RETURN_IF_ERROR(IntegerLabels<float>(in, o, name)); break;
    case DType::kF64: WEFT_RETURN_IF_ERROR(IntegerLabels<double>(in, o, name)); break;
    default:
      return InvalidArgumentError(name, ": labels of dtype ", DTypeName(in.dtype()),
                                  " are not supported; store class indices as integers");
  }
  return out;
}

// --- CSV --------------------------------------------------------------------------

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool ParseNumber(std::string_view text, double* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

struct Field {
  std::string_view text;
  int64_t column;  // 1-based character column of the field's first character
};

std::vector<Field> SplitFields(std::string_view line) {
  std::vector<Field> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    std::string_view raw = line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    std::size_t lead = 0;
    while (lead < raw.size() && (raw[lead] == ' ' || raw[lead] == '\t')) ++lead;
    fields.push_back({TrimBlanks(raw), static_cast<int64_t>(start + lead + 1)});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

}  // namespace

Expected<std::string> Gunzip(std::string_view bytes, std::string_view name) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip wrapper (header, CRC-32 and length checked).
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return ResourceExhaustedError(name, ": cannot start zlib");
  struct Ender {
    z_stream* zs;
    ~Ender() { inflateEnd(zs); }
  } ender{&zs};

  std::string out;
  // The last 4 bytes give the size modulo 2^32 of a one-member file: a
  // hint for the allocation, never trusted beyond a reasonable bound.
  if (bytes.size() >= 18) {
    const auto* tail = reinterpret_cast<const unsigned char*>(bytes.data() + bytes.size() - 4);
    const uint32_t isize =
        uint32_t{tail[0]} | (uint32_t{tail[1]} << 8) | (uint32_t{tail[2]} << 16) | (uint32_t{tail[3]} << 24);
    out.reserve(std::min<uint64_t>(isize, std::min<uint64_t>(bytes.size() * 1032, uint64_t{1} << 30)));
  }
  const auto* base = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t fed = 0;  // bytes handed to zlib so far
  auto offset = [&] { return static_cast<uint64_t>(zs.next_in - base); };
  while (true) {
    if (zs.avail_in == 0 && fed < bytes.size()) {
      const std::size_t chunk = std::min<std::size_t>(bytes.size() - fed, std::size_t{1} << 30);
      zs.next_in = const_cast<Bytef*>(base + fed);
      zs.avail_in = static_cast<uInt>(chunk);
      fed += chunk;
    }
    const std::size_t old_size = out.size();
    const std::size_t chunk = std::max<std::size_t>(std::size_t{1} << 18, std::min<std::size_t>(old_size, 1 << 26));
    out.resize(old_size + chunk);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + old_size);
    zs.avail_out = static_cast<uInt>(chunk);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(old_size + chunk - zs.avail_out);
    if (out.size() > kMaxDecompressedBytes) {
      return InvalidArgumentError(name, ": gzip data decompresses to more than ", kMaxDecompressedBytes >> 30,
                                  " GiB; refusing to hold it in memory");
    }
    if (rc == Z_STREAM_END) {
      const uint64_t end = offset();
      if (end == bytes.size()) return out;
      // gzip(1) concatenates members; anything else after a member is an error.
      if (!IsGzip(bytes.substr(end))) {
        return InvalidArgumentError(name, ": ", bytes.size() - end,
                                    " bytes of trailing garbage after the gzip data "
                                    "ends at byte ",
                                    end);
      }
      if (inflateReset(&zs) != Z_OK) return InternalError(name, ": cannot reset zlib");
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && fed == bytes.size()) {
      return InvalidArgumentError(name, ": gzip data is truncated: the compressed stream stops at byte ", bytes.size(),
                                  " before its end");
    }
    if (rc == Z_BUF_ERROR) continue;
    if (rc == Z_MEM_ERROR) return ResourceExhaustedError(name, ": out of memory while decompressing");
    return InvalidArgumentError(name, ": gzip data is corrupt near compressed byte ", offset(), ": ",
                                zs.msg != nullptr ? zs.msg : "zlib error");
  }
}

Expected<std::string> ReadFileMaybeGzip(const std::string& path) {
  Expected<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  const std::string_view view = *bytes;
  if (IsGzip(view)) return Gunzip(view, path);
  return bytes;
}

Expected<Tensor> ParseIdx(std::string_view bytes, std::string_view name) {
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) {
    return InvalidArgumentError(name, ": not an IDX file: truncated at byte ", bytes.size(),
                                " of the 4-byte magic number");
  }
  const uint32_t magic = BigEndian32(raw);
  if (raw[0] != 0 || raw[1] != 0) {
    return InvalidArgumentError(name, ": not an IDX file: bad magic ", Hex(magic, 8),
                                " (an IDX file starts with two zero bytes, a type code and the rank)");
  }
  const IdxType* type = nullptr;
  for (const IdxType& t : kIdxTypes) {
    if (t.code == raw[2]) type = &t;
  }
  if (type == nullptr) {
    return InvalidArgumentError(name, ": not an IDX file: bad magic ", Hex(magic, 8), ": unknown type code ",
                                Hex(raw[2], 2),
                                " (expected 0x08 u8, 0x09 i8, 0x0b i16, 0x0c i32, 0x0d f32 or 0x0e f64)");
  }
  const int rank = raw[3];
  if (rank > WEFT_MAX_RANK) {
    return InvalidArgumentError(name, ": IDX rank ", rank, " is above the maximum of ", WEFT_MAX_RANK);
  }
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(rank);
  if (bytes.size() < header) {
    return InvalidArgumentError(name, ": truncated at byte ", bytes.size(), ": the header of a rank-", rank,
                                " IDX file is ", header, " bytes");
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i) dims.push_back(BigEndian32(raw + 4 + 4 * i));
  auto count = CheckedNumElements(dims);
  const uint64_t size = DTypeSize(type->dtype);
  const uint64_t available = bytes.size() - header;
  // A product that overflows, or data larger than any file: both mean the
  // dimensions do not describe this file.
  if (!count.ok() || static_cast<uint64_t>(*count) > (uint64_t{1} << 62) / size) {
    return InvalidArgumentError(name, ": IDX dimensions ", Shape(dims).ToString(), " are too large (the file has ",
                                available, " bytes of data)");
  }
  const uint64_t needed = static_cast<uint64_t>(*count) * size;
  if (available < needed) {
    return InvalidArgumentError(name, ": truncated at byte ", bytes.size(), ": dimensions ", Shape(dims).ToString(),
                                " of ", DTypeName(type->dtype), " need ", needed, " bytes of data after the ", header,
                                "-byte header, the file has ", available);
  }
  if (available > needed) {
    return InvalidArgumentError(name, ": dimensions ", Shape(dims).ToString(), " of ", DTypeName(type->dtype),
                                " account for ", needed, " bytes of data after the ", header,
                                "-byte header, but the "
                                "file has ",
                                available, " (", available - needed,
                                " bytes too many): the dimensions do not match the data");
  }
  WEFT_ASSIGN_OR_RETURN(Tensor tensor, Tensor::Allocate(type->dtype, Shape(dims)));
  if (needed > 0) std::memcpy(tensor.raw_data(), raw + header, needed);
  if (size > 1 && std::endian::native == std::endian::little) {
    auto* p = static_cast<unsigned char*>(tensor.raw_data());
    for (uint64_t i = 0; i < needed; i += size) std::reverse(p + i, p + i + size);
  }
  return tensor;
}

Expected<Tensor> ReadIdx(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadFileMaybeGzip(path));
  return ParseIdx(bytes, path);
}

Expected<Examples> ParseCsv(std::string_view text, std::string_view name, int64_t label_column) {
  std::vector<float> features;
  std::vector<int64_t> labels;
  int64_t width = -1;      // fields per row, from the first row
  int64_t width_line = 0;  // the line that set it
  int64_t label = -1;      // the label's field index
  bool first = true;
  int64_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (TrimBlanks(line).empty()) continue;
    const std::vector<Field> fields = SplitFields(line);
    const auto count = static_cast<int64_t>(fields.size());
    if (width < 0) {
      width = count;
      width_line = line_no;
      if (width < 2) {
        return InvalidArgumentError(name, ":", line_no, ": a row has ", width,
                                    " column; it needs a label and at least one feature, separated by commas");
      }
      if (label_column < -1 || label_column >= width) {
        return InvalidArgumentError(name, ": label column ", label_column, " is out of range for rows of ", width,
                                    " columns (use 0..", width - 1, ", or -1 for the last)");
      }
      label = label_column == -1 ? width - 1 : label_column;
    } else if (count != width) {
      return InvalidArgumentError(name, ":", line_no, ": ragged rows: this row has ", count, " fields, line ",
                                  width_line, " has ", width);
    }
    std::vector<double> values(fields.size());
    std::size_t bad = fields.size();
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (!ParseNumber(fields[i].text, &values[i])) {
        bad = i;
        break;
      }
    }
    if (bad < fields.size()) {
      // A first row that is not all numbers is a header.
      if (first) {
        first = false;
        continue;
      }
      return InvalidArgumentError(name, ":", line_no, ":", fields[bad].column, ": field ", bad + 1, " (",
                                  Quote(fields[bad].text), ") is not a number");
    }
    first = false;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (static_cast<int64_t>(i) != label) {
        features.push_back(static_cast<float>(values[i]));
        continue;
      }
      const double v = values[i];
      const Field& f = fields[i];
      if (!(v == std::floor(v)) || !(std::fabs(v) < 9223372036854775808.0)) {
        return InvalidArgumentError(name, ":", line_no, ":", f.column, ": label ", Quote(f.text), " is not an integer");
      }
      if (v < 0) {
        return InvalidArgumentError(name, ":", line_no, ":", f.column, ": label ", Quote(f.text), " is negative");
      }
      labels.push_back(static_cast<int64_t>(v));
    }
  }
  if (labels.empty()) return InvalidArgumentError(name, ": no data rows");
  const auto n = static_cast<int64_t>(labels.size());
  Examples out;
  out.features = Tensor::FromVector<float>(features, Shape{n, width - 1});
  out.labels = Tensor::FromVector<int64_t>(labels);
  return out;
}

Expected<Examples> MakeExamples(const Tensor& features, const Tensor& labels, std::string_view features_name,
                                std::string_view labels_name) {
  if (!features.host_visible() || !labels.host_visible()) {
    return FailedPreconditionError("examples must be in host memory");
  }
  if (features.rank() < 1) {
    return InvalidArgumentError(features_name, ": features must have a leading dimension of examples; got ",
                                features.TypeString());
  }
  if (features.dim(0) == 0) {
    return InvalidArgumentError(features_name, ": holds no examples (its shape is ", features.shape().ToString(), ")");
  }
  Examples out;
  WEFT_ASSIGN_OR_RETURN(out.features, ToF32(features, features_name));
  WEFT_ASSIGN_OR_RETURN(out.labels, ToLabels(labels, labels_name));
  if (out.labels.dim(0) != features.dim(0)) {
    return InvalidArgumentError(labels_name, ": has ", out.labels.dim(0), " labels but ", features_name, " has ",
                                features.dim(0), " examples");
  }
  return out;
}

Expected<Examples> LoadExamples(const std::string& format, const std::string& features_path,
                                const std::string& labels_path, int64_t csv_label_column) {
  if (format == "csv") {
    WEFT_ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(features_path));
    return ParseCsv(text, features_path, csv_label_column);
  }
  if (format != "idx" && format != "npy") {
    return InvalidArgumentError("unknown data format ", Quote(format), "; expected \"idx\", \"npy\" or \"csv\"");
  }
  if (labels_path.empty()) {
    return InvalidArgumentError("data format ", Quote(format), " needs a labels file beside ", Quote(features_path));
  }
  Tensor features, labels;
  if (format == "idx") {
    WEFT_ASSIGN_OR_RETURN(features, ReadIdx(features_path));
    WEFT_ASSIGN_OR_RETURN(labels, ReadIdx(labels_path));
  } else {
    WEFT_ASSIGN_OR_RETURN(std::string feature_bytes, ReadFileMaybeGzip(features_path));
    WEFT_ASSIGN_OR_RETURN(features, ParseNpy(feature_bytes, features_path));
    WEFT_ASSIGN_OR_RETURN(std::string label_bytes, ReadFileMaybeGzip(labels_path));
    WEFT_ASSIGN_OR_RETURN(labels, ParseNpy(label_bytes, labels_path));
  }
  return MakeExamples(features, labels, features_path, labels_path);
}

Expected<Examples> ParseText(std::string_view text, std::string_view name, int64_t example_length) {
  if (example_length < 2) {
    return InvalidArgumentError(name,
                                ": text examples need a length of at least 2 bytes (an input and the next "
                                "byte to predict); the model takes ",
                                example_length);
  }
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;  // keep the '\n'
    std::string_view line = text.substr(start, end - start);
    start = end;
    if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) continue;  // blank
    for (std::size_t at = 0; at < line.size(); at += static_cast<std::size_t>(example_length)) {
      std::string_view piece = line.substr(at, static_cast<std::size_t>(example_length));
      if (piece.size() >= 2) pieces.push_back(piece);
    }
  }
  if (pieces.empty()) return InvalidArgumentError(name, ": no line with text in it (", text.size(), " bytes)");
  const auto n = static_cast<int64_t>(pieces.size());
  WEFT_ASSIGN_OR_RETURN(Tensor features, Tensor::Allocate(DType::kF32, Shape{n, example_length}));
  WEFT_ASSIGN_OR_RETURN(Tensor labels, Tensor::Allocate(DType::kI64, Shape{n}));
  float* f = features.data<float>();
  std::fill(f, f + features.num_elements(), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const std::string_view piece = pieces[static_cast<std::size_t>(i)];
    for (std::size_t k = 0; k < piece.size(); ++k) {
      f[i * example_length + static_cast<int64_t>(k)] = static_cast<float>(static_cast<unsigned char>(piece[k]));
    }
    labels.data<int64_t>()[i] = static_cast<int64_t>(piece.size());
  }
  return Examples{std::move(features), std::move(labels)};
}

Expected<Examples> LoadText(const std::string& path, int64_t example_length) {
  WEFT_ASSIGN_OR_RETURN(std::string bytes, ReadFileMaybeGzip(path));
  return ParseText(bytes, path, example_length);
}

}  // namespace weft::data
