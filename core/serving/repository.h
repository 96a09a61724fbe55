// The models a server serves: a directory of NAME/VERSION/model.{wg,wgt,
// onnx} with an optional NAME/config.toml (docs/serving.md). Loads every
// version the model's policy wants at start, then polls the directory: a
// new version is loaded and warmed up before it takes traffic; a version
// the policy no longer wants stops taking requests and is unloaded once
// those already queued are answered. A model or version that fails to load
// is reported (in its status and the log) and the others keep serving.
#ifndef WEFT_CORE_SERVING_REPOSITORY_H_
#define WEFT_CORE_SERVING_REPOSITORY_H_

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/config/serving_config.h"
#include "core/runtime/device_set.h"
#include "core/runtime/session.h"
#include "core/serving/batcher.h"
#include "core/serving/metrics.h"

namespace weft::serving {

struct RepositoryOptions {
  std::string dir;
  std::shared_ptr<runtime::DeviceSet> devices;
  runtime::SessionOptions session;  // threads are divided per model version
  MetricsRegistry* metrics = nullptr;
  double poll_interval_s = 2.0;  // 0: no polling
  int cores = 1;                 // the kernels' thread budget
};

// TensorFlow Serving's version states.
enum class VersionState { kLoading, kAvailable, kUnloading, kEnd };
std::string_view VersionStateName(VersionState state);  // "LOADING", ...

struct VersionStatus {
  int64_t version = 0;
  VersionState state = VersionState::kLoading;
  Status status;  // why it is kEnd after a failed load
};

class ModelRepository {
 public:
  explicit ModelRepository(RepositoryOptions options);
  ~ModelRepository();
  ModelRepository(const ModelRepository&) = delete;
  ModelRepository& operator=(const ModelRepository&) = delete;

  // Checks the directory exists, then loads what it holds (blocking). A
  // model that fails is logged and kept in its status; only an unusable
  // directory is an error.
  Status LoadAll();
  // Polls the directory every poll_interval_s on a thread of its own.
  void StartPolling();
  // Stops polling and unloads every version, answering what is queued.
  void Stop();

  // The batcher of |version| of |model| (the newest available one when
  // unset), or NOT_FOUND / UNAVAILABLE with a message naming what exists.
  Expected<std::shared_ptr<Batcher>> Find(std::string_view model, std::optional<int64_t> version) const;
  // The versions of |model| and their states (NOT_FOUND for an unknown
  // model), newest first.
  Expected<std::vector<VersionStatus>> Versions(std::string_view model) const;
  std::vector<std::string> Models() const;
  // Every model has an available version and nothing is loading.
  bool Ready() const;

  // One scan of the directory (what the poll thread runs); for tests.
  void PollOnce();

 private:
  struct Version {
    VersionStatus status;
    std::string path;
    std::filesystem::file_time_type mtime;
    std::shared_ptr<Batcher> batcher;  // when available
  };
  struct Model {
    config::ModelServingConfig config;
    std::filesystem::file_time_type config_mtime;
    bool has_config = false;
    Status config_status;
    std::map<int64_t, Version> versions;
  };
  // The version directories of |dir| with a model file, by number.
  std::map<int64_t, std::pair<std::string, std::filesystem::file_time_type>> ScanVersions(
      const std::filesystem::path& dir) const;
  void SyncModel(const std::string& name, const std::filesystem::path& dir);
  void LoadVersion(const std::string& name, int64_t version, const std::string& path,
                   std::filesystem::file_time_type mtime, const config::ModelServingConfig& config);
  void Retire(std::shared_ptr<Batcher> batcher);
  void ReapRetired();
  void UpdateLoadedGauge(const std::string& name);

  RepositoryOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, Model> models_;
  std::vector<std::shared_ptr<Batcher>> retired_;
  std::mutex poll_mutex_;  // one scan at a time
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_REPOSITORY_H_
