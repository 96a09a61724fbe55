#include "core/checkpoint/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/base/crc32c.h"
#include "core/base/file_util.h"

namespace weft::checkpoint {

// Tensor bytes go to disk as they are in memory; the format is
// little-endian, which every machine weft builds for is.
static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");

namespace {

namespace fs = std::filesystem;

std::string Hex(uint32_t v) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "0x%08x", v);
  return buffer;
}

void Observe(const WriteOptions& options, WriteStage stage) {
  if (options.observer) options.observer(stage);
}

// The encoding of a STRING tensor: per element, a u64 length and the bytes.
std::string EncodeStrings(const Tensor& t) {
  std::string out;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const std::string_view s = t.string_at(i);
    const uint64_t size = s.size();
    char length[8];
    std::memcpy(length, &size, 8);
    out.append(length, 8);
    out.append(s);
  }
  return out;
}

Expected<Tensor> DecodeStrings(const TensorEntry& e, std::string_view bytes, std::string_view shard_path) {
  std::vector<std::string> values;
  const int64_t n = e.shape.num_elements();
  values.reserve(static_cast<std::size_t>(n));
  std::size_t at = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t size = 0;
    if (bytes.size() - at < 8) break;
    std::memcpy(&size, bytes.data() + at, 8);
    at += 8;
    if (size > bytes.size() - at) {
      return DataLossError("tensor ", Quote(e.name), " in ", shard_path, " is malformed: string ", i, " of ", n,
                           " has length ", size, " but only ", bytes.size() - at, " bytes remain");
    }
    values.emplace_back(bytes.substr(at, static_cast<std::size_t>(size)));
    at += static_cast<std::size_t>(size);
  }
  if (static_cast<int64_t>(values.size()) != n || at != bytes.size()) {
    return DataLossError("tensor ", Quote(e.name), " in ", shard_path, " is malformed: its ", bytes.size(),
                         " bytes do not hold exactly ", n, " strings");
  }
  return Tensor::Strings(values, e.shape);
}

std::string DirectoryOf(std::string_view prefix) {
  const fs::path parent = fs::path(prefix).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

Status CheckTensors(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::vector<std::string_view> names;
  for (const auto& [name, t] : tensors) {
    const std::string what = StrCat("cannot save checkpoint ", prefix, ": tensor ", Quote(name));
    if (name.empty()) return InvalidArgumentError("cannot save checkpoint ", prefix, ": a tensor has an empty name");
    if (!t.valid()) return InvalidArgumentError(what, " is an empty (invalid) tensor");
    if (t.dtype() == DType::kResource) {
      return InvalidArgumentError(what, " is a resource handle; save the variable's value instead");
    }
    if (!t.host_visible()) return InvalidArgumentError(what, " is in device memory; copy it to the host first");
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) {
    return InvalidArgumentError("cannot save checkpoint ", prefix, ": tensor name ", Quote(*dup), " is used twice");
  }
  return Status();
}

// Files removed when it goes out of scope, unless |paths| was cleared:
// no temporary file outlives a failed save.
struct TemporaryFiles {
  std::vector<std::string> paths;
  ~TemporaryFiles() {
    for (const std::string& p : paths) ::unlink(p.c_str());
  }
};

// Checks |tensors| and the directory of |prefix|; the tensors by name.
Expected<std::vector<const std::pair<std::string, Tensor>*>> SortedForSave(
    const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  WEFT_RETURN_IF_ERROR(CheckTensors(prefix, tensors));
  const std::string dir = DirectoryOf(prefix);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError("cannot save checkpoint ", prefix, ": directory ", dir, " does not exist");
  }
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  for (const auto& item : tensors) sorted.push_back(&item);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  return sorted;
}

