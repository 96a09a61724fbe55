#include "core/checkpoint/manager.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/base/file_util.h"
#include "core/base/logging.h"

namespace weft::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBundlePrefix = "ckpt-";
constexpr std::string_view kManifestName = "checkpoint";
constexpr int kManifestFormat = 1;

// The step of a bundle name "ckpt-<digits>" (no directory), or nullopt.
std::optional<int64_t> ParseBundleName(std::string_view name) {
  if (!name.starts_with(kBundlePrefix) || name.size() == kBundlePrefix.size()) return std::nullopt;
  const std::string_view digits = name.substr(kBundlePrefix.size());
  int64_t step = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size() || step < 0 || digits[0] == '+') return std::nullopt;
  return step;
}

// The bundle a file of the directory belongs to ("ckpt-7" for
// "ckpt-7.index" and "ckpt-7.data-00000-of-00001"); nullopt for temporary
// files and anything else.
std::optional<std::string> BundleOfFile(std::string_view file) {
  if (TempFileOwner(file)) return std::nullopt;
  std::string_view base;
  if (file.ends_with(".index")) {
    base = file.substr(0, file.size() - 6);
  } else if (const auto data = file.find(".data-"); data != std::string_view::npos) {
    base = file.substr(0, data);
  } else {
    return std::nullopt;
  }
  if (!ParseBundleName(base)) return std::nullopt;
  return std::string(base);
}

bool DirectoryExists(const std::string& dir, Status* error) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    *error = UnavailableError("cannot read checkpoint directory ", dir, ": ", ec.message());
    return false;
  }
  if (fs::exists(st) && !fs::is_directory(st)) {
    *error = FailedPreconditionError("checkpoint directory ", dir, " is not a directory");
    return false;
  }
  return fs::exists(st);
}

}  // namespace

CheckpointManager::CheckpointManager(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {
  if (dir_.empty()) dir_ = ".";
}

std::string CheckpointManager::ManifestPath() const { return (fs::path(dir_) / kManifestName).string(); }

std::string CheckpointManager::PrefixFor(int64_t step) const {
  return (fs::path(dir_) / StrCat(kBundlePrefix, step)).string();
}

std::optional<int64_t> CheckpointManager::StepOf(std::string_view prefix) {
  const auto slash = prefix.rfind('/');
  return ParseBundleName(slash == std::string_view::npos ? prefix : prefix.substr(slash + 1));
}

Expected<CheckpointManager::Manifest> CheckpointManager::ReadManifest() const {
  const std::string path = ManifestPath();
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Manifest manifest;
  bool has_format = false;
  int line_number = 0;
  for (const std::string& line : StrSplit(text, '\n')) {
    ++line_number;
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? std::string() : line.substr(space + 1);
    const std::string where = StrCat(path, ":", line_number, ": ");
    if (key == "format") {
      if (value != StrCat(kManifestFormat)) {
        return DataLossError(where, "format ", Quote(value), " is not one this weft reads (", kManifestFormat, ")");
      }
      has_format = true;
    } else if (key == "latest" || key == "kept") {
      if (!ParseBundleName(value)) return DataLossError(where, Quote(value), " is not a bundle name (ckpt-<step>)");
      if (key == "latest") {
        manifest.latest = value;
      } else {
        manifest.kept.push_back(value);
      }
    } else {
      return DataLossError(where, "unknown key ", Quote(key));
    }
  }
  if (!has_format) return DataLossError(path, " has no format line: it is not a weft checkpoint manifest");
  if (manifest.latest.empty()) return DataLossError(path, " names no latest bundle");
  if (std::find(manifest.kept.begin(), manifest.kept.end(), manifest.latest) == manifest.kept.end()) {
    return DataLossError(path, ": the latest bundle ", manifest.latest, " is not among the kept ones");
  }
  return manifest;
}

Status CheckpointManager::WriteManifest(const Manifest& manifest) const {
  std::string text = StrCat(
      "# weft checkpoint manifest: the newest bundle of this directory "
      "and those kept, oldest first.\n",
      "format ", kManifestFormat, "\nlatest ", manifest.latest, "\n");
  for (const std::string& name : manifest.kept) text += StrCat("kept ", name, "\n");
  return WriteFileAtomically(ManifestPath(), text, [this] {
    if (options_.observer) options_.observer(WriteStage::kManifestSynced);
  });
}

Expected<std::vector<std::string>> CheckpointManager::ScanBundles() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string file = entry.path().filename().string();
    if (!file.ends_with(".index") || TempFileOwner(file)) continue;
    const std::string name = file.substr(0, file.size() - 6);
    if (auto step = ParseBundleName(name)) found.emplace_back(*step, name);
  }
  if (ec) return UnavailableError("cannot list checkpoint directory ", dir_, ": ", ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& [step, name] : found) names.push_back(std::move(name));
  return names;
}

