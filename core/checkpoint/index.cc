#include "core/checkpoint/index.h"

#include <cstring>

#include "core/base/crc32c.h"
#include "weft/weft_tensor.h"

namespace weft::checkpoint {
namespace {

// Smallest encodings, to reject counts the remaining bytes cannot hold
// before reserving anything for them.
constexpr std::size_t kMinMetadataEntry = 8;  // two empty strings
constexpr std::size_t kMinTensorEntry = 4 + 4 + 4 + 4 + 8 + 8 + 4;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
void PutString(std::string& out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string Hex(uint32_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x";
  for (int i = 7; i >= 0; --i) out.push_back(kDigits[(v >> (4 * i)) & 0xfu]);
  return out;
}

// A bounds-checked cursor over the body. Every read names the field, so a
// short body says which field of which record ran out.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::size_t base) : bytes_(bytes), base_(base) {}

  std::size_t remaining() const { return bytes_.size() - at_; }
  bool done() const { return at_ == bytes_.size(); }
  // The position in the file, for messages.
  std::size_t position() const { return base_ + at_; }

  Status U32(uint32_t* out, std::string_view what) {
    WEFT_RETURN_IF_ERROR(Need(4, what));
    *out = GetU32(bytes_.data() + at_);
    at_ += 4;
    return Status();
  }
  Status U64(uint64_t* out, std::string_view what) {
    WEFT_RETURN_IF_ERROR(Need(8, what));
    *out = GetU64(bytes_.data() + at_);
    at_ += 8;
    return Status();
  }
  Status String(std::string* out, std::string_view what) {
    uint32_t size = 0;
    WEFT_RETURN_IF_ERROR(U32(&size, StrCat(what, " length")));
    WEFT_RETURN_IF_ERROR(Need(size, what));
    out->assign(bytes_.data() + at_, size);
    at_ += size;
    return Status();
  }

 private:
  Status Need(uint64_t n, std::string_view what) const {
    if (n > remaining()) {
      return InvalidArgumentError(what, " (", n, " bytes at byte ", position(), ") runs past the end of the body (",
                                  remaining(), " bytes left)");
    }
    return Status();
  }

  std::string_view bytes_;
  std::size_t base_;
  std::size_t at_ = 0;
};

bool StorableDType(DType dtype) {
  return dtype == DType::kString || (dtype != DType::kResource && DTypeSize(dtype) > 0);
}

Status ParseEntry(Cursor& in, const BundleIndex& index, TensorEntry* e) {
  WEFT_RETURN_IF_ERROR(in.String(&e->name, "the name"));
  if (e->name.empty()) return InvalidArgumentError("the name is empty");
  uint32_t dtype = 0, rank = 0, shard = 0, crc = 0;
  WEFT_RETURN_IF_ERROR(in.U32(&dtype, "the dtype"));
  e->dtype = static_cast<DType>(dtype);
  if (DTypeName(e->dtype) == "invalid" || !StorableDType(e->dtype)) {
    return InvalidArgumentError("dtype ", dtype, " is not one a checkpoint can hold");
  }
  WEFT_RETURN_IF_ERROR(in.U32(&rank, "the rank"));
  if (rank > WEFT_MAX_RANK) return InvalidArgumentError("rank ", rank, " is over the maximum of ", WEFT_MAX_RANK);
  std::vector<int64_t> dims(rank);
  for (uint32_t d = 0; d < rank; ++d) {
    uint64_t dim = 0;
    WEFT_RETURN_IF_ERROR(in.U64(&dim, StrCat("dimension ", d)));
    dims[d] = static_cast<int64_t>(dim);
  }
  auto elements = CheckedNumElements(dims);
  if (!elements.ok()) return InvalidArgumentError("shape ", ListString(dims), ": ", elements.status().message());
  e->shape = Shape(std::move(dims));
  WEFT_RETURN_IF_ERROR(in.U32(&shard, "the shard"));
  WEFT_RETURN_IF_ERROR(in.U64(&e->offset, "the offset"));
  WEFT_RETURN_IF_ERROR(in.U64(&e->bytes, "the byte count"));
  WEFT_RETURN_IF_ERROR(in.U32(&crc, "the checksum"));
  e->crc32c = Crc32cUnmask(crc);
  if (shard >= index.shard_sizes.size()) {
    return InvalidArgumentError("shard ", shard, " does not exist (the bundle has ", index.shard_sizes.size(), ")");
  }
  e->shard = static_cast<int>(shard);
  const uint64_t shard_size = index.shard_sizes[shard];
  if (e->offset > shard_size || e->bytes > shard_size - e->offset) {
    return InvalidArgumentError("bytes [", e->offset, ", +", e->bytes, ") lie outside shard ", shard, " (", shard_size,
                                " bytes)");
  }
  const uint64_t n = static_cast<uint64_t>(*elements);
  if (e->dtype == DType::kString) {
    // Each element has at least its 8-byte length.
    if (n > e->bytes / 8) {
      return InvalidArgumentError(n, " strings cannot fit in ", e->bytes, " bytes");
    }
  } else {
    const uint64_t size = DTypeSize(e->dtype);
    if (n > UINT64_MAX / size || n * size != e->bytes) {
      return InvalidArgumentError(DTypeName(e->dtype), e->shape.ToString(), " takes ",
                                  n > UINT64_MAX / size ? std::string("more than 2^64") : StrCat(n * size),
                                  " bytes, but the entry says ", e->bytes);
    }
  }
  return Status();
}

Status ParseBody(std::string_view body, BundleIndex* index) {
  Cursor in(body, kIndexHeaderSize);
  uint32_t shards = 0;
  WEFT_RETURN_IF_ERROR(in.U32(&shards, "the shard count"));
  if (shards == 0) return InvalidArgumentError("the shard count is 0");
  if (shards > in.remaining() / 8) {
    return InvalidArgumentError("the shard count ", shards, " cannot fit in the ", in.remaining(), " bytes left");
  }
  index->shard_sizes.resize(shards);
  for (uint32_t s = 0; s < shards; ++s)
    WEFT_RETURN_IF_ERROR(in.U64(&index->shard_sizes[s], StrCat("shard ", s, " size")));

  uint32_t count = 0;
  WEFT_RETURN_IF_ERROR(in.U32(&count, "the metadata count"));
  if (count > in.remaining() / kMinMetadataEntry) {
    return InvalidArgumentError("the metadata count ", count, " cannot fit in the ", in.remaining(), " bytes left");
  }
  for (uint32_t i = 0; i < count; ++i) {
    std::string key, value;
    Status s = in.String(&key, "the key");
    if (s.ok()) s = in.String(&value, "the value");
    if (s.ok() && !index->metadata.empty() && key <= index->metadata.rbegin()->first) {
      s = InvalidArgumentError("key ", Quote(key), " is out of order or repeated");
    }
    if (!s.ok()) return s.WithContext(StrCat("metadata entry #", i));
    index->metadata.emplace_hint(index->metadata.end(), std::move(key), std::move(value));
  }

  WEFT_RETURN_IF_ERROR(in.U32(&count, "the tensor count"));
  if (count > in.remaining() / kMinTensorEntry) {
    return InvalidArgumentError("the tensor count ", count, " cannot fit in the ", in.remaining(), " bytes left");
  }
  index->entries.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    TensorEntry e;
    Status s = ParseEntry(in, *index, &e);
    if (s.ok() && !index->entries.empty() && e.name <= index->entries.back().name) {
      s = InvalidArgumentError("the name is out of order or repeated (after ", Quote(index->entries.back().name), ")");
    }
    if (!s.ok()) {
      return s.WithContext(e.name.empty() ? StrCat("tensor #", i) : StrCat("tensor #", i, " ", Quote(e.name)));
    }
    index->entries.push_back(std::move(e));
  }
  if (!in.done()) return InvalidArgumentError(in.remaining(), " unexpected bytes follow the last tensor");
  return Status();
}

}  // namespace

