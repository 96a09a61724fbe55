// Checkpoint bundles: a set of named tensors and a metadata map saved under
// a prefix P as an index, P.index (see index.h), and data shards,
// P.data-00000-of-00001, each tensor checksummed with CRC32C.
//
//   WEFT_RETURN_IF_ERROR(checkpoint::WriteBundle("run/ckpt-100", {{"dense/w",
//   w}}, {{"step", "100"}})); WEFT_ASSIGN_OR_RETURN(auto reader,
//   checkpoint::BundleReader::Open("run/ckpt-100"));
//   WEFT_ASSIGN_OR_RETURN(Tensor w2, reader->Read("dense/w"));
//
// Writing is crash-safe: every file is written under a temporary name
// (P.index.tmp-<pid>-<n>), fsynced, and renamed into place, the data shards
// first and the index last, and then the directory is fsynced. A bundle
// exists once its index does, and then all its data is on disk; a crash at
// any moment leaves either the whole new bundle or no index for it (plus
// temporary files, which nothing reads and CheckpointManager removes).
//
// Reading checks everything a damaged or foreign file could get wrong: the
// index's own checksum and size, each shard's size, and each tensor's
// CRC32C, and says which file and which tensor is at fault.
#ifndef WEFT_CORE_CHECKPOINT_BUNDLE_H_
#define WEFT_CORE_CHECKPOINT_BUNDLE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/checkpoint/index.h"
#include "core/tensor/tensor.h"

namespace weft::checkpoint {

// "P.index".
std::string IndexPath(std::string_view prefix);
// "P.data-00000-of-00001" for shard 0 of 1.
std::string ShardPath(std::string_view prefix, int shard, int num_shards);

// The moments of a save, in order, reported to WriteOptions::observer (and
// by CheckpointManager, whose own stages follow the bundle's). Tests use
// them to interrupt a save at a chosen moment.
enum class WriteStage {
  kTensorWritten,    // one tensor's bytes are in the temporary shard (once per
                     // tensor)
  kShardsSynced,     // every temporary shard is written and fsynced
  kShardsRenamed,    // the shards have their final names; the index does not exist
                     // yet
  kIndexSynced,      // the temporary index is written and fsynced
  kIndexRenamed,     // the index has its final name: the bundle exists
  kManifestSynced,   // CheckpointManager: the temporary manifest is written and
                     // fsynced
  kManifestRenamed,  // CheckpointManager: the manifest names the new bundle
  kPruned,           // CheckpointManager: bundles beyond `keep` are deleted
};
// "tensor-written", "shards-synced", ..., "pruned".
std::string_view WriteStageName(WriteStage stage);

struct WriteOptions {
  // Called on the writing thread at each stage (optional).
  std::function<void(WriteStage)> observer;
};

// Writes |tensors| and |metadata| as the bundle |prefix|, replacing a bundle
// of that name. Tensors are host tensors of any dtype but resource (STRING
// included), with unique non-empty names. The directory of |prefix| must
// exist. An existing bundle |prefix| stops being readable (its index is
// removed) before the new data takes its place, so the two never mix.
// Errors: INVALID_ARGUMENT for bad tensors or names, NOT_FOUND for a
// missing directory, and the system's error, naming the file, for a failed
// write (temporary files are removed).
Status WriteBundle(const std::string& prefix, const std::vector<std::pair<std::string, Tensor>>& tensors,
                   const std::map<std::string, std::string>& metadata, const WriteOptions& options = {});

// Sharded bundles, written by several processes and committed by one (the
// ps tasks of a cluster each write their own variables; the chief commits):
//
//   // on each writer k of n:
//   WEFT_ASSIGN_OR_RETURN(BundleIndex part, WriteDataShard(prefix, k, n,
//   tensors));
//   // on the committer, with every writer's part:
//   WEFT_RETURN_IF_ERROR(CommitShardedBundle(prefix, parts, metadata));
//
// WriteDataShard writes P.data-<k>-of-<n> crash-safely (temporary file,
// fsync, rename) and returns its part of the index: its entries (with
// shard 0), its size as the only shard size, and "shard" and "num_shards"
// in the metadata (SerializeIndex carries it between processes). A stale
// index of |prefix| is removed first, so the bundle does not exist until
// it is committed. CommitShardedBundle checks that the parts are shards
// 0..n-1 of one bundle, each once, with no name twice, and writes P.index,
// which makes the bundle exist; a shard a writer did not finish is never
// named by an index.
Expected<BundleIndex> WriteDataShard(const std::string& prefix, int shard, int num_shards,
                                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                                     const WriteOptions& options = {});
Status CommitShardedBundle(const std::string& prefix, const std::vector<BundleIndex>& parts,
                           const std::map<std::string, std::string>& metadata, const WriteOptions& options = {});
// A part as text (hex of SerializeIndex), to travel as a string tensor,
// and back (DATA_LOSS for anything that is not such a part).
std::string EncodeIndexPart(const BundleIndex& part);
Expected<BundleIndex> DecodeIndexPart(std::string_view text, std::string_view from);

// Reads a bundle. Open checks the index and the sizes of the shards; Read
// and Verify check each tensor's CRC32C. The shard files stay open for the
// reader's life, so a reader keeps working when the bundle is deleted
// (CheckpointManager pruning it) after Open. Thread-safe: every method is
// const and may run concurrently.
class BundleReader {
 public:
  // Errors, each naming the files involved: NOT_FOUND when P.index does not
  // exist ("did you mean" another bundle of the directory); DATA_LOSS when
  // the index is truncated, corrupt or malformed, or a shard is missing or
  // of the wrong size; FAILED_PRECONDITION for a newer format version.
  static Expected<std::unique_ptr<BundleReader>> Open(const std::string& prefix);
  ~BundleReader();
  BundleReader(const BundleReader&) = delete;
  BundleReader& operator=(const BundleReader&) = delete;

  const std::string& prefix() const { return prefix_; }
  // Sorted by name.
  const std::vector<TensorEntry>& entries() const { return index_.entries; }
  const std::map<std::string, std::string>& metadata() const { return index_.metadata; }
  int num_shards() const { return static_cast<int>(index_.shard_sizes.size()); }
  // The bytes of every tensor together.
  uint64_t total_bytes() const;

  // The entry named |name|, or nullptr.
  const TensorEntry* Find(std::string_view name) const;
  // The tensor |name| in host memory, after checking its CRC32C. NOT_FOUND
  // for an unknown name (with a "did you mean"), DATA_LOSS naming the
  // tensor and the shard file when the checksum does not match.
  Expected<Tensor> Read(std::string_view name) const;
  // Checks |entry|'s CRC32C without keeping the data (DATA_LOSS as Read).
  Status Verify(const TensorEntry& entry) const;
  // Verifies every tensor; the error names the first corrupt tensor and
  // how many are corrupt in all.
  Status VerifyAll() const;

 private:
  BundleReader(std::string prefix, BundleIndex index, std::vector<int> fds)
      : prefix_(std::move(prefix)), index_(std::move(index)), fds_(std::move(fds)) {}
  // Reads |entry|'s bytes into |out| (|entry.bytes| long) and checks them.
  Status ReadBytes(const TensorEntry& entry, char* out) const;
  Status CorruptError(const TensorEntry& entry, uint32_t actual) const;

  std::string prefix_;
  BundleIndex index_;
  std::vector<int> fds_;  // one per shard
};

}  // namespace weft::checkpoint

#endif  // WEFT_CORE_CHECKPOINT_BUNDLE_H_