Expected<std::optional<std::string>> CheckpointManager::Latest() const {
  Status error;
  if (!DirectoryExists(dir_, &error)) {
    if (!error.ok()) return error;
    return std::optional<std::string>();
  }
  auto manifest = ReadManifest();
  std::string reason;
  if (manifest.ok()) {
    const std::string prefix = (fs::path(dir_) / manifest->latest).string();
    auto reader = BundleReader::Open(prefix);
    if (reader.ok()) return std::optional<std::string>(prefix);
    reason = StrCat("names ", manifest->latest, " as the newest checkpoint, which does not open (",
                    reader.status().message(), ")");
  } else if (manifest.status().code() == Code::kNotFound) {
    reason = "is missing";
  } else {
    reason = StrCat("is unreadable (", manifest.status().message(), ")");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<std::string> names, ScanBundles());
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    const std::string prefix = (fs::path(dir_) / *it).string();
    auto reader = BundleReader::Open(prefix);
    if (!reader.ok()) {
      WEFT_LOG(WARNING) << "checkpoint " << prefix << " does not open, skipping it: " << reader.status().message();
      continue;
    }
    WEFT_LOG(WARNING) << "checkpoint manifest " << ManifestPath() << " " << reason << "; using " << prefix
                      << ", the newest checkpoint in " << dir_ << " that opens";
    return std::optional<std::string>(prefix);
  }
  if (manifest.status().code() != Code::kNotFound || !names.empty()) {
    WEFT_LOG(WARNING) << "checkpoint manifest " << ManifestPath() << " " << reason << ", and no checkpoint in " << dir_
                      << " opens";
  }
  return std::optional<std::string>();
}

Expected<std::vector<std::string>> CheckpointManager::List() const {
  Status error;
  if (!DirectoryExists(dir_, &error)) {
    if (!error.ok()) return error;
    return std::vector<std::string>();
  }
  auto manifest = ReadManifest();
  std::vector<std::string> names;
  if (manifest.ok()) {
    names = manifest->kept;
  } else {
    WEFT_ASSIGN_OR_RETURN(names, ScanBundles());
    if (!names.empty()) {
      WEFT_LOG(WARNING) << "checkpoint manifest " << ManifestPath() << " "
                        << (manifest.status().code() == Code::kNotFound
                                ? std::string("is missing")
                                : StrCat("is unreadable (", manifest.status().message(), ")"))
                        << "; listing the checkpoints found in " << dir_;
    }
  }
  std::vector<std::string> prefixes;
  for (const std::string& name : names) prefixes.push_back((fs::path(dir_) / name).string());
  return prefixes;
}

void CheckpointManager::RemoveStaleTemporaries() const {
  std::error_code ec;
  const int64_t self = ::getpid();
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with(kBundlePrefix) && !file.starts_with(kManifestName)) continue;
    const std::optional<int64_t> owner = TempFileOwner(file);
    if (!owner || *owner == self) continue;
    // Only the files of writers that are gone: a live one may be mid-save.
    if (::kill(static_cast<pid_t>(*owner), 0) == 0 || errno != ESRCH) continue;
    std::error_code remove_error;
    fs::remove(entry.path(), remove_error);
    if (remove_error) {
      WEFT_LOG(WARNING) << "cannot remove stale temporary file " << entry.path().string() << ": "
                        << remove_error.message();
    }
  }
}

void CheckpointManager::Prune(const std::vector<std::string>& kept) const {
  const std::set<std::string> keep(kept.begin(), kept.end());
  std::map<std::string, std::vector<fs::path>> doomed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string file = entry.path().filename().string();
    std::optional<std::string> bundle = BundleOfFile(file);
    if (!bundle || keep.count(*bundle) != 0) continue;
    // The index goes first, so a bundle is never visible without its data.
    auto& files = doomed[*bundle];
    if (file.ends_with(".index")) {
      files.insert(files.begin(), entry.path());
    } else {
      files.push_back(entry.path());
    }
  }
  for (const auto& [bundle, files] : doomed) {
    for (const fs::path& path : files) {
      std::error_code remove_error;
      fs::remove(path, remove_error);
      if (remove_error) {
        WEFT_LOG(WARNING) << "cannot delete old checkpoint file " << path.string() << ": " << remove_error.message();
      }
    }
    WEFT_LOG(DEBUG) << "deleted old checkpoint " << (fs::path(dir_) / bundle).string();
  }
}

