#include "core/serving/repository.h"

#include <algorithm>
#include <set>

#include "core/base/file_util.h"
#include "core/base/logging.h"
#include "core/base/strings.h"

namespace weft::serving {
namespace fs = std::filesystem;
namespace {

constexpr const char* kModelFiles[] = {"model.wg", "model.wgt", "model.onnx"};

// A directory name that is a version: digits only, > 0, fits int64.
std::optional<int64_t> VersionNumber(const std::string& name) {
  if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos) return {};
  const int64_t v = std::stoll(name);
  return v > 0 ? std::optional<int64_t>(v) : std::nullopt;
}

std::set<int64_t> Wanted(const config::ModelServingConfig& config, const std::set<int64_t>& candidates) {
  std::set<int64_t> out;
  if (config.version_policy == "all") return candidates;
  if (config.version_policy == "specific") {
    for (int64_t v : config.specific) {
      if (candidates.contains(v)) out.insert(v);
    }
    return out;
  }
  for (auto it = candidates.rbegin(); it != candidates.rend() && static_cast<int64_t>(out.size()) < config.latest;
       ++it) {
    out.insert(*it);
  }
  return out;
}

Expected<config::ModelServingConfig> ReadModelConfig(const fs::path& file) {
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadFile(file.string()));
  return config::ParseModelServingConfig(text, file.string());
}

}  // namespace

std::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return "LOADING";
    case VersionState::kAvailable: return "AVAILABLE";
    case VersionState::kUnloading: return "UNLOADING";
    case VersionState::kEnd: return "END";
  }
  return "UNKNOWN";
}

ModelRepository::ModelRepository(RepositoryOptions options) : options_(std::move(options)) {}

ModelRepository::~ModelRepository() { Stop(); }

Status ModelRepository::LoadAll() {
  std::error_code ec;
  if (!fs::is_directory(options_.dir, ec)) {
    return NotFoundError("--models ", Quote(options_.dir),
                         " is not a directory (it should hold NAME/VERSION/model.onnx or model.wg)");
  }
  PollOnce();
  std::lock_guard<std::mutex> lock(mutex_);
  if (models_.empty()) {
    WEFT_LOG(WARNING) << "model-server: " << options_.dir
                      << " holds no model yet (NAME/VERSION/model.onnx or model.wg); it is polled for them";
  }
  return Status();
}

void ModelRepository::StartPolling() {
  if (options_.poll_interval_s <= 0 || poller_.joinable()) return;
  poller_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      stop_cv_.wait_for(lock, std::chrono::duration<double>(options_.poll_interval_s), [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      PollOnce();
      lock.lock();
    }
  });
}

void ModelRepository::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  std::vector<std::shared_ptr<Batcher>> batchers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [name, model] : models_) {
      for (auto& [v, version] : model.versions) {
        if (version.batcher != nullptr) batchers.push_back(std::move(version.batcher));
        version.status.state = VersionState::kEnd;
      }
    }
    for (auto& b : retired_) batchers.push_back(std::move(b));
    retired_.clear();
  }
  batchers.clear();  // each answers its queue, then joins its threads
}

std::map<int64_t, std::pair<std::string, fs::file_time_type>> ModelRepository::ScanVersions(const fs::path& dir) const {
  std::map<int64_t, std::pair<std::string, fs::file_time_type>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto number = VersionNumber(entry.path().filename().string());
    if (!number.has_value() || !entry.is_directory(ec)) continue;
    for (const char* file : kModelFiles) {
      const fs::path path = entry.path() / file;
      const auto mtime = fs::last_write_time(path, ec);
      if (!ec) {
        out[*number] = {path.string(), mtime};
        break;
      }
    }
  }
  return out;
}

void ModelRepository::PollOnce() {
  std::lock_guard<std::mutex> poll(poll_mutex_);
  std::error_code ec;
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    seen.insert(name);
    SyncModel(name, entry.path());
  }
  // Models whose directory went away.
  std::vector<std::shared_ptr<Batcher>> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = models_.begin(); it != models_.end();) {
      if (seen.contains(it->first)) {
        ++it;
        continue;
      }
      WEFT_LOG(INFO) << "model-server: " << it->first << " was removed from " << options_.dir << "; unloading it";
      for (auto& [v, version] : it->second.versions) {
        if (version.batcher != nullptr) gone.push_back(std::move(version.batcher));
      }
      it = models_.erase(it);
    }
  }
  for (auto& b : gone) Retire(std::move(b));
  ReapRetired();
}

