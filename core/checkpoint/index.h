// The index file of a checkpoint bundle (P.index): what the bundle holds
// and where, with a checksum over the whole file. bundle.h reads and writes
// bundles; this file is the format alone, so that tests and the fuzzer can
// reach the parser without touching the disk.
//
// The index is a small hand-written little-endian binary format rather
// than Cap'n Proto: it is a flat list of fixed records, it must be
// checksummed byte for byte anyway, and a hand-written reader reports
// exactly which field of which tensor ran past the end ("tensor #3
// 'dense/w': shape runs past the end of the index") instead of a generic
// decoding exception. Layout, version 1:
//
//   header  "WEFTCKPT" | u32 version | u32 reserved (0) | u64 body size
//   body    u32 shards, u64 size of each shard
//           u32 metadata entries, each: str key, str value (keys ascending)
//           u32 tensors, each: str name | u32 dtype | u32 rank | i64 dims[rank]
//                                | u32 shard | u64 offset | u64 bytes
//                                | u32 masked CRC32C of the bytes
//                             (names strictly ascending)
//   footer  u32 masked CRC32C of header and body
//
// where str is a u32 length and that many bytes. The magic, version and
// body size come first and keep their places in every version, so a reader
// can always say "truncated" or "written by a newer weft" precisely.
//
// A STRING tensor's bytes are, per element, a u64 length and the
// characters; every other dtype's are its elements, dense, row-major,
// little-endian.
#ifndef WEFT_CORE_CHECKPOINT_INDEX_H_
#define WEFT_CORE_CHECKPOINT_INDEX_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"

namespace weft::checkpoint {

// The version this weft writes, and the newest it reads.
inline constexpr uint32_t kBundleFormatVersion = 1;
// "WEFTCKPT": the first bytes of every index.
inline constexpr std::string_view kIndexMagic = "WEFTCKPT";
// Magic, version, reserved word and body size.
inline constexpr std::size_t kIndexHeaderSize = 24;

// Where one tensor lives in a bundle.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;
  // The data shard holding the bytes, and their place in it.
  int shard = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  // The CRC32C of the bytes (unmasked; the file stores it masked).
  uint32_t crc32c = 0;

  friend bool operator==(const TensorEntry&, const TensorEntry&) = default;
};

struct BundleIndex {
  uint32_t version = kBundleFormatVersion;
  // The size in bytes of each data shard; there is at least one.
  std::vector<uint64_t> shard_sizes;
  // Opaque to the bundle: what the saver wants to find again (step, seed,
  // input position, model fingerprint, ...).
  std::map<std::string, std::string> metadata;
  // Sorted by name, names unique.
  std::vector<TensorEntry> entries;
};

// The bytes of |index| (which must be well formed: entries sorted and
// unique, shards and ranges consistent — WriteBundle makes it so).
std::string SerializeIndex(const BundleIndex& index);

// Parses index bytes read from |path| (used in messages only). Every
// problem is a DATA_LOSS naming |path| — "checkpoint P.index is truncated:
// ...", "... is corrupt: its checksum ...", "... is malformed: tensor #2
// 'w': ..." — except a version newer than kBundleFormatVersion, which is
// FAILED_PRECONDITION. Never crashes on any input; allocations are bounded
// by the size of |bytes|.
Expected<BundleIndex> ParseIndex(std::string_view bytes, std::string_view path);

}  // namespace weft::checkpoint

#endif  // WEFT_CORE_CHECKPOINT_INDEX_H_
