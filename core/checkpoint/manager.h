// A directory of checkpoints for one training run: bundles named
// "ckpt-<step>" (see bundle.h) and a manifest, "checkpoint", naming the
// newest bundle and those kept, so that a resumed run finds where to start.
//
//   checkpoint::CheckpointManager manager("runs/mnist", /*keep=*/3);
//   checkpoint::SavePolicy policy(/*every_steps=*/1000, /*every_seconds=*/600);
//   ...
//   if (policy.Due(step, now)) {
//     WEFT_RETURN_IF_ERROR(manager.Save(step, tensors, {{"seed", "7"}}));
//     policy.Saved(step, now);
//   }
//   // On restart:
//   WEFT_ASSIGN_OR_RETURN(std::optional<std::string> latest, manager.Latest());
//
// The manifest is text, one "key value" pair a line:
//
//   format 1
//   latest ckpt-300
//   kept ckpt-100
//   kept ckpt-200
//   kept ckpt-300
//
// and, like the bundles, is replaced atomically (temporary file, fsync,
// rename, directory fsync). A crash at any point of Save leaves the
// previous checkpoint readable: the new bundle becomes visible only when
// complete, the manifest names it only after that, and old bundles are
// deleted only after the manifest stops naming them.
#ifndef WEFT_CORE_CHECKPOINT_MANAGER_H_
#define WEFT_CORE_CHECKPOINT_MANAGER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/checkpoint/bundle.h"
#include "core/tensor/tensor.h"

namespace weft::checkpoint {

class CheckpointManager {
 public:
  // Manages |dir| (created by the first Save), keeping the newest |keep|
  // bundles; |keep| <= 0 keeps every bundle.
  CheckpointManager(std::string dir, int keep);

  const std::string& dir() const { return dir_; }
  int keep() const { return keep_; }
  // "<dir>/checkpoint".
  std::string ManifestPath() const;
  // "<dir>/ckpt-<step>".
  std::string PrefixFor(int64_t step) const;
  // The step of a bundle prefix or name "…/ckpt-<step>", or nullopt.
  static std::optional<int64_t> StepOf(std::string_view prefix);

  // Options for the bundle writes of Save; their observer also sees the
  // manager's stages (kManifestSynced, kManifestRenamed, kPruned).
  void set_write_options(WriteOptions options) { options_ = std::move(options); }

  // Writes |tensors| and |metadata| as <dir>/ckpt-<step> (replacing a bundle
  // of that step), then rewrites the manifest to name it as the newest, then
  // deletes the bundles beyond the newest `keep` (in the order of saving)
  // and the temporary files of writers that died. The metadata gets "step"
  // set to |step| (giving another value is an error). Returns the prefix.
  // One Save at a time per directory; Latest and List may run concurrently,
  // from any process.
  Expected<std::string> Save(int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata);

  // Save in two halves, for a bundle written by other means (a sharded
  // bundle, written by the ps tasks of a cluster and committed with
  // CommitShardedBundle): BeginSave creates the directory, removes the
  // temporaries of writers that died, and returns the prefix to write;
  // FinishSave names that bundle, which must exist by then, in the
  // manifest as the newest and prunes, as Save does after writing.
  Expected<std::string> BeginSave(int64_t step);
  Expected<std::string> FinishSave(int64_t step);

  // The newest bundle to restore from: the manifest's newest when it opens
  // (BundleReader::Open). When the manifest is missing, unreadable, or names
  // a bundle that does not open, the bundle of the highest step that opens,
  // found by scanning the directory, with a WARNING log line saying so.
  // nullopt when there is none (or |dir| does not exist). Temporary files
  // are never taken for bundles.
  Expected<std::optional<std::string>> Latest() const;

  // The prefixes of the kept bundles, oldest first: from the manifest, or,
  // when it is missing or unreadable, every "ckpt-<step>.index" of the
  // directory by step (with a WARNING log line). Empty when |dir| does not
  // exist.
  Expected<std::vector<std::string>> List() const;

 private:
  struct Manifest {
    std::string latest;
    std::vector<std::string> kept;
  };
  Expected<Manifest> ReadManifest() const;
  // Bundle names with an index file, ascending by step.
  Expected<std::vector<std::string>> ScanBundles() const;
  Status WriteManifest(const Manifest& manifest) const;
  void RemoveStaleTemporaries() const;
  void Prune(const std::vector<std::string>& kept) const;

  std::string dir_;
  int keep_;
  WriteOptions options_;
};

// One training run's claim on a checkpoint directory: an exclusive flock
// on <dir>/weft.lock, which also records who holds it. Two runs writing one
// directory (two clusters given the same [checkpoint] dir) would mix their
// checkpoints in one manifest; the second is refused instead. The lock
// goes when the holder does, however it ends (kill -9 included): nothing
// to clean up after a crash.
class DirectoryLock {
 public:
  // Creates |dir| if needed and takes the lock, writing |owner| (who is
  // asking: "pid 42 on host-a: weft train ...") into the file.
  // FAILED_PRECONDITION naming the directory and the holder's record when
  // another process holds it; the error of the file system otherwise.
  static Expected<std::unique_ptr<DirectoryLock>> Acquire(const std::string& dir, const std::string& owner);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  explicit DirectoryLock(int fd) : fd_(fd) {}
  int fd_;
};

// When to save: every |every_steps| steps and/or every |every_seconds|
// seconds, whichever comes first; 0 disables each (both 0: never). Steps
// count from the last Saved() (from 0 before it: after restoring step s,
// call Saved(s, now)), time from the last Saved() or, before it, from the
// first Due() call. Not thread-safe.
class SavePolicy {
 public:
  using Clock = std::chrono::steady_clock;

  SavePolicy(int64_t every_steps, double every_seconds);

  // Whether step |step| (just finished at |now|) should be saved. Never
  // true for a step at or before the last saved one.
  bool Due(int64_t step, Clock::time_point now);
  // Records that |step| was saved at |now|.
  void Saved(int64_t step, Clock::time_point now);

 private:
  int64_t every_steps_;
  double every_seconds_;
  std::optional<int64_t> last_step_;
  std::optional<Clock::time_point> last_time_;
};

// The newest bundle of the checkpoint directory |dir_or_prefix| (Latest), or,
// when that directory has none, the bundle whose prefix it is: what
// `weft run --checkpoint` and `weft export --checkpoint` read.
Expected<std::unique_ptr<BundleReader>> OpenNewestBundle(const std::string& dir_or_prefix);

}  // namespace weft::checkpoint

#endif  // WEFT_CORE_CHECKPOINT_MANAGER_H_
