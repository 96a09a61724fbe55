// Training data from files: IDX (the format of MNIST and Fashion-MNIST),
// NumPy .npy, and CSV, read whole into memory as a pair of tensors, one
// example per row. Any file may be gzip-compressed (recognised by its
// first two bytes, not its name).
//
//   WEFT_ASSIGN_OR_RETURN(Examples train,
//       LoadExamples("idx", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
//                    "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz", -1));
//   // train.features: f32[60000,28,28] (pixel values 0..255), train.labels: i64[60000]
//
// Files are untrusted input: every malformed one (bad magic, truncation,
// dimensions that do not match the data, corrupt gzip, a CSV field that is
// not a number, ragged rows, a label that is negative or not an integer)
// gives an INVALID_ARGUMENT Status naming the file and the place; a file
// that cannot be opened gives NOT_FOUND. Nothing in a file makes a reader
// crash, and no reader allocates more than the (decompressed) file holds.
//
// Thread safety: the functions share no state and may run concurrently.
#ifndef WEFT_CORE_DATA_READERS_H_
#define WEFT_CORE_DATA_READERS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/tensor/tensor.h"

namespace weft::data {

// A data set in host memory: |features| is f32 [n, ...] with the values as
// stored in the file (not yet scaled), |labels| is i64 [n] with labels >= 0.
// n >= 1.
struct Examples {
  Tensor features;
  Tensor labels;
};

// Loads a data set. |format| is "idx", "npy" or "csv":
//  - "idx" and "npy": |features_path| holds the features (rank >= 1, any
//    numeric dtype, first dimension = examples) and |labels_path| the
//    labels (rank 1, integer values, or floats that are whole numbers).
//  - "csv": |features_path| holds one example per line, numbers separated
//    by commas; column |csv_label_column| (0-based; -1 = the last) is the
//    label and the other columns, in order, the features. A first line
//    that is not all numbers is a header and is skipped. |labels_path| is
//    not used.
// The number of labels must equal the number of examples.
Expected<Examples> LoadExamples(const std::string& format, const std::string& features_path,
                                const std::string& labels_path, int64_t csv_label_column);

// The bytes of the file at |path|, decompressed when they start with the
// gzip magic (1f 8b).
Expected<std::string> ReadFileMaybeGzip(const std::string& path);

// The decompressed contents of gzip data |bytes| (one or more members, as
// gzip(1) writes them); |name| is used in messages. Corrupt or truncated
// data is an error giving the compressed byte offset.
Expected<std::string> Gunzip(std::string_view bytes, std::string_view name);

// Parses an IDX file: the magic (two zero bytes, a type code — 0x08 u8,
// 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64 — and the rank), one
// big-endian 32-bit size per dimension, then the elements, big-endian, in
// row-major order. The tensor has the file's dtype and dimensions.
Expected<Tensor> ParseIdx(std::string_view bytes, std::string_view name);
// ParseIdx of the (possibly gzip-compressed) file at |path|.
Expected<Tensor> ReadIdx(const std::string& path);

// Examples for a character-level model from plain text (possibly
// gzip-compressed): each non-empty line with its '\n', cut into pieces of at
// most |example_length| bytes, is one example: features f32
// [n, example_length] holding the byte values (0-255), padded with zeros;
// labels i64 [n] holding each piece's length. A file without any
// non-empty line, or an example_length < 2, is an INVALID_ARGUMENT error.
Expected<Examples> LoadText(const std::string& path, int64_t example_length);
// LoadText of |text| already in memory; |name| is used in messages.
Expected<Examples> ParseText(std::string_view text, std::string_view name, int64_t example_length);

// Parses CSV text as LoadExamples("csv", ...) does; |name| is used in
// messages, which give the line and column ("data.csv:3:7: ...").
Expected<Examples> ParseCsv(std::string_view text, std::string_view name, int64_t label_column);

// Examples from a features tensor (numeric, rank >= 1, converted to f32)
// and a labels tensor (rank 1, integer-valued, converted to i64), both in
// host memory; the names are used in messages.
Expected<Examples> MakeExamples(const Tensor& features, const Tensor& labels, std::string_view features_name,
                                std::string_view labels_name);

}  // namespace weft::data

#endif  // WEFT_CORE_DATA_READERS_H_