Expected<std::string> CheckpointManager::Save(int64_t step, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  if (step < 0)
    return InvalidArgumentError("cannot save a checkpoint of step ", step, " in ", dir_, ": steps are >= 0");
  std::map<std::string, std::string> meta = metadata;
  const std::string step_text = StrCat(step);
  if (auto it = meta.find("step"); it != meta.end() && it->second != step_text) {
    return InvalidArgumentError("cannot save step ", step, " in ", dir_, ": its metadata says step ",
                                Quote(it->second));
  }
  meta["step"] = step_text;
  WEFT_ASSIGN_OR_RETURN(const std::string prefix, BeginSave(step));
  WEFT_RETURN_IF_ERROR(WriteBundle(prefix, tensors, meta, options_));
  return FinishSave(step);
}

Expected<std::string> CheckpointManager::BeginSave(int64_t step) {
  if (step < 0)
    return InvalidArgumentError("cannot save a checkpoint of step ", step, " in ", dir_, ": steps are >= 0");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return UnavailableError("cannot create checkpoint directory ", dir_, ": ", ec.message());
  RemoveStaleTemporaries();
  return PrefixFor(step);
}

Expected<std::string> CheckpointManager::FinishSave(int64_t step) {
  const std::string name = StrCat(kBundlePrefix, step);
  const std::string prefix = PrefixFor(step);
  Manifest manifest;
  if (auto previous = ReadManifest(); previous.ok()) {
    manifest.kept = previous->kept;
  } else {
    WEFT_ASSIGN_OR_RETURN(manifest.kept, ScanBundles());
  }
  manifest.kept.erase(std::remove(manifest.kept.begin(), manifest.kept.end(), name), manifest.kept.end());
  manifest.kept.push_back(name);
  if (keep_ > 0 && manifest.kept.size() > static_cast<std::size_t>(keep_)) {
    manifest.kept.erase(manifest.kept.begin(), manifest.kept.end() - keep_);
  }
  manifest.latest = name;
  Status written = WriteManifest(manifest);
  if (!written.ok()) {
    return written.WithContext(StrCat("saved checkpoint ", prefix, " but cannot update the manifest"));
  }
  if (options_.observer) options_.observer(WriteStage::kManifestRenamed);
  Prune(manifest.kept);
  if (options_.observer) options_.observer(WriteStage::kPruned);
  return prefix;
}

// --- SavePolicy
// -------------------------------------------------------------------

SavePolicy::SavePolicy(int64_t every_steps, double every_seconds)
    : every_steps_(every_steps), every_seconds_(every_seconds) {}

bool SavePolicy::Due(int64_t step, Clock::time_point now) {
  if (!last_time_) last_time_ = now;
  if (last_step_ && step <= *last_step_) return false;
  if (every_steps_ > 0 && step - last_step_.value_or(0) >= every_steps_) return true;
  if (every_seconds_ > 0 && std::chrono::duration<double>(now - *last_time_).count() >= every_seconds_) return true;
  return false;
}

void SavePolicy::Saved(int64_t step, Clock::time_point now) {
  last_step_ = step;
  last_time_ = now;
}

Expected<std::unique_ptr<DirectoryLock>> DirectoryLock::Acquire(const std::string& dir, const std::string& owner) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return UnavailableError("cannot create the checkpoint directory ", dir, ": ", ec.message());
  const std::string path = (fs::path(dir) / "weft.lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    std::string holder(512, '\0');
    const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return FailedPreconditionError("the checkpoint directory ", dir, " is in use by another training run (",
                                     holder.empty() ? std::string("its holder wrote nothing") : holder,
                                     "): two runs writing one directory would mix their checkpoints; give each "
                                     "run its own [checkpoint] dir, or stop the other run first");
    }
    return UnavailableError("cannot lock ", path, ": ", std::strerror(error));
  }
  std::string record = owner + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, record.data(), record.size(), 0) < 0) {
    WEFT_LOG(WARNING) << "cannot record the owner in " << path << ": " << std::strerror(errno);
  }
  return std::unique_ptr<DirectoryLock>(new DirectoryLock(fd));
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<std::unique_ptr<BundleReader>> OpenNewestBundle(const std::string& dir_or_prefix) {
  WEFT_ASSIGN_OR_RETURN(std::optional<std::string> latest, CheckpointManager(dir_or_prefix, 0).Latest());
  return BundleReader::Open(latest.value_or(dir_or_prefix));
}

}  // namespace weft::checkpoint
