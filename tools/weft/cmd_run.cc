// weft run: runs a graph file once with feeds from .npy files and writes
// every fetch to a .npy file (printing the small ones).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>

#include "capi/inference.h"
#include "core/base/logging.h"
#include "core/checkpoint/manager.h"
#include "core/distributed/cluster_runtime.h"
#include "core/distributed/dist_session.h"
#include "core/graph/builder.h"
#include "core/graph/graph.h"
#include "core/runtime/session.h"
#include "core/runtime/trace.h"
#include "core/tensor/npy.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

struct RunArgs {
  std::string graph;
  std::vector<std::string> feeds;    // NAME=FILE.npy
  std::vector<std::string> fetches;  // NAME[:K]
  std::vector<std::string> targets;
  std::string out_dir = ".";
  std::string trace;
  std::string checkpoint;
  bool quiet = false;
  bool local = false;
  int optimize = -1;
};

// "dense/logits:1" -> "dense_logits_1.npy"
std::string FileNameFor(const std::string& fetch) {
  std::string name = fetch;
  for (char& c : name) {
    if (c == '/' || c == ':') c = '_';
  }
  return name + ".npy";
}

// A small fetch as the terminal shows it: a float matrix (or batch of
// matrices) one row per line, like NumPy; anything else on one line.
std::string Printed(const Tensor& t) {
  const bool floating = t.dtype() == DType::kF32 || t.dtype() == DType::kF64;
  if (!floating || t.shape().rank() < 2 || t.raw_data() == nullptr) return t.DebugString(64);
  const int64_t row = t.shape().dim(t.shape().rank() - 1);
  std::string out = t.TypeString();
  char number[32];
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const double v = t.dtype() == DType::kF32 ? t.data<float>()[i] : t.data<double>()[i];
    std::snprintf(number, sizeof number, "%11.4g", v);
    if (i % row == 0) out += "\n   ";
    out += number;
  }
  return out;
}

// Adds to |graph| a NoOp that assigns every variable its value from the
// newest checkpoint of |dir| (fed through one Placeholder each), and returns
// the extended graph, the NoOp's name and the feeds.
struct Restore {
  Graph graph;
  std::string op;
  std::vector<std::pair<std::string, Tensor>> feeds;
};
Expected<Restore> AddRestore(const Graph& graph, const std::string& dir) {
  WEFT_ASSIGN_OR_RETURN(auto reader, checkpoint::OpenNewestBundle(dir));
  GraphBuilder b;
  WEFT_RETURN_IF_ERROR(b.Import(graph));
  Restore r;
  std::vector<Output> assigns;
  for (const Graph::Node& n : graph.nodes()) {
    if (n.op_name() != "VarHandle") continue;
    if (reader->Find(n.name()) == nullptr) {
      return NotFoundError("variable ", Quote(n.name()), " is not in the checkpoint ", Quote(reader->prefix()),
                           " (`weft ckpt inspect ", reader->prefix(), "` lists what it holds)");
    }
    WEFT_ASSIGN_OR_RETURN(Tensor value, reader->Read(n.name()));
    Output ph = b.Placeholder(value.dtype(), value.shape(), StrCat("weft_run/restore/", n.name()));
    assigns.push_back(b.Op("Assign", {b.Find(n.name()), ph}, {}, StrCat("weft_run/restore/", n.name(), "/assign")));
    r.feeds.emplace_back(ph.node_name(), std::move(value));
  }
  {
    auto deps = b.ControlDependencies(assigns);
    r.op = b.Op("NoOp", {}, {}, "weft_run/restore").node_name();
  }
  WEFT_RETURN_IF_ERROR(b.status());
  WEFT_ASSIGN_OR_RETURN(r.graph, b.Build());
  return r;
}