void ModelRepository::SyncModel(const std::string& name, const fs::path& dir) {
  const fs::path config_file = dir / "config.toml";
  std::error_code ec;
  const auto config_mtime = fs::last_write_time(config_file, ec);
  const bool has_config = !ec;
  config::ModelServingConfig config;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Model& model = models_[name];
    if (has_config != model.has_config || (has_config && config_mtime != model.config_mtime)) {
      model.has_config = has_config;
      model.config_mtime = config_mtime;
      auto parsed = has_config ? ReadModelConfig(config_file)
                               : Expected<config::ModelServingConfig>(config::ModelServingConfig{});
      if (parsed.ok()) {
        model.config = std::move(*parsed);
        model.config_status = Status();
      } else {
        model.config_status = parsed.status();
        WEFT_LOG(ERROR) << "model-server: " << name << ": " << parsed.status().message()
                        << (model.versions.empty() ? "; the model is not served until it is fixed"
                                                   : "; its loaded versions keep serving");
      }
    }
    if (!model.config_status.ok() && model.versions.empty()) return;
    config = model.config;
  }
  const auto on_disk = ScanVersions(dir);
  // Load what the policy wants. A version that fails to load drops out of
  // the candidates and the next one down is wanted instead, so a broken
  // new version leaves the one before it serving. Every round loads
  // something or stops, and a version that failed is not tried again until
  // its file changes.
  std::set<int64_t> wanted;
  for (int round = 0; round < 8; ++round) {
    std::set<int64_t> candidates;
    std::set<int64_t> current;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const Model& model = models_[name];
      for (const auto& [v, file] : on_disk) {
        const auto it = model.versions.find(v);
        const bool known = it != model.versions.end() && it->second.mtime == file.second;
        if (known && it->second.status.state == VersionState::kEnd && !it->second.status.status.ok()) continue;
        candidates.insert(v);
        if (known && it->second.batcher != nullptr) current.insert(v);
      }
    }
    wanted = Wanted(config, candidates);
    bool loaded = false;
    for (int64_t v : wanted) {
      if (current.contains(v)) continue;
      LoadVersion(name, v, on_disk.at(v).first, on_disk.at(v).second, config);
      loaded = true;
    }
    if (!loaded) break;
  }
  // Unload what is no longer wanted, now that its successors serve.
  std::vector<std::shared_ptr<Batcher>> unloaded;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Model& model = models_[name];
    for (auto it = model.versions.begin(); it != model.versions.end();) {
      const bool keep = wanted.contains(it->first) || (it->second.status.state == VersionState::kEnd &&
                                                       on_disk.contains(it->first) && !it->second.status.status.ok());
      if (keep) {
        ++it;
        continue;
      }
      if (it->second.batcher != nullptr) {
        WEFT_LOG(INFO) << "model-server: unloading " << name << " version " << it->first;
        unloaded.push_back(std::move(it->second.batcher));
      }
      it = model.versions.erase(it);
    }
  }
  for (auto& b : unloaded) Retire(std::move(b));
  UpdateLoadedGauge(name);
}

void ModelRepository::LoadVersion(const std::string& name, int64_t version, const std::string& path,
                                  fs::file_time_type mtime, const config::ModelServingConfig& config) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Version& v = models_[name].versions[version];
    // A version being replaced keeps serving until its successor is ready.
    if (v.batcher == nullptr) v.status = {version, VersionState::kLoading, Status()};
  }
  WEFT_LOG(INFO) << "model-server: loading " << name << " version " << version << " from " << path;
  const auto start = Clock::now();
  runtime::SessionOptions session = options_.session;
  // Set num_batch_threads divides the cores between that many batches;
  // unset, batches share them as the load goes (ChoosePolicy): a wide
  // session for a batch alone, a one-thread one for batches in parallel.
  const int batch_threads = static_cast<int>(std::max<int64_t>(1, config.num_batch_threads.value_or(1)));
  session.inter_op_threads = 1;
  session.intra_op_threads = std::max(1, options_.cores / batch_threads);
  const int narrow = !config.num_batch_threads.has_value() && options_.cores > 1 ? 1 : 0;
  std::shared_ptr<Batcher> batcher;
  Status status;
  auto servable = Servable::Load(name, version, path, config, options_.devices, session, narrow);
  if (servable.ok()) {
    // Every size up to a max_batch_size the user set; up to 64 while a
    // bigger batch still pays, when the server chooses.
    status = (*servable)->WarmUp(config.max_batch_size.value_or(64), config.max_batch_size.has_value());
  } else {
    status = servable.status();
  }
  if (status.ok()) {
    std::shared_ptr<Servable> shared = std::move(*servable);
    const BatchPolicy policy = ChoosePolicy(*shared, config, options_.cores);
    BatcherMetrics metrics;
    if (options_.metrics != nullptr) {
      const Labels labels = {{"model", name}, {"version", std::to_string(version)}};
      metrics.batch_size = options_.metrics->GetHistogram("weft_batch_size", "Rows per run of a model version.", labels,
                                                          BatchSizeBuckets());
      metrics.queue_depth =
          options_.metrics->GetGauge("weft_queue_depth", "Rows waiting to run, per model version.", labels);
    }
    batcher = std::make_shared<Batcher>(shared, policy, metrics);
    WEFT_LOG(INFO) << "model-server: " << name << " version " << version << " is available ("
                   << static_cast<int64_t>(std::chrono::duration<double, std::milli>(Clock::now() - start).count())
                   << " ms to load and warm up; "
                   << (policy.enabled ? StrCat("batches of up to ", policy.max_batch_size) : std::string("no batching"))
                   << ")";
  } else {
    WEFT_LOG(ERROR) << "model-server: " << name << " version " << version << " failed to load: " << status.message();
  }
  std::shared_ptr<Batcher> replaced;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Version& v = models_[name].versions[version];
    v.path = path;
    v.mtime = mtime;
    if (status.ok()) {
      replaced = std::move(v.batcher);
      v.batcher = std::move(batcher);
      v.status = {version, VersionState::kAvailable, Status()};
    } else if (v.batcher == nullptr) {
      v.status = {version, VersionState::kEnd, status};
    }
  }
  if (replaced != nullptr) Retire(std::move(replaced));
}