// Writes the shard and fills in |index|'s entries and shard size.
Status WriteShard(const std::string& path, const std::vector<const std::pair<std::string, Tensor>*>& sorted,
                  BundleIndex* index, const WriteOptions& options) {
  WEFT_ASSIGN_OR_RETURN(ScopedFd fd, ScopedFd::Create(path));
  uint64_t offset = 0;
  for (const auto* item : sorted) {
    const Tensor& t = item->second;
    std::string encoded;
    std::string_view bytes;
    if (t.dtype() == DType::kString) {
      encoded = EncodeStrings(t);
      bytes = encoded;
    } else {
      bytes = std::string_view(static_cast<const char*>(t.raw_data()), t.byte_size());
    }
    WEFT_RETURN_IF_ERROR(fd.WriteAll(bytes));
    TensorEntry e;
    e.name = item->first;
    e.dtype = t.dtype();
    e.shape = t.shape();
    e.shard = 0;
    e.offset = offset;
    e.bytes = bytes.size();
    e.crc32c = Crc32c(bytes);
    offset += bytes.size();
    index->entries.push_back(std::move(e));
    Observe(options, WriteStage::kTensorWritten);
  }
  WEFT_RETURN_IF_ERROR(fd.Sync());
  WEFT_RETURN_IF_ERROR(fd.Close());
  index->shard_sizes = {offset};
  return Status();
}

std::string Describe(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 8;
  std::vector<std::string> quoted;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i) quoted.push_back(Quote(names[i]));
  if (names.size() > kShown) quoted.push_back(StrCat("... (", names.size(), " in all)"));
  return StrJoin(quoted, ", ");
}

// Why |prefix| has no index, with a hint when it is a near miss.
Status MissingIndex(const std::string& prefix) {
  const std::string dir = DirectoryOf(prefix);
  std::error_code ec;
  if (fs::is_directory(prefix, ec)) {
    return NotFoundError("checkpoint ", prefix, " not found: it is a directory, not a bundle prefix (list its ",
                         "checkpoints with `weft ckpt ls ", prefix, "`)");
  }
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError("checkpoint ", prefix, " not found: directory ", dir, " does not exist");
  }
  std::vector<std::string> candidates;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".index")) candidates.push_back(name.substr(0, name.size() - 6));
  }
  const std::string base = fs::path(prefix).filename().string();
  const std::string hint = ClosestMatch(base, candidates);
  return NotFoundError("checkpoint ", prefix, " not found: ", IndexPath(prefix), " does not exist",
                       hint.empty() ? std::string() : StrCat("; did you mean ", (fs::path(dir) / hint).string(), "?"));
}

}  // namespace

std::string IndexPath(std::string_view prefix) { return StrCat(prefix, ".index"); }

std::string ShardPath(std::string_view prefix, int shard, int num_shards) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, ".data-%05d-of-%05d", shard, num_shards);
  return StrCat(prefix, buffer);
}

std::string_view WriteStageName(WriteStage stage) {
  switch (stage) {
    case WriteStage::kTensorWritten: return "tensor-written";
    case WriteStage::kShardsSynced: return "shards-synced";
    case WriteStage::kShardsRenamed: return "shards-renamed";
    case WriteStage::kIndexSynced: return "index-synced";
    case WriteStage::kIndexRenamed: return "index-renamed";
    case WriteStage::kManifestSynced: return "manifest-synced";
    case WriteStage::kManifestRenamed: return "manifest-renamed";
    case WriteStage::kPruned: return "pruned";
  }
  return "unknown";
}

