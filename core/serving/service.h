// The model server's endpoints (docs/serving.md): TensorFlow Serving's
// REST API, the KServe v2 inference protocol (JSON and binary tensors),
// health and Prometheus metrics, routed to the repository's batchers.
#ifndef WEFT_CORE_SERVING_SERVICE_H_
#define WEFT_CORE_SERVING_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/serving/http_server.h"
#include "core/serving/metrics.h"
#include "core/serving/repository.h"

namespace weft::serving {

class ModelService {
 public:
  ModelService(ModelRepository* repository, MetricsRegistry* metrics, int64_t default_timeout_ms);

  // The HttpHandler of the server.
  void Handle(HttpRequest&& request, Reply reply);
  // From now on, readiness answers 503 (the server is stopping).
  void SetDraining() { draining_.store(true); }

  // The HTTP status for a failed |status| (400, 404, 429, 503, 504, 500).
  static int HttpStatusFor(const Status& status);

  struct Route;

 private:
  void Infer(const Route& route, HttpRequest&& request, Reply reply);
  HttpResponse ModelStatus(const Route& route) const;
  HttpResponse Metadata(const Route& route) const;
  HttpResponse Ready(const Route& route) const;
  void Count(const std::string& model, const std::string& version, const char* protocol, int code);
  // A version's stage histograms, looked up once (requests are many).
  struct StageHistograms {
    Histogram* queue;
    Histogram* compute;
    Histogram* total;
  };
  const StageHistograms* StagesFor(const std::string& model, const std::string& version);

  ModelRepository* repository_;
  MetricsRegistry* metrics_;
  int64_t default_timeout_ms_;
  std::atomic<bool> draining_{false};
  Histogram* parse_seconds_ = nullptr;
  std::mutex stages_mutex_;
  std::map<std::string, std::unique_ptr<StageHistograms>> stages_;
};

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_SERVICE_H_
