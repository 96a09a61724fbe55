// weft model-server: serves a directory of versioned models over HTTP with
// TensorFlow Serving's REST API and the KServe v2 protocol, until SIGTERM
// or SIGINT (docs/serving.md).
#include <pthread.h>
#include <signal.h>

#include <iostream>

#include "core/base/file_util.h"
#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/config/serving_tls.h"
#include "core/runtime/session.h"
#include "core/serving/http_server.h"
#include "core/serving/repository.h"
#include "core/serving/service.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

struct ModelServerArgs {
  std::string models;
  int port = -1;
  std::string host;
  int threads = -1;
  double poll = -1;
  int optimize = -1;
};

// What the log says about each model once the first load is over.
std::string Summary(const serving::ModelRepository& repository) {
  std::vector<std::string> parts;
  for (const std::string& model : repository.Models()) {
    auto versions = repository.Versions(model);
    std::vector<std::string> available;
    if (versions.ok()) {
      for (const auto& v : *versions) {
        if (v.state == serving::VersionState::kAvailable) available.push_back(std::to_string(v.version));
      }
    }
    parts.push_back(StrCat(model, available.empty() ? " (not loaded)" : StrCat(" v", StrJoin(available, ","))));
  }
  return parts.empty() ? "no models yet" : StrJoin(parts, ", ");
}

int ModelServer(Context& ctx, const ModelServerArgs& args) {
  ApplyOptimizeOption(ctx, args.optimize);
  config::ServingConfig serving = ctx.config().serving;
  if (args.port >= 0) serving.http_port = args.port;
  if (!args.host.empty()) serving.host = args.host;
  if (args.threads >= 0) serving.http_threads = args.threads;
  if (args.poll >= 0) serving.poll_interval_s = args.poll;
  // The token first: a bad token file is found before the models load.
  std::string bearer_token;
  if (!serving.bearer_token_file.empty()) {
    auto token = ReadBearerToken(serving.bearer_token_file, "[serving] bearer_token_file");
    if (!token.ok()) return ReportError(token.status());
    bearer_token = std::move(*token);
  }

  // Then the address and the TLS files, for the same reason.
  serving::HttpServerOptions http;
  http.host = serving.host;
  http.port = static_cast<int>(serving.http_port);
  http.max_body_bytes = static_cast<uint64_t>(serving.max_body_mb) << 20;
  http.read_timeout_ms = serving.read_timeout_ms;
  http.max_connections = serving.max_connections;
  http.bearer_token = bearer_token;
  const config::ServingTls tls = config::ServingTlsOf(ctx.config());
  http.tls_certificate = tls.certificate;
  http.tls_private_key = tls.private_key;
  http.tls_ca = tls.ca;
  if (Status checked = serving::HttpServer::CheckOptions(http); !checked.ok()) return ReportError(checked);

  // Every thread started from here on leaves SIGTERM and SIGINT to the
  // sigwait below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ctx.DeferDeviceCounting();
  ctx.LocalOnly();
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto devices = runtime::DeviceSet::Open(**host, runtime::DeviceSet::Opening::kLazy);
  if (!devices.ok()) return ReportError(devices.status());

  serving::MetricsRegistry metrics;
  serving::RepositoryOptions options;
  options.dir = args.models;
  options.devices = std::move(*devices);
  options.session = runtime::SessionOptions::FromConfig(ctx.config());
  options.metrics = &metrics;
  options.poll_interval_s = serving.poll_interval_s;
  options.cores = runtime::ResolveThreads(runtime::SessionOptions{}).second;
  serving::ModelRepository repository(options);
  if (Status loaded = repository.LoadAll(); !loaded.ok()) return ReportError(loaded);
  http.threads = serving.http_threads > 0 ? static_cast<int>(serving.http_threads) : options.cores;

  serving::ModelService service(&repository, &metrics, serving.request_timeout_ms);
  auto server = serving::HttpServer::Start(http, [&service](serving::HttpRequest&& request, serving::Reply reply) {
    service.Handle(std::move(request), std::move(reply));
  });
  if (!server.ok()) return ReportError(server.status());
  repository.StartPolling();
  std::cout << "model-server: listening on " << (http.tls_certificate.empty() ? "http" : "https") << "://"
            << serving.host << ":" << (*server)->port() << " (" << Summary(repository) << ")" << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::cout << "model-server: " << (signal == SIGTERM ? "SIGTERM" : "SIGINT") << ": answering the "
            << (*server)->requests_in_flight() << " requests in flight, then stopping" << std::endl;
  service.SetDraining();
  (*server)->Shutdown(serving.request_timeout_ms);
  repository.Stop();
  std::cout << "model-server: stopped" << std::endl;
  return kExitOk;
}

}  // namespace

Expected<std::string> ReadBearerToken(const std::string& path, std::string_view what) {
  auto read = ReadFile(path);
  if (!read.ok()) return read.status().WithContext(what);
  std::string token = std::move(*read);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return InvalidArgumentError(what, " ", Quote(path), " is empty");
  return token;
}

void AddModelServerCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ModelServerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "model-server",
      "Serve a directory of versioned models over HTTP: TensorFlow Serving's REST API and KServe v2 (docs/serving.md)");
  cmd->add_option("--models", args->models, "The directory of NAME/VERSION/model.{onnx,wg} (and NAME/config.toml)")
      ->required();
  cmd->add_option("--http-port", args->port, "The port (default: [serving] http_port, 8501; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", args->host, "The address to listen on (default: [serving] host, 0.0.0.0)");
  cmd->add_option("--http-threads", args->threads, "Threads for HTTP (default: one per core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--poll-interval", args->poll,
                  "Seconds between scans of --models for new versions (default 2; 0: only at start)")
      ->check(CLI::NonNegativeNumber);
  AddOptimizeOption(cmd, &args->optimize);
  cmd->footer(
      "Example: weft model-server --models models/ --http-port 8501\n"
      "         curl -d '{\"instances\": [[1, 2, 3, 4]]}' localhost:8501/v1/models/NAME:predict\n"
      "Stops on SIGTERM or Ctrl-C after answering the requests in flight.");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return ModelServer(ctx, *args); }; });
}

}  // namespace weft::cli