Status WriteBundle(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata, const WriteOptions& options) {
  WEFT_ASSIGN_OR_RETURN(auto sorted, SortedForSave(prefix, tensors));
  const std::string dir = DirectoryOf(prefix);

  const std::string suffix = TempSuffix();
  const std::string shard = ShardPath(prefix, 0, 1);
  const std::string index_path = IndexPath(prefix);
  const std::string shard_temp = shard + suffix;
  // Whatever happens below, no temporary file outlives a failed save.
  TemporaryFiles cleanup{{shard_temp}};

  BundleIndex index;
  index.metadata = metadata;
  Status s = WriteShard(shard_temp, sorted, &index, options);
  if (!s.ok()) return s.WithContext(StrCat("cannot save checkpoint ", prefix));
  Observe(options, WriteStage::kShardsSynced);

  // Make an older bundle of this name unreadable before its data is
  // replaced, so that its index can never describe the new data.
  if (::unlink(index_path.c_str()) == 0) {
    WEFT_RETURN_IF_ERROR(FsyncDirectory(dir).WithContext(StrCat("cannot save checkpoint ", prefix)));
  } else if (errno != ENOENT) {
    return ErrnoStatus(StrCat("cannot save checkpoint ", prefix, ": removing the old ", index_path));
  }
  if (::rename(shard_temp.c_str(), shard.c_str()) != 0) {
    return ErrnoStatus(StrCat("cannot save checkpoint ", prefix, ": renaming ", shard_temp, " to ", shard));
  }
  Observe(options, WriteStage::kShardsRenamed);

  cleanup.paths.clear();
  // The index last, by the one atomic writer: the bundle exists once it is
  // renamed into place.
  s = WriteFileAtomically(index_path, SerializeIndex(index), [&] { Observe(options, WriteStage::kIndexSynced); });
  if (!s.ok()) return s.WithContext(StrCat("cannot save checkpoint ", prefix));
  Observe(options, WriteStage::kIndexRenamed);
  return Status();
}

Expected<BundleIndex> WriteDataShard(const std::string& prefix, int shard, int num_shards,
                                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                                     const WriteOptions& options) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    return InvalidArgumentError("cannot save checkpoint ", prefix, ": shard ", shard, " of ", num_shards,
                                " is out of range");
  }
  WEFT_ASSIGN_OR_RETURN(auto sorted, SortedForSave(prefix, tensors));
  const std::string dir = DirectoryOf(prefix);
  const std::string path = ShardPath(prefix, shard, num_shards);
  const std::string temp = path + TempSuffix();
  TemporaryFiles cleanup{{temp}};
  BundleIndex part;
  part.metadata = {{"shard", std::to_string(shard)}, {"num_shards", std::to_string(num_shards)}};
  const std::string context = StrCat("cannot save shard ", shard, " of checkpoint ", prefix);
  Status s = WriteShard(temp, sorted, &part, options);
  if (!s.ok()) return s.WithContext(context);
  const std::string index_path = IndexPath(prefix);
  if (::unlink(index_path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(StrCat(context, ": removing the old ", index_path));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) return ErrnoStatus(StrCat(context, ": renaming ", temp, " to ", path));
  cleanup.paths.clear();
  WEFT_RETURN_IF_ERROR(FsyncDirectory(dir).WithContext(context));
  return part;
}