void ModelRepository::Retire(std::shared_ptr<Batcher> batcher) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retired_.push_back(std::move(batcher));
  }
  ReapRetired();
}

// A retired batcher goes once no request holds it; its destructor answers
// what is still queued. Never on a batch thread (a batcher cannot join
// itself): requests hold a batcher only while they enqueue.
void ModelRepository::ReapRetired() {
  std::vector<std::shared_ptr<Batcher>> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (it->use_count() == 1) {
        done.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }
  done.clear();
}

void ModelRepository::UpdateLoadedGauge(const std::string& name) {
  if (options_.metrics == nullptr) return;
  int64_t loaded = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = models_.find(name);
    if (it != models_.end()) {
      for (const auto& [v, version] : it->second.versions) loaded += version.batcher != nullptr ? 1 : 0;
    }
  }
  options_.metrics
      ->GetGauge("weft_model_versions_loaded", "Versions of a model that answer requests.", {{"model", name}})
      ->Set(static_cast<double>(loaded));
}

Expected<std::shared_ptr<Batcher>> ModelRepository::Find(std::string_view model, std::optional<int64_t> version) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = models_.find(std::string(model));
  if (it == models_.end()) {
    std::vector<std::string> names;
    for (const auto& [name, m] : models_) names.push_back(name);
    const std::string hint = ClosestMatch(model, names);
    return NotFoundError("no model ", Quote(model), hint.empty() ? "" : StrCat("; did you mean ", Quote(hint), "?"),
                         " (served: ", names.empty() ? "none" : StrJoin(names, ", "), ")");
  }
  std::vector<std::string> available;
  for (auto v = it->second.versions.rbegin(); v != it->second.versions.rend(); ++v) {
    if (v->second.batcher == nullptr) continue;
    if (!version.has_value() || *version == v->first) return v->second.batcher;
    available.push_back(std::to_string(v->first));
  }
  if (!version.has_value()) {
    return UnavailableError("model ", Quote(model), " has no version ready yet",
                            it->second.config_status.ok() ? "" : StrCat(": ", it->second.config_status.message()));
  }
  const auto v = it->second.versions.find(*version);
  if (v != it->second.versions.end() && v->second.status.state == VersionState::kLoading) {
    return UnavailableError("version ", *version, " of ", Quote(model), " is still loading");
  }
  return NotFoundError("model ", Quote(model), " has no version ", *version,
                       " being served (available: ", available.empty() ? "none" : StrJoin(available, ", "), ")");
}

Expected<std::vector<VersionStatus>> ModelRepository::Versions(std::string_view model) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = models_.find(std::string(model));
  if (it == models_.end()) return NotFoundError("no model ", Quote(model));
  std::vector<VersionStatus> out;
  for (auto v = it->second.versions.rbegin(); v != it->second.versions.rend(); ++v) out.push_back(v->second.status);
  return out;
}

std::vector<std::string> ModelRepository::Models() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, m] : models_) out.push_back(name);
  return out;
}

bool ModelRepository::Ready() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, model] : models_) {
    bool any = false;
    for (const auto& [v, version] : model.versions) {
      if (version.status.state == VersionState::kLoading && version.batcher == nullptr) return false;
      any = any || version.batcher != nullptr;
    }
    if (!any) return false;
  }
  return true;
}

}  // namespace weft::serving