std::string SerializeIndex(const BundleIndex& index) {
  std::string out;
  out.append(kIndexMagic);
  PutU32(out, index.version);
  PutU32(out, 0);
  PutU64(out, 0);  // body size, patched below
  PutU32(out, static_cast<uint32_t>(index.shard_sizes.size()));
  for (uint64_t size : index.shard_sizes) PutU64(out, size);
  PutU32(out, static_cast<uint32_t>(index.metadata.size()));
  for (const auto& [key, value] : index.metadata) {
    PutString(out, key);
    PutString(out, value);
  }
  PutU32(out, static_cast<uint32_t>(index.entries.size()));
  for (const TensorEntry& e : index.entries) {
    PutString(out, e.name);
    PutU32(out, static_cast<uint32_t>(e.dtype));
    PutU32(out, static_cast<uint32_t>(e.shape.rank()));
    for (int64_t d : e.shape.dims()) PutU64(out, static_cast<uint64_t>(d));
    PutU32(out, static_cast<uint32_t>(e.shard));
    PutU64(out, e.offset);
    PutU64(out, e.bytes);
    PutU32(out, Crc32cMask(e.crc32c));
  }
  std::string size;
  PutU64(size, out.size() - kIndexHeaderSize);
  out.replace(16, 8, size);
  PutU32(out, Crc32cMask(Crc32c(out)));
  return out;
}