int Run(Context& ctx, const RunArgs& args) {
  ApplyOptimizeOption(ctx, args.optimize);
  if (args.fetches.empty() && args.targets.empty()) {
    return ReportError(InvalidArgumentError("nothing to run: give at least one --fetch or --target (`weft inspect ",
                                            args.graph, "` lists the graph's outputs)"));
  }
  // Where the command's time goes before the step, at debug level.
  auto lap = [last = std::chrono::steady_clock::now()]() mutable {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last).count();
    last = now;
    return ms;
  };
  // The model as the C API reads it (capi/inference.h). With a checkpoint,
  // an .onnx model keeps its variables, to be restored.
  // A .wg file's weights stay in its mapping: the command ends with the run.
  auto model = inference::Model::Load(args.graph, /*freeze=*/args.checkpoint.empty(), TensorReading::kInPlace);
  if (!model.ok()) return ReportError(model.status());
  WEFT_LOG(DEBUG) << "run: read and checked " << args.graph << " (" << model->graph().num_nodes() << " nodes) in "
                  << lap() << " ms";
  std::optional<Restore> restore;
  if (!args.checkpoint.empty()) {
    auto added = AddRestore(model->graph(), args.checkpoint);
    if (!added.ok()) return ReportError(added.status().WithContext(StrCat("--checkpoint ", args.checkpoint)));
    restore = std::move(*added);
    model = model->WithGraph(std::move(restore->graph));
    if (!model.ok()) return ReportError(model.status());
  }

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const std::string& feed : args.feeds) {
    auto value = ReadFeedFlag(feed);
    if (!value.ok()) return ReportError(value.status());
    feeds.push_back(std::move(*value));
  }

  const dist::ClusterSpec* cluster = nullptr;
  if (!args.local) {
    auto spec = ctx.Cluster();
    if (!spec.ok()) return ReportError(spec.status());
    if ((*spec)->distributed()) cluster = *spec;
  }
  ctx.DeferDeviceCounting();  // devices open when placement needs them
  if (cluster == nullptr) ctx.LocalOnly();
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  WEFT_LOG(DEBUG) << "run: loaded the plugins in " << lap() << " ms";
  // In this process, through the inference path the C API takes, or
  // across the tasks of the config's [cluster].
  std::unique_ptr<inference::Session> session;
  std::unique_ptr<dist::DistSession> dist_session;
  if (cluster != nullptr) {
    auto created = dist::DistSession::Create(model->graph(), dist::SessionOptionsFor(*cluster, ctx.config()), **host);
    if (!created.ok()) return ReportError(created.status());
    dist_session = std::move(*created);
  } else {
    inference::SessionSettings settings;
    settings.config = ctx.config();
    settings.session = runtime::SessionOptions::FromConfig(ctx.config());
    settings.any_tensor = true;  // any tensor of the graph, not only the model's inputs and outputs
    auto created = inference::Session::Create(*model, settings, *host);
    if (!created.ok()) return ReportError(created.status());
    session = std::move(*created);
  }
  WEFT_LOG(DEBUG) << "run: opened the devices and the session in " << lap() << " ms";

  if (restore.has_value()) {
    Status restored = session != nullptr ? session->Run(restore->feeds, {}, {restore->op}, nullptr)
                                         : dist_session->Run(restore->feeds, {}, {restore->op}, nullptr);
    if (!restored.ok()) return ReportError(restored.WithContext(StrCat("restoring ", args.checkpoint)));
  }
  runtime::TraceRecorder trace;
  runtime::RunOptions options;
  if (!args.trace.empty()) options.trace = &trace;
  std::vector<Tensor> outputs;
  const auto start = std::chrono::steady_clock::now();
  Status status = session != nullptr ? session->Run(feeds, args.fetches, args.targets, &outputs, options)
                                     : dist_session->Run(feeds, args.fetches, args.targets, &outputs, options);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!args.trace.empty()) {
    // A failed step's trace helps too: write it either way.
    if (Status written = trace.WriteJson(args.trace); !written.ok()) return ReportError(written);
  }
  if (!status.ok()) {
    return ReportClusterError(status,
                              "Start it again and run the command again (a task started anew has lost its variables: "
                              "give --checkpoint to restore them).");
  }

  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  if (ec) {
    return ReportError(InvalidArgumentError("--out ", Quote(args.out_dir), ": cannot create it: ", ec.message()));
  }
  for (std::size_t i = 0; i < args.fetches.size(); ++i) {
    const std::string path = (std::filesystem::path(args.out_dir) / FileNameFor(args.fetches[i])).string();
    const Tensor& t = outputs[i];
    if (Status written = WriteNpy(path, t); !written.ok()) return ReportError(written.WithContext(args.fetches[i]));
    if (!args.quiet) {
      std::cout << args.fetches[i] << ": ";
      std::cout << (t.num_elements() <= 64 ? Printed(t) : t.TypeString()) << "\n  -> " << path << "\n";
    }
  }
  if (!args.quiet) {
    std::cout << "ran in " << std::fixed << std::setprecision(1) << ms << " ms";
    if (!args.trace.empty()) std::cout << "; trace in " << args.trace << " (open it in ui.perfetto.dev)";
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace

Expected<std::pair<std::string, Tensor>> ReadFeedFlag(const std::string& feed, std::string_view flag) {
  const auto eq = feed.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == feed.size()) {
    return InvalidArgumentError(flag, " ", Quote(feed), ": expected NAME=FILE.npy");
  }
  auto value = ReadNpy(feed.substr(eq + 1));
  if (!value.ok()) return value.status().WithContext(StrCat(flag, " ", feed.substr(0, eq)));
  return std::make_pair(feed.substr(0, eq), std::move(*value));
}

void AddRunCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a graph file once: feeds from .npy files, fetches to .npy files");
  cmd->add_option("GRAPH", args->graph, "A .wg, .wgt or .onnx graph file (an .onnx model is imported frozen)")
      ->required();
  cmd->add_option("--feed", args->feeds, "NAME=FILE.npy: a value for a tensor (usually a Placeholder); repeatable");
  cmd->add_option("--fetch", args->fetches, "NAME or NAME:K: a tensor to compute and save; repeatable");
  cmd->add_option("--target", args->targets, "A node to run for its effect (e.g. an initializer); repeatable");
  cmd->add_option("--out", args->out_dir, "Where to write one .npy per fetch (default: the current directory)");
  cmd->add_option("--trace", args->trace, "Write a Chrome trace of the step (for ui.perfetto.dev) to this file");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "Restore every variable from the newest checkpoint of this directory first (as `weft train` "
                  "writes them)");
  cmd->add_flag("-q,--quiet", args->quiet, "Print nothing on success");
  AddOptimizeOption(cmd, &args->optimize);
  cmd->add_flag("--local", args->local,
                "Run in this process even when the config has a [cluster] (by default the graph runs on the cluster's "
                "tasks, which `weft serve` started)");
  cmd->footer("Example: weft run configs/models/mnist_mlp.wgt --feed images=x.npy --fetch logits --out results/");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Run(ctx, *args); }; });
}

}  // namespace weft::cli