Status CommitShardedBundle(const std::string& prefix, const std::vector<BundleIndex>& parts,
                           const std::map<std::string, std::string>& metadata, const WriteOptions& options) {
  const std::string context = StrCat("cannot commit checkpoint ", prefix);
  if (parts.empty()) return InvalidArgumentError(context, ": no shards");
  BundleIndex index;
  index.metadata = metadata;
  const int n = static_cast<int>(parts.size());
  index.shard_sizes.assign(parts.size(), 0);
  std::vector<bool> seen(parts.size(), false);
  std::set<std::string> names;
  for (const BundleIndex& part : parts) {
    auto number = [&](const char* key) -> int64_t {
      auto it = part.metadata.find(key);
      if (it == part.metadata.end()) return -1;
      try {
        return std::stoll(it->second);
      } catch (...) {
        return -1;
      }
    };
    const int64_t shard = number("shard");
    const int64_t of = number("num_shards");
    if (of != n || shard < 0 || shard >= n || part.shard_sizes.size() != 1) {
      return InvalidArgumentError(context, ": a part says it is shard ", shard, " of ", of, ", but ", n,
                                  " parts were given");
    }
    if (seen[static_cast<std::size_t>(shard)])
      return InvalidArgumentError(context, ": shard ", shard, " is given twice");
    seen[static_cast<std::size_t>(shard)] = true;
    index.shard_sizes[static_cast<std::size_t>(shard)] = part.shard_sizes[0];
    for (TensorEntry e : part.entries) {
      if (!names.insert(e.name).second) {
        return InvalidArgumentError(context, ": tensor ", Quote(e.name), " is in two shards");
      }
      e.shard = static_cast<int>(shard);
      index.entries.push_back(std::move(e));
    }
  }
  std::sort(index.entries.begin(), index.entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  // Every shard must be on disk with the size its writer reported.
  for (int i = 0; i < n; ++i) {
    const std::string path = ShardPath(prefix, i, n);
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return DataLossError(context, ": its data shard ", path, " is missing");
    if (size != index.shard_sizes[static_cast<std::size_t>(i)]) {
      return DataLossError(context, ": its data shard ", path, " has ", size, " bytes, its writer reported ",
                           index.shard_sizes[static_cast<std::size_t>(i)]);
    }
  }
  Status s = WriteFileAtomically(IndexPath(prefix), SerializeIndex(index),
                                 [&] { Observe(options, WriteStage::kIndexSynced); });
  if (!s.ok()) return s.WithContext(context);
  Observe(options, WriteStage::kIndexRenamed);
  return Status();
}

std::string EncodeIndexPart(const BundleIndex& part) {
  static const char kHex[] = "0123456789abcdef";
  const std::string bytes = SerializeIndex(part);
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Expected<BundleIndex> DecodeIndexPart(std::string_view text, std::string_view from) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return DataLossError(from, ": a checkpoint shard's index part has odd length");
  std::string bytes(text.size() / 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = digit(text[2 * i]);
    const int lo = digit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return DataLossError(from, ": a checkpoint shard's index part is not hex");
    bytes[i] = static_cast<char>(hi * 16 + lo);
  }
  return ParseIndex(bytes, from);
}

// --- BundleReader
// ---------------------------------------------------------------

Expected<std::unique_ptr<BundleReader>> BundleReader::Open(const std::string& prefix) {
  const std::string index_path = IndexPath(prefix);
  auto bytes = ReadFile(index_path);
  if (!bytes.ok()) {
    if (bytes.status().code() == Code::kNotFound) return MissingIndex(prefix);
    return bytes.status().WithContext(StrCat("cannot open checkpoint ", prefix));
  }
  WEFT_ASSIGN_OR_RETURN(BundleIndex index, ParseIndex(*bytes, index_path));
  std::vector<int> fds;
  auto close_all = [&fds] {
    for (int fd : fds) ::close(fd);
  };
  const int shards = static_cast<int>(index.shard_sizes.size());
  for (int i = 0; i < shards; ++i) {
    const std::string path = ShardPath(prefix, i, shards);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      close_all();
      if (error == ENOENT) {
        return DataLossError("checkpoint ", prefix, " is incomplete: its data shard ", path, " is missing");
      }
      errno = error;
      return ErrnoStatus(StrCat("cannot open checkpoint ", prefix, ": opening ", path));
    }
    fds.push_back(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const Status error = ErrnoStatus(StrCat("cannot open checkpoint ", prefix, ": reading the size of ", path));
      close_all();
      return error;
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t expected = index.shard_sizes[static_cast<std::size_t>(i)];
    if (size != expected) {
      close_all();
      return DataLossError("checkpoint ", prefix, ": data shard ", path, " has ", size, " bytes but the index says ",
                           expected,
                           size < expected ? " (the shard is truncated)" : " (the shard does not match its index)");
    }
  }
  return std::unique_ptr<BundleReader>(new BundleReader(prefix, std::move(index), std::move(fds)));
}

BundleReader::~BundleReader() {
  for (int fd : fds_) ::close(fd);
}

uint64_t BundleReader::total_bytes() const {
  uint64_t total = 0;
  for (const TensorEntry& e : index_.entries) total += e.bytes;
  return total;
}

const TensorEntry* BundleReader::Find(std::string_view name) const {
  auto it = std::lower_bound(index_.entries.begin(), index_.entries.end(), name,
                             [](const TensorEntry& e, std::string_view n) { return e.name < n; });
  return it != index_.entries.end() && it->name == name ? &*it : nullptr;
}

Status BundleReader::CorruptError(const TensorEntry& e, uint32_t actual) const {
  return DataLossError("checkpoint ", prefix_, ": tensor ", Quote(e.name), " is corrupt: its ", e.bytes,
                       " bytes at offset ", e.offset, " of ", ShardPath(prefix_, e.shard, num_shards()),
                       " have CRC32C ", Hex(actual), " but the index says ", Hex(e.crc32c));
}

Status BundleReader::ReadBytes(const TensorEntry& e, char* out) const {
  const std::string path = ShardPath(prefix_, e.shard, num_shards());
  WEFT_RETURN_IF_ERROR(PreadAll(fds_[static_cast<std::size_t>(e.shard)], out, e.bytes, e.offset, path)
                           .WithContext(StrCat("checkpoint ", prefix_, ": tensor ", Quote(e.name))));
  const uint32_t actual = Crc32c(out, e.bytes);
  if (actual != e.crc32c) return CorruptError(e, actual);
  return Status();
}

Expected<Tensor> BundleReader::Read(std::string_view name) const {
  const TensorEntry* e = Find(name);
  if (e == nullptr) {
    std::vector<std::string> names;
    for (const TensorEntry& entry : index_.entries) names.push_back(entry.name);
    const std::string hint = ClosestMatch(name, names);
    return NotFoundError("checkpoint ", prefix_, " has no tensor ", Quote(name),
                         !hint.empty()   ? StrCat("; did you mean ", Quote(hint), "?")
                         : names.empty() ? std::string(" (it holds no tensors)")
                                         : StrCat(" (it has ", Describe(names), ")"));
  }
  if (e->dtype == DType::kString) {
    std::string bytes(e->bytes, '\0');
    WEFT_RETURN_IF_ERROR(ReadBytes(*e, bytes.data()));
    auto t = DecodeStrings(*e, bytes, ShardPath(prefix_, e->shard, num_shards()));
    if (!t.ok()) return t.status().WithContext(StrCat("checkpoint ", prefix_));
    return t;
  }
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(e->dtype, e->shape));
  WEFT_RETURN_IF_ERROR(ReadBytes(*e, static_cast<char*>(t.raw_data())));
  return t;
}