Expected<BundleIndex> ParseIndex(std::string_view bytes, std::string_view path) {
  const std::string what = StrCat("checkpoint ", path);
  if (bytes.size() < kIndexMagic.size() || bytes.substr(0, kIndexMagic.size()) != kIndexMagic) {
    // A prefix of the magic is a file cut short; anything else is not ours.
    if (bytes.size() < kIndexMagic.size() && kIndexMagic.substr(0, bytes.size()) == bytes) {
      return DataLossError(what, " is truncated: it has ", bytes.size(), " bytes, fewer than the ", kIndexHeaderSize,
                           "-byte header");
    }
    return DataLossError(what, " is not a weft checkpoint index: it does not start with \"", kIndexMagic, "\"");
  }
  if (bytes.size() < kIndexHeaderSize) {
    return DataLossError(what, " is truncated: it has ", bytes.size(), " bytes, fewer than the ", kIndexHeaderSize,
                         "-byte header");
  }
  BundleIndex index;
  index.version = GetU32(bytes.data() + 8);
  if (index.version == 0 || index.version > kBundleFormatVersion) {
    if (index.version == 0) return DataLossError(what, " is corrupt: it has format version 0, which no weft writes");
    return FailedPreconditionError(what, " has format version ", index.version, ", newer than this weft reads (",
                                   kBundleFormatVersion, "): it was written by a newer weft; upgrade weft to read it");
  }
  const uint64_t body_size = GetU64(bytes.data() + 16);
  const uint64_t available = bytes.size() - kIndexHeaderSize;
  if (body_size > available || available - body_size < 4) {
    const bool overflow = body_size > UINT64_MAX - kIndexHeaderSize - 4;
    return DataLossError(what, " is truncated: its header promises ",
                         overflow ? std::string("more than 2^64") : StrCat(kIndexHeaderSize + body_size + 4),
                         " bytes, the file has ", bytes.size());
  }
  if (available - body_size > 4) {
    return DataLossError(what, " is corrupt: ", available - body_size - 4,
                         " unexpected bytes follow the checksum (the file has ", bytes.size(),
                         " bytes, its header says ", kIndexHeaderSize + body_size + 4, ")");
  }
  const std::size_t covered = kIndexHeaderSize + static_cast<std::size_t>(body_size);
  const uint32_t stored = Crc32cUnmask(GetU32(bytes.data() + covered));
  const uint32_t actual = Crc32c(bytes.data(), covered);
  if (stored != actual) {
    return DataLossError(what, " is corrupt: its checksum says ", Hex(stored), " but its contents hash to ",
                         Hex(actual));
  }
  Status s = ParseBody(bytes.substr(kIndexHeaderSize, static_cast<std::size_t>(body_size)), &index);
  if (!s.ok()) return DataLossError(what, " is malformed: ", s.message());
  return index;
}

}  // namespace weft::checkpoint
