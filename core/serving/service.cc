#include "core/serving/service.h"

#include <charconv>
#include <vector>

#include "core/base/json.h"
#include "core/base/strings.h"
#include "core/base/version.h"
#include "core/serving/codec.h"

namespace weft::serving {

struct ModelService::Route {
  enum class Kind { kMetrics, kLive, kReady, kServer, kModel, kModelReady, kInfer, kStatus, kMetadata, kPredict };
  Kind kind = Kind::kMetrics;
  std::string model;
  std::optional<int64_t> version;
  const char* method = "GET";
  std::string error;  // a path that names no endpoint
};

namespace {

using Kind = ModelService::Route::Kind;

constexpr const char* kEndpoints =
    "GET /v2/health/live, GET /v2/health/ready, GET /v2/models/NAME[/versions/V][/ready], POST "
    "/v2/models/NAME[/versions/V]/infer, GET /v1/models/NAME[/versions/V][/metadata], POST "
    "/v1/models/NAME[/versions/V]:predict, GET /metrics";

HttpResponse Error(int status, std::string_view message) {
  HttpResponse res;
  res.status = status;
  res.body = WriteError(message);
  if (status == 429 || status == 503) res.headers.emplace_back("Retry-After", "1");
  return res;
}

HttpResponse JsonBody(std::string body) {
  HttpResponse res;
  res.body = std::move(body);
  return res;
}

// "NAME" or "NAME/versions/V" into |route|; false when it is neither.
bool ModelAndVersion(std::string_view text, ModelService::Route& route) {
  const auto slash = text.find('/');
  route.model = std::string(text.substr(0, slash));
  if (route.model.empty()) return false;
  if (slash == std::string_view::npos) return true;
  std::string_view rest = text.substr(slash + 1);
  if (rest.substr(0, 9) != "versions/") return false;
  rest.remove_prefix(9);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc() || end != rest.data() + rest.size() || v <= 0) {
    route.error = StrCat("version ", Quote(rest), " is not a positive integer");
    return true;
  }
  route.version = v;
  return true;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<ModelService::Route> ParseRoute(std::string_view target) {
  ModelService::Route r;
  target = target.substr(0, target.find('?'));
  if (target == "/metrics") return r;
  if (target == "/v2/health/live") return r.kind = Kind::kLive, r;
  if (target == "/v2/health/ready") return r.kind = Kind::kReady, r;
  if (target == "/v2" || target == "/v2/") return r.kind = Kind::kServer, r;
  if (target.substr(0, 11) == "/v2/models/") {
    std::string_view rest = target.substr(11);
    r.kind = Kind::kModel;
    if (EndsWith(rest, "/infer")) {
      r.kind = Kind::kInfer;
      r.method = "POST";
      rest.remove_suffix(6);
    } else if (EndsWith(rest, "/ready")) {
      r.kind = Kind::kModelReady;
      rest.remove_suffix(6);
    }
    if (ModelAndVersion(rest, r)) return r;
    return std::nullopt;
  }
  if (target.substr(0, 11) == "/v1/models/") {
    std::string_view rest = target.substr(11);
    r.kind = Kind::kStatus;
    const auto colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      const std::string_view verb = rest.substr(colon + 1);
      if (verb != "predict") {
        r.error = StrCat(Quote(verb),
                         " is not served (only :predict; classify and regress need TensorFlow's "
                         "Example protos)");
      }
      r.kind = Kind::kPredict;
      r.method = "POST";
      rest = rest.substr(0, colon);
    } else if (EndsWith(rest, "/metadata")) {
      r.kind = Kind::kMetadata;
      rest.remove_suffix(9);
    }
    if (ModelAndVersion(rest, r)) return r;
  }
  return std::nullopt;
}

// The model or version label of a request for something not served.
constexpr const char* kUnknownLabel = "_unknown";

const char* ProtocolOf(Kind kind) { return kind == Kind::kPredict ? "tfserving" : "v2"; }

}  // namespace

ModelService::ModelService(ModelRepository* repository, MetricsRegistry* metrics, int64_t default_timeout_ms)
    : repository_(repository), metrics_(metrics), default_timeout_ms_(default_timeout_ms) {
  parse_seconds_ = metrics_->GetHistogram(
      "weft_request_parse_seconds", "Time to read a request body into tensors (JSON or binary).", {}, LatencyBuckets());
}

int ModelService::HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case Code::kInvalidArgument:
    case Code::kOutOfRange: return 400;
    case Code::kNotFound: return 404;
    case Code::kResourceExhausted: return 429;
    case Code::kUnavailable: return 503;
    case Code::kDeadlineExceeded: return 504;
    case Code::kUnauthenticated: return 401;
    default: return 500;
  }
}

