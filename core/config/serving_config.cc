#include "core/config/serving_config.h"
#include "core/config/serving_tls.h"

#include <algorithm>
#include <filesystem>

#include "core/config/internal/specs.h"
#include "core/config/internal/toml_convert.h"

namespace weft::config {
namespace {

using internal::Bool;
using internal::Default;
using internal::Float;
using internal::Int;
using internal::Spec;
using internal::Str;

OptionSpec Unset(std::string key, double min, std::string doc) {
  OptionSpec spec = Spec(std::move(key), OptionType::kInt, std::move(doc));
  spec.min = min;
  return spec;
}

std::vector<OptionSpec> SignatureSpecs() {
  OptionSpec inputs = Spec("inputs", OptionType::kStringList,
                           "The tensors clients feed, by name (Placeholders). Default: every Placeholder the outputs "
                           "need (an ONNX model's graph inputs).");
  inputs.default_value = Default("[]");
  OptionSpec outputs = Spec("outputs", OptionType::kStringList,
                            "The tensors answered, by name (\"probs\" or \"probs:0\"). Default: the tensors nothing "
                            "reads (an ONNX model's graph outputs).");
  outputs.default_value = Default("[]");
  return {Str("name", "serving_default", "The signature's name (TensorFlow Serving's signature_name)."), inputs,
          outputs};
}

std::vector<OptionSpec> VersionSpecs() {
  OptionSpec policy = Str("policy", "latest",
                          "Which versions are served: \"latest\" (the newest `latest` of them), \"all\", or "
                          "\"specific\" (those listed in `specific`).");
  policy.choices = {"latest", "all", "specific"};
  OptionSpec specific =
      Spec("specific", OptionType::kIntList, "For policy \"specific\": the version numbers to serve.");
  specific.default_value = Default("[]");
  return {policy, Int("latest", 1, 1, "For policy \"latest\": how many of the newest versions."), specific};
}

std::vector<OptionSpec> BatchingSpecs() {
  return {Bool("enabled", true, "Batch concurrent requests together (off: every request runs alone)."),
          Unset("max_batch_size", 1,
                "The most rows one run takes. Unset: the server measures each batch size's cost and stops "
                "growing where a bigger batch no longer pays (at most 64)."),
          Unset("batch_timeout_us", 0,
                "How long a batch waits for more requests before it runs. Unset: it runs as soon as a batch "
                "thread is free, so batches grow only when requests arrive faster than they are answered."),
          Unset("max_enqueued_batches", 1,
                "How many batches may wait; beyond them a request is answered 429 at once. Unset: 64 / "
                "max_batch_size batches of requests' worth, at least 4 batches."),
          Unset("num_batch_threads", 1,
                "Batches run at once, the cores divided evenly between their kernels. Unset: as the load goes: "
                "a batch alone gets every core, and under load one batch per core runs, each on one thread.")};
}

struct ModelSection {
  std::string_view name;
  std::vector<OptionSpec> (*specs)();
};
constexpr ModelSection kModelSections[] = {
    {"signature", SignatureSpecs}, {"versions", VersionSpecs}, {"batching", BatchingSpecs}};

std::optional<int64_t> OptionalInt(const OptionValues& values, std::string_view key) {
  if (!values.Has(key)) return std::nullopt;
  auto v = values.GetInt(key);
  return v.ok() ? std::optional<int64_t>(*v) : std::nullopt;
}

}  // namespace

std::vector<OptionSpec> ServingSpecs() {
  OptionSpec port = Int("http_port", 8501, 0, "The HTTP port (TensorFlow Serving's REST default); 0 picks a free one.");
  port.max = 65535;
  return {Str("host", "0.0.0.0", "The address to listen on (\"127.0.0.1\": this machine only)."),
          port,
          Int("http_threads", 0, 0, "Threads that read requests and write answers; 0: one per core."),
          Int("max_body_mb", 64, 1, "The largest request body, in MiB; a bigger one is answered 413."),
          Int("request_timeout_ms", 30000, 1,
              "A request's deadline when it gives none (header Request-Timeout-Ms); one whose deadline passes "
              "before it runs is answered 504."),
          Int("read_timeout_ms", 30000, 1,
              "How long a connection may take to send a whole request, counted from when it opened or its last "
              "answer was sent: an idle keep-alive connection closes after it, and a client sending slowly is "
              "disconnected without holding a thread."),
          Int("max_connections", 4096, 1, "Open connections; more are refused (closed at once)."),
          Float("poll_interval_s", "2.0", 0,
                "How often the model directory is scanned for new and removed versions; 0: only at start."),
          Str("bearer_token_file", "",
              "A file holding a token every request must bring (Authorization: Bearer TOKEN); empty: none. "
              "Relative to this file's directory."),
          Str("tls_certificate", "",
              "HTTPS: this server's certificate (chain), PEM; empty: plain HTTP. Relative to this file's directory."),
          Str("tls_private_key", "", "HTTPS: the private key of tls_certificate, PEM; only its owner may read it."),
          Str("tls_ca", "",
              "HTTPS: the CA certificate(s), PEM, that a client's certificate must chain to; empty: clients need "
              "no certificate.")};
}

namespace {

// The path at |key|, relative ones against |base_dir| (the config file's
// directory); empty when unset.
std::string ResolvedPath(const OptionValues& v, const char* key, std::string_view base_dir) {
  auto s = v.GetString(key);
  return s.ok() ? internal::ResolvePath(**s, base_dir) : std::string();
}

}  // namespace

void ApplyServing(const OptionValues& v, std::string_view base_dir, ServingConfig& out) {
  if (auto s = v.GetString("host"); s.ok()) out.host = **s;
  out.http_port = v.GetInt("http_port").value_or(out.http_port);
  out.http_threads = v.GetInt("http_threads").value_or(out.http_threads);
  out.max_body_mb = v.GetInt("max_body_mb").value_or(out.max_body_mb);
  out.request_timeout_ms = v.GetInt("request_timeout_ms").value_or(out.request_timeout_ms);
  out.read_timeout_ms = v.GetInt("read_timeout_ms").value_or(out.read_timeout_ms);
  out.max_connections = v.GetInt("max_connections").value_or(out.max_connections);
  out.poll_interval_s = v.GetFloat("poll_interval_s").value_or(out.poll_interval_s);
  out.bearer_token_file = ResolvedPath(v, "bearer_token_file", base_dir);
}

ServingTls ServingTlsOf(const Config& config) {
  ServingTls tls;
  auto values = config.values.find("serving");
  if (values == config.values.end()) return tls;
  const std::string base_dir = std::filesystem::path(config.source).parent_path().string();
  tls.certificate = ResolvedPath(values->second, "tls_certificate", base_dir);
  tls.private_key = ResolvedPath(values->second, "tls_private_key", base_dir);
  tls.ca = ResolvedPath(values->second, "tls_ca", base_dir);
  return tls;
}

Expected<ModelServingConfig> ParseModelServingConfig(std::string_view text, std::string_view file) {
  WEFT_ASSIGN_OR_RETURN(toml::table document, internal::ParseDocument(text, file));
  ModelServingConfig out;
  out.source = std::string(file);
  std::vector<ConfigError> errors;
  std::vector<std::string> known;
  for (const ModelSection& section : kModelSections) known.emplace_back(section.name);
  for (const auto& [key, node] : document) {
    const std::string name(key.str());
    const bool is_known = std::find(known.begin(), known.end(), name) != known.end();
    if (!is_known || !node.is_table()) {
      const std::string hint = ClosestMatch(name, known);
      errors.push_back({internal::PosOf(key.source(), file), name,
                        !is_known
                            ? StrCat("unknown section", hint.empty() ? "" : StrCat("; did you mean '", hint, "'?"),
                                     " (known: ", StrJoin(known, ", "), ")")
                            : StrCat("expected a table [", name, "]")});
    }
  }
  WEFT_RETURN_IF_ERROR(ErrorsToStatus(errors));
  for (const ModelSection& section : kModelSections) {
    std::optional<Section> written;
    if (const toml::table* table = document[section.name].as_table()) {
      written.emplace();
      written->path = std::string(section.name);
      written->pos = internal::PosOf(table->source(), file);
      for (const auto& [key, node] : *table) {
        written->values[std::string(key.str())] =
            internal::ConvertNode(node, file, internal::PosOf(key.source(), file));
      }
    }
    OptionValues v;
    std::vector<ConfigError> problems = CheckOptions(written ? &*written : nullptr, section.name, section.specs(), &v);
    errors.insert(errors.end(), problems.begin(), problems.end());
    if (!problems.empty()) continue;
    if (section.name == "signature") {
      out.signature_name = **v.GetString("name");
      out.inputs = *v.GetStringList("inputs");
      out.outputs = *v.GetStringList("outputs");
    } else if (section.name == "versions") {
      out.version_policy = **v.GetString("policy");
      out.latest = *v.GetInt("latest");
      out.specific = *v.GetIntList("specific");
      if (out.version_policy == "specific" && out.specific.empty()) {
        errors.push_back({written ? written->pos : SourcePos{std::string(file)}, "versions.specific",
                          "policy \"specific\" needs the versions to serve: specific = [1, 2]"});
      }
    } else {
      out.batching = *v.GetBool("enabled");
      out.max_batch_size = OptionalInt(v, "max_batch_size");
      out.batch_timeout_us = OptionalInt(v, "batch_timeout_us");
      out.max_enqueued_batches = OptionalInt(v, "max_enqueued_batches");
      out.num_batch_threads = OptionalInt(v, "num_batch_threads");
    }
  }
  WEFT_RETURN_IF_ERROR(ErrorsToStatus(errors));
  return out;
}

std::vector<std::pair<std::string, OptionSpec>> ModelServingKeys() {
  std::vector<std::pair<std::string, OptionSpec>> keys;
  for (const ModelSection& section : kModelSections) {
    for (OptionSpec& spec : section.specs()) keys.emplace_back(StrCat(section.name, ".", spec.key), std::move(spec));
  }
  return keys;
}

}  // namespace weft::config