Status BundleReader::Verify(const TensorEntry& e) const {
  constexpr uint64_t kChunk = uint64_t{4} << 20;
  std::string buffer(static_cast<std::size_t>(std::min(e.bytes, kChunk)), '\0');
  const std::string path = ShardPath(prefix_, e.shard, num_shards());
  uint32_t crc = 0;
  for (uint64_t done = 0; done < e.bytes;) {
    const uint64_t n = std::min(kChunk, e.bytes - done);
    WEFT_RETURN_IF_ERROR(PreadAll(fds_[static_cast<std::size_t>(e.shard)], buffer.data(), n, e.offset + done, path)
                             .WithContext(StrCat("checkpoint ", prefix_, ": tensor ", Quote(e.name))));
    crc = Crc32cExtend(crc, buffer.data(), static_cast<std::size_t>(n));
    done += n;
  }
  if (crc != e.crc32c) return CorruptError(e, crc);
  return Status();
}

Status BundleReader::VerifyAll() const {
  Status first;
  int corrupt = 0;
  for (const TensorEntry& e : index_.entries) {
    Status s = Verify(e);
    if (s.ok()) continue;
    if (first.ok()) first = s;
    ++corrupt;
  }
  if (corrupt > 1) return Status(first.code(), StrCat(first.message(), " (", corrupt, " tensors fail in all)"));
  return first;
}

}  // namespace weft::checkpoint
