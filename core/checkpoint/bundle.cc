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

#include "core/base/crc32c.h"
#include "core/checkpoint/internal/file_util.h"
#include "core/config/value.h"

namespace weft::checkpoint {

// Tensor bytes go to disk as they are in memory; the format is
// little-endian, which every machine weft builds for is.
static_assert(std::endian::native == std::endian::little, "checkpoint I/O assumes a little-endian host");

namespace {

namespace fs = std::filesystem;
using internal::ErrnoStatus;
using internal::FsyncDirectory;
using internal::ScopedFd;

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
    if (EndsWith(name, ".index")) candidates.push_back(name.substr(0, name.size() - 6));
  }
  const std::string base = fs::path(prefix).filename().string();
  const std::string hint = config::ClosestMatch(base, candidates);
  return NotFoundError("checkpoint ", prefix, " not found: ", IndexPath(prefix), " does not exist",
                       hint.empty() ? std::string()
                                    : StrCat("; did you mean ", (fs::path(dir) / hint).string(), "?"));
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
  WEFT_RETURN_IF_ERROR(CheckTensors(prefix, tensors));
  const std::string dir = DirectoryOf(prefix);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError("cannot save checkpoint ", prefix, ": directory ", dir, " does not exist");
  }
  std::vector<const std::pair<std::string, Tensor>*> sorted;
  for (const auto& item : tensors) sorted.push_back(&item);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->first < b->first; });

  const std::string suffix = internal::TempSuffix();
  const std::string shard = ShardPath(prefix, 0, 1);
  const std::string index_path = IndexPath(prefix);
  const std::string shard_temp = shard + suffix;
  const std::string index_temp = index_path + suffix;
  // Whatever happens below, no temporary file outlives a failed save.
  struct Cleanup {
    std::vector<std::string> paths;
    ~Cleanup() {
      for (const std::string& p : paths) ::unlink(p.c_str());
    }
  } cleanup{{shard_temp, index_temp}};

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

  {
    auto fd = ScopedFd::Create(index_temp);
    if (!fd.ok()) return fd.status().WithContext(StrCat("cannot save checkpoint ", prefix));
    s = fd->WriteAll(SerializeIndex(index));
    if (s.ok()) s = fd->Sync();
    if (s.ok()) s = fd->Close();
    if (!s.ok()) return s.WithContext(StrCat("cannot save checkpoint ", prefix));
  }
  Observe(options, WriteStage::kIndexSynced);
  if (::rename(index_temp.c_str(), index_path.c_str()) != 0) {
    return ErrnoStatus(StrCat("cannot save checkpoint ", prefix, ": renaming ", index_temp, " to ", index_path));
  }
  cleanup.paths.clear();
  WEFT_RETURN_IF_ERROR(FsyncDirectory(dir).WithContext(StrCat("cannot save checkpoint ", prefix)));
  Observe(options, WriteStage::kIndexRenamed);
  return Status();
}

// --- BundleReader ---------------------------------------------------------------

Expected<std::unique_ptr<BundleReader>> BundleReader::Open(const std::string& prefix) {
  const std::string index_path = IndexPath(prefix);
  auto bytes = internal::ReadFile(index_path);
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
    struct stat st{};
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
                           expected, size < expected ? " (the shard is truncated)" : " (the shard does not match its index)");
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
  WEFT_RETURN_IF_ERROR(internal::PreadAll(fds_[static_cast<std::size_t>(e.shard)], out, e.bytes, e.offset, path)
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
    const std::string hint = config::ClosestMatch(name, names);
    return NotFoundError("checkpoint ", prefix_, " has no tensor ", Quote(name),
                         !hint.empty()    ? StrCat("; did you mean ", Quote(hint), "?")
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
    WEFT_RETURN_IF_ERROR(
        internal::PreadAll(fds_[static_cast<std::size_t>(e.shard)], buffer.data(), n, e.offset + done, path)
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
