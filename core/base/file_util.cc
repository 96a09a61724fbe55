#include "core/base/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

namespace weft {

Status ErrnoStatus(std::string_view context) {
  const int error = errno;
  std::string message = StrCat(context, ": ", std::strerror(error));
  switch (error) {
    case ENOENT: return Status(Code::kNotFound, std::move(message));
    case EACCES:
    case EPERM:
    case EROFS: return Status(Code::kPermissionDenied, std::move(message));
    case ENOSPC:
    case EDQUOT: return Status(Code::kResourceExhausted, std::move(message));
    case EEXIST: return Status(Code::kAlreadyExists, std::move(message));
    default: return Status(Code::kUnavailable, std::move(message));
  }
}

Expected<ScopedFd> ScopedFd::Create(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(StrCat("creating ", path));
  return ScopedFd(fd, path);
}

ScopedFd::ScopedFd(ScopedFd&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

Status ScopedFd::WriteAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(StrCat("writing ", path_));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status();
}

Status ScopedFd::Sync() {
  if (::fsync(fd_) != 0) return ErrnoStatus(StrCat("syncing ", path_));
  return Status();
}

Status ScopedFd::Close() {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoStatus(StrCat("closing ", path_));
  return Status();
}

Status FsyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(StrCat("opening directory ", dir));
  const int rc = ::fsync(fd);
  const Status status = rc != 0 ? ErrnoStatus(StrCat("syncing directory ", dir)) : Status();
  ::close(fd);
  return status;
}

Expected<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(StrCat("opening ", path));
  std::string out;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const Status error = ErrnoStatus(StrCat("reading ", path));
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

Status PreadAll(int fd, char* out, uint64_t size, uint64_t offset, std::string_view path) {
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, static_cast<std::size_t>(size - done), static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(StrCat("reading ", path));
    }
    if (n == 0) {
      return DataLossError(path, " ends at byte ", offset + done, ", before byte ", offset + size,
                           " (the file was truncated after it was opened)");
    }
    done += static_cast<uint64_t>(n);
  }
  return Status();
}

std::string TempSuffix() {
  static std::atomic<uint64_t> sequence{0};
  return StrCat(".tmp-", static_cast<int64_t>(::getpid()), "-", sequence.fetch_add(1));
}

std::optional<int64_t> TempFileOwner(std::string_view name) {
  const auto at = name.rfind(".tmp-");
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = name.substr(at + 5);
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == rest.size()) return std::nullopt;
  int64_t pid = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + dash, pid);
  if (ec != std::errc() || end != rest.data() + dash || pid <= 0) return std::nullopt;
  for (char c : rest.substr(dash + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return pid;
}

Status WriteFileAtomically(const std::string& path, std::string_view contents,
                           const std::function<void()>& after_sync) {
  const std::string temp = path + TempSuffix();
  {
    WEFT_ASSIGN_OR_RETURN(ScopedFd fd, ScopedFd::Create(temp));
    Status s = fd.WriteAll(contents);
    if (s.ok()) s = fd.Sync();
    if (s.ok()) s = fd.Close();
    if (!s.ok()) {
      ::unlink(temp.c_str());
      return s;
    }
  }
  if (after_sync) after_sync();
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const Status error = ErrnoStatus(StrCat("renaming ", temp, " to ", path));
    ::unlink(temp.c_str());
    return error;
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return FsyncDirectory(parent.empty() ? std::string(".") : parent.string());
}

}  // namespace weft