void ModelService::Count(const std::string& model, const std::string& version, const char* protocol, int code) {
  metrics_
      ->GetCounter("weft_requests_total", "Requests answered, by model, version, protocol and HTTP status.",
                   {{"model", model}, {"version", version}, {"protocol", protocol}, {"code", std::to_string(code)}})
      ->Add(1);
}

void ModelService::Handle(HttpRequest&& request, Reply reply) {
  const std::optional<Route> route = ParseRoute(request.target);
  if (!route.has_value()) {
    return reply(Error(
        404, StrCat("no endpoint ", request.method, " ", Quote(request.target), "; the endpoints: ", kEndpoints)));
  }
  if (request.method != route->method) {
    HttpResponse res = Error(405, StrCat(request.target, " takes ", route->method, ", not ", request.method));
    res.headers.emplace_back("Allow", route->method);
    return reply(std::move(res));
  }
  if (!route->error.empty()) return reply(Error(404, route->error));
  switch (route->kind) {
    case Kind::kMetrics: {
      HttpResponse res;
      res.content_type = "text/plain; version=0.0.4";
      res.body = metrics_->Render();
      return reply(std::move(res));
    }
    case Kind::kLive: return reply(JsonBody(R"({"live":true})"));
    case Kind::kReady: {
      const bool ready = !draining_.load() && repository_->Ready();
      HttpResponse res = JsonBody(ready ? R"({"ready":true})" : R"({"ready":false})");
      res.status = ready ? 200 : 503;
      return reply(std::move(res));
    }
    case Kind::kServer: {
      Json server = {{"name", "weft"}, {"version", kVersion}};
      server["extensions"] = {"binary_tensor_data"};
      return reply(JsonBody(DumpJson(server)));
    }
    case Kind::kModel:
    case Kind::kMetadata: return reply(Metadata(*route));
    case Kind::kModelReady: return reply(Ready(*route));
    case Kind::kStatus: return reply(ModelStatus(*route));
    case Kind::kInfer:
    case Kind::kPredict: return Infer(*route, std::move(request), std::move(reply));
  }
}

HttpResponse ModelService::Ready(const Route& route) const {
  auto batcher = repository_->Find(route.model, route.version);
  if (!batcher.ok() && batcher.status().code() == Code::kNotFound) return Error(404, batcher.status().message());
  const bool ready = batcher.ok() && !draining_.load();
  HttpResponse res = JsonBody(ready ? R"({"ready":true})" : R"({"ready":false})");
  res.status = ready ? 200 : 503;
  return res;
}

HttpResponse ModelService::ModelStatus(const Route& route) const {
  auto versions = repository_->Versions(route.model);
  if (!versions.ok()) return Error(404, versions.status().message());
  Json list = Json::array();
  for (const VersionStatus& v : *versions) {
    if (route.version.has_value() && *route.version != v.version) continue;
    Json status = {{"error_code", v.status.ok() ? "OK" : std::string(CodeName(v.status.code()))},
                   {"error_message", v.status.ok() ? "" : v.status.message()}};
    list.push_back({{"version", std::to_string(v.version)},
                    {"state", std::string(VersionStateName(v.state))},
                    {"status", status}});
  }
  if (list.empty()) return Error(404, StrCat("model ", Quote(route.model), " has no version ", *route.version));
  return JsonBody(DumpJson(Json{{"model_version_status", list}}));
}

HttpResponse ModelService::Metadata(const Route& route) const {
  auto batcher = repository_->Find(route.model, route.version);
  if (!batcher.ok()) return Error(HttpStatusFor(batcher.status()), batcher.status().message());
  const Servable& servable = (*batcher)->servable();
  const std::string version = std::to_string(servable.version());
  if (route.kind == Kind::kMetadata) return JsonBody(WriteTfMetadata(route.model, version, servable.signature()));
  std::vector<std::string> versions;
  if (auto all = repository_->Versions(route.model); all.ok()) {
    for (const VersionStatus& v : *all) {
      if (v.state == VersionState::kAvailable) versions.push_back(std::to_string(v.version));
    }
  }
  return JsonBody(WriteV2Metadata(route.model, versions, servable.signature()));
}

