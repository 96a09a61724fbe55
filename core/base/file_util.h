// POSIX file helpers of the core: the one atomic file writer (graph files,
// .npy outputs, checkpoints), writes that report the file and the system's
// reason with a code that fits it, fsync of files and directories, and reads
// that never return short.
#ifndef WEFT_CORE_BASE_FILE_UTIL_H_
#define WEFT_CORE_BASE_FILE_UTIL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace weft {

// |context| and strerror(errno), with a code that fits errno: NOT_FOUND,
// PERMISSION_DENIED, RESOURCE_EXHAUSTED (disk full), ALREADY_EXISTS, or
// UNAVAILABLE for other I/O failures.
Status ErrnoStatus(std::string_view context);

// A file created for writing (it must not exist yet), closed on
// destruction. Errors name the file.
class ScopedFd {
 public:
  static Expected<ScopedFd> Create(const std::string& path);
  ScopedFd(ScopedFd&& other) noexcept;
  ScopedFd& operator=(ScopedFd&&) = delete;
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd();

  Status WriteAll(std::string_view bytes);
  Status Sync();
  // Closes now, reporting a failed close (which can be the first sign of a
  // failed write on network file systems).
  Status Close();

 private:
  ScopedFd(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

// fsync of directory |dir|, so that renames and unlinks in it are durable.
Status FsyncDirectory(const std::string& dir);

// The whole file; NOT_FOUND when it does not exist.
Expected<std::string> ReadFile(const std::string& path);

// Reads exactly |size| bytes at |offset| of |fd| (the file |path|) into
// |out|; DATA_LOSS when the file ends first.
Status PreadAll(int fd, char* out, uint64_t size, uint64_t offset, std::string_view path);

// ".tmp-<pid>-<n>": the suffix of temporary files, unique in the process
// (the sequence |n| grows with every call) and across live processes.
std::string TempSuffix();
// The process that made temporary file |name| (a name containing
// ".tmp-<pid>-<n>"), or nullopt when |name| is not a temporary file.
std::optional<int64_t> TempFileOwner(std::string_view name);

// Writes |contents| to |path| atomically: to |path| + TempSuffix(), fsync,
// rename, fsync of the directory. |after_sync| (optional) runs between the
// fsync and the rename.
Status WriteFileAtomically(const std::string& path, std::string_view contents,
                           const std::function<void()>& after_sync = {});

}  // namespace weft

#endif  // WEFT_CORE_BASE_FILE_UTIL_H_
