#include "tools/weft/context.h"

#include <iostream>

#include "core/base/logging.h"
#include "core/distributed/lost_task.h"
#include "core/plugin/host_services.h"
#include "core/tensor/size.h"

namespace weft::cli {

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == Code::kInternal || status.code() == Code::kUnknown) {
    return kExitInternalError;
  }
  if (dist::IsLostTask(status)) return kExitTaskLost;
  return kExitUserError;
}

int ReportError(const Status& status) {
  std::string text = status.message();
  std::string indented;
  for (char c : text) {
    indented.push_back(c);
    if (c == '\n') indented.append("  ");
  }
  std::cerr << "weft: error: " << indented << '\n';
  return ExitCodeFor(status);
}

int ReportClusterError(const Status& status, std::string_view what_to_do) {
  return ReportError(dist::ExplainLostTask(status, what_to_do));
}

Status Context::Init() {
  if (options_.config_path.empty()) {
    WEFT_ASSIGN_OR_RETURN(config_, config::DefaultConfig());
  } else {
    WEFT_ASSIGN_OR_RETURN(config_, config::LoadConfigFile(options_.config_path));
  }
  LogLevel level = config_->logging.level;
  if (!options_.log_level.empty()) {
    auto parsed = ParseLogLevel(options_.log_level);
    if (!parsed) {
      return InvalidArgumentError(
          "--log-level: expected one of trace, debug, info, warning, "
          "error, off; got ",
          Quote(options_.log_level));
    }
    level = *parsed;
  }
  SetLogLevel(level);
  WEFT_RETURN_IF_ERROR(SetLogDestination(config_->logging.file, config_->logging.format)
                           .WithContext(StrCat(config_->source, ": logging.file")));
  if (config_->runtime.max_tensor_mb) {
    const uint64_t mb = static_cast<uint64_t>(*config_->runtime.max_tensor_mb);
    SetMaxTensorBytes(mb > (uint64_t{1} << 43) ? uint64_t{1} << 63 : mb << 20);
  }
  return Status();
}

Expected<plugin::PluginHost*> Context::Plugins() {
  if (!host_) {
    plugin::PluginHostOptions options;
    options.defer_device_count = defer_device_count_;
    if (local_only_) options.skip_kinds = {plugin::PluginKind::kTransport, plugin::PluginKind::kCollectives};
    host_ = std::make_unique<plugin::PluginHost>(*config_, options);
    WEFT_RETURN_IF_ERROR(host_->LoadAll());
    for (const config::ConfigError& warning : host_->UnusedSections()) {
      WEFT_LOG(WARNING) << warning.ToString();
    }
  }
  return host_.get();
}

Expected<const dist::ClusterSpec*> Context::Cluster() {
  if (!cluster_) {
    WEFT_ASSIGN_OR_RETURN(cluster_,
                          dist::ResolveCluster(*config_, options_.job, options_.task, dist::ProcessEnvironment()));
  }
  return &*cluster_;
}

}  // namespace weft::cli