const ModelService::StageHistograms* ModelService::StagesFor(const std::string& model, const std::string& version) {
  std::lock_guard<std::mutex> lock(stages_mutex_);
  std::unique_ptr<StageHistograms>& stages = stages_[model + '\0' + version];
  if (stages == nullptr) {
    const std::string help =
        "Seconds a request spent, by stage: queue (waiting for its batch), compute (its batch's run), total "
        "(received to answered).";
    auto get = [&](const char* stage) {
      return metrics_->GetHistogram("weft_request_duration_seconds", help,
                                    {{"model", model}, {"version", version}, {"stage", stage}}, LatencyBuckets());
    };
    stages = std::make_unique<StageHistograms>(StageHistograms{get("queue"), get("compute"), get("total")});
  }
  return stages.get();
}

void ModelService::Infer(const Route& route, HttpRequest&& request, Reply reply) {
  const Clock::time_point received = Clock::now();
  const char* protocol = ProtocolOf(route.kind);
  // Labels come from what is served, never from the URL as sent: names
  // nobody serves would otherwise add series without end.
  // |version| is kUnknownLabel until the request has found its version.
  auto fail = [&](const Status& status, const std::string& version) {
    const int code = HttpStatusFor(status);
    const bool known = version != kUnknownLabel || repository_->Versions(route.model).ok();
    Count(known ? route.model : kUnknownLabel, version, protocol, code);
    reply(Error(code, status.message()));
  };
  if (draining_.load()) return fail(UnavailableError("the server is stopping"), kUnknownLabel);
  auto found = repository_->Find(route.model, route.version);
  if (!found.ok()) return fail(found.status(), kUnknownLabel);
  std::shared_ptr<Batcher> batcher = std::move(*found);
  const Servable& servable = batcher->servable();
  const std::string version = std::to_string(servable.version());

  int64_t timeout_ms = default_timeout_ms_;
  if (!request.request_timeout_ms.empty()) {
    const std::string& t = request.request_timeout_ms;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), timeout_ms);
    if (ec != std::errc() || end != t.data() + t.size() || timeout_ms <= 0) {
      return fail(
          InvalidArgumentError("header Request-Timeout-Ms: expected a positive number of milliseconds, got ", Quote(t)),
          version);
    }
  }
  std::size_t json_length = request.body.size();
  if (!request.inference_header_length.empty()) {
    const std::string& h = request.inference_header_length;
    const auto [end, ec] = std::from_chars(h.data(), h.data() + h.size(), json_length);
    if (ec != std::errc() || end != h.data() + h.size() || json_length > request.body.size()) {
      return fail(InvalidArgumentError("header Inference-Header-Content-Length: ", Quote(h),
                                       " is not a length within the body's ", request.body.size(), " bytes"),
                  version);
    }
  }
  auto parsed = route.kind == Kind::kInfer ? ParseV2Infer(request.body, json_length, servable.signature())
                                           : ParseTfPredict(request.body, servable.signature());
  parse_seconds_->Observe(std::chrono::duration<double>(Clock::now() - received).count());
  if (!parsed.ok()) {
    return fail(parsed.status().WithContext(StrCat(route.model, " version ", version)), version);
  }
  auto req = std::make_shared<InferRequest>(std::move(*parsed));
  request.body.clear();
  request.body.shrink_to_fit();

  BatchTask task;
  task.inputs.reserve(req->inputs.size());
  for (NamedTensor& in : req->inputs) task.inputs.push_back(std::move(in.value));
  task.rows = req->batch_size;
  task.enqueued = received;
  task.deadline = received + std::chrono::milliseconds(timeout_ms);
  const StageHistograms* stages = StagesFor(route.model, version);
  const Signature* signature = &servable.signature();
  const bool v2 = route.kind == Kind::kInfer;
  task.done = [this, req, reply, signature, v2, protocol, model = route.model, version, received, stages](
                  Status status, std::vector<Tensor> outputs, const BatchTiming& timing) {
    HttpResponse res;
    if (!status.ok()) {
      res = Error(HttpStatusFor(status), StrCat(model, " version ", version, ": ", status.message()));
    } else if (v2) {
      V2Answer answer = WriteV2Infer(model, version, *req, *signature, outputs);
      res.body = std::move(answer.body);
      if (answer.binary) {
        res.content_type = "application/octet-stream";
        res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(answer.json_length));
      }
    } else {
      res.body = WriteTfPredict(*req, *signature, outputs);
    }
    Count(model, version, protocol, res.status);
    stages->queue->Observe(timing.queue_seconds);
    stages->compute->Observe(timing.compute_seconds);
    stages->total->Observe(std::chrono::duration<double>(Clock::now() - received).count());
    reply(std::move(res));
  };
  Status queued = batcher->Enqueue(std::move(task));
  if (!queued.ok()) fail(queued, version);
}

}  // namespace weft::serving
