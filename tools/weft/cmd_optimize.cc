// `weft optimize MODEL -o OUT [--level L] [--explain]`: runs the graph
// optimizer over a whole model once and writes the result (ONNX Runtime's
// offline mode); `--list-ops` lists the ops (with their dtypes) that one or
// more optimized models run, the list a build with only those kernels
// starts from; and `--optimize LEVEL` for the commands that run graphs
// (docs/optimizer.md).
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "core/base/file_util.h"
#include "core/graph/op_list.h"
#include "core/graph/serialize.h"
#include "core/passes/pass.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/session.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct OptimizeArgs {
  std::vector<std::string> models;
  std::string out;
  int level = -1;
  bool explain = false;
  bool list_ops = false;
};

std::string Milliseconds(double ms) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(ms < 10 ? 2 : 1) << ms << " ms";
  return s.str();
}

// --explain: every pass, what it did or why it did not run, and what the
// passes left alone.
void PrintExplanation(const passes::OptimizeResult& result, const passes::OptimizeOptions& options, std::ostream& out) {
  out << "\nPasses, in the order they run:\n";
  Table table({"  pass", "level", "rewrites", "time", "first nodes"});
  for (const passes::PassInfo& info : passes::ListPasses()) {
    const passes::PassReport* report = nullptr;
    for (const passes::PassReport& r : result.reports) {
      if (r.pass == info.name) report = &r;
    }
    std::string why_not;
    if (info.level > options.level) why_not = StrCat("not run: level ", info.level, " > ", options.level);
    if (std::find(options.disable.begin(), options.disable.end(), info.name) != options.disable.end()) {
      why_not = "not run: disabled";
    }
    if (report == nullptr) {
      table.AddRow({"  " + info.name, std::to_string(info.level), "-", "-", why_not});
      continue;
    }
    table.AddRow({"  " + info.name, std::to_string(info.level), std::to_string(report->changed),
                  Milliseconds(report->milliseconds), StrJoin(report->examples, ", ")});
  }
  table.Print(out);
  bool any_note = false;
  for (const passes::PassReport& r : result.reports) {
    for (const std::string& note : r.notes) {
      if (!any_note) out << "\nLeft alone:\n";
      any_note = true;
      out << "  " << r.pass << ": " << note << "\n";
    }
  }
}

int Optimize(Context& ctx, const OptimizeArgs& args) {
  if (args.models.size() > 1 && !args.list_ops) {
    return ReportError(InvalidArgumentError("weft optimize takes one MODEL (", args.models.size(),
                                            " given); several only with --list-ops"));
  }
  if (!args.out.empty() && !args.list_ops && !FormatForPath(args.out).ok()) {
    return ReportError(InvalidArgumentError("-o ", Quote(args.out),
                                            ": weft optimize writes a .wg or .wgt graph file (an optimized graph may "
                                            "hold ops ONNX does not have)"));
  }
  passes::OptimizeOptions options = runtime::SessionOptions::FromConfig(ctx.config()).optimizer;
  if (args.level >= 0) options.level = args.level;
  if (Status valid = passes::ValidateOptions(options); !valid.ok()) return ReportError(valid);
  std::set<std::string> op_lines;
  for (const std::string& model : args.models) {
    auto result = OptimizeModel(ctx, model, options);
    if (!result.ok()) return ReportError(result.status());
    int64_t changed = 0;
    for (const passes::PassReport& r : result->reports) changed += r.changed;
    // The list goes to stdout alone when no -o takes it: the rest to stderr.
    std::ostream& log = args.list_ops && args.out.empty() ? std::cerr : std::cout;
    log << model << ": " << result->nodes_before << " nodes -> " << result->nodes_after << " at level " << options.level
        << " (" << changed << " rewrite" << (changed == 1 ? "" : "s") << ")\n";
    if (args.explain) PrintExplanation(*result, options, log);
    if (args.list_ops) {
      AddKernelLines(result->graph->ToGraphDef(), op_lines);
    } else if (!args.out.empty()) {
      if (Status written = WriteGraphFile(args.out, result->graph->ToGraphDef()); !written.ok()) {
        return ReportError(written);
      }
      std::cout << "wrote " << args.out << "\n";
    }
  }
  if (!args.list_ops) return kExitOk;
  std::ostringstream list;
  list << "# weft optimize --list-ops at level " << options.level << ": " << StrJoin(args.models, " ") << "\n"
       << "# one line per op and the dtypes that choose its kernel (" << op_lines.size() << ")\n";
  for (const std::string& line : op_lines) list << line << "\n";
  if (args.out.empty()) {
    std::cout << list.str();
    return kExitOk;
  }
  if (Status written = WriteFileAtomically(args.out, list.str()); !written.ok()) {
    return ReportError(written.WithContext(StrCat("-o ", Quote(args.out))));
  }
  std::cout << "wrote " << op_lines.size() << " ops to " << args.out << "\n";
  return kExitOk;
}

}  // namespace

Expected<passes::OptimizeResult> OptimizeModel(Context& ctx, const std::string& model,
                                               const passes::OptimizeOptions& options) {
  WEFT_ASSIGN_OR_RETURN(GraphDef def, onnx_io::ReadModelFile(model, FrozenImport()));
  auto graph = Graph::FromGraphDef(std::move(def));
  if (!graph.ok()) return graph.status().WithContext(model);

  // The model's interface stays: its inputs (Placeholders) and outputs
  // (what nothing reads), so that the file runs as the original did.
  passes::PassContext context;
  for (const Graph::Node& node : graph->nodes()) {
    if (graph->consumers()[static_cast<std::size_t>(node.id)].empty() || node.op_name() == "Placeholder") {
      context.keep.insert(node.name());
    }
  }
  ctx.DeferDeviceCounting();  // devices open when placement needs them
  ctx.LocalOnly();
  WEFT_ASSIGN_OR_RETURN(plugin::PluginHost * host, ctx.Plugins());
  WEFT_ASSIGN_OR_RETURN(auto devices, runtime::DeviceSet::Open(*host, runtime::DeviceSet::Opening::kLazy));
  // A session of nothing but the host device, to evaluate constants.
  runtime::SessionOptions session_options = runtime::SessionOptions::FromConfig(ctx.config());
  session_options.optimizer.level = 0;
  WEFT_ASSIGN_OR_RETURN(auto evaluator, runtime::Session::Create(Graph(), std::move(devices), session_options));
  context.evaluate = [&](GraphDef part, const std::vector<std::string>& fetches) {
    return evaluator->EvaluateOnHost(std::move(part), fetches);
  };
  const placement::PlacementOptions placement = runtime::PlacementOptionsFromConfig(ctx.config());
  context.requested_device = [&](const NodeDef& node) { return runtime::RequestedDevice(placement, node); };
  context.has_fused_kernel = [&](const NodeDef& node, const NodeDef& fused) {
    return runtime::FusedKernelEverywhere(evaluator->devices(), placement, node, fused);
  };
  auto shared = std::make_shared<const Graph>(std::move(*graph));
  auto result = passes::Optimize(shared, options, context);
  if (!result.ok()) return result.status().WithContext(model);
  return std::move(*result);
}

void AddOptimizeOption(CLI::App* cmd, int* level) {
  cmd->add_option("--optimize", *level,
                  StrCat("The graph optimizer's level: 0 none, 1 folding, CSE and simplification, 2 fusions, 3 "
                         "Winograd (default: [graph_optimizer] level, else ",
                         passes::kDefaultLevel, "; docs/optimizer.md)"))
      ->check(CLI::Range(0, passes::kMaxLevel));
}

void ApplyOptimizeOption(Context& ctx, int level) {
  if (level >= 0) ctx.mutable_config().graph_optimizer.level = level;
}

void AddOptimizeCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<OptimizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "optimize", "Run the graph optimizer over a model and write the optimized graph (--explain: what each pass did)");
  cmd->add_option("MODEL", args->models,
                  "A .wg, .wgt or .onnx model (an .onnx model is imported frozen); several with --list-ops")
      ->required();
  cmd->add_option("-o,--out", args->out,
                  "Write the optimized graph to this .wg or .wgt file (with --list-ops: the list, as text)");
  cmd->add_option("--level", args->level,
                  "0 to 3 (default: [graph_optimizer] level, else the build's default); same as --optimize")
      ->check(CLI::Range(0, passes::kMaxLevel));
  cmd->add_option("--optimize", args->level, "Same as --level")->check(CLI::Range(0, passes::kMaxLevel));
  cmd->add_flag("--explain", args->explain,
                "List every pass: its level, how many rewrites it made, its time and the first nodes it rewrote, "
                "and what it left alone");
  cmd->add_flag("--list-ops", args->list_ops,
                "List the ops the optimized models run, each with the dtypes that choose its kernel (\"Conv2D "
                "T=f32\"), one per line: the kernels a build for these models needs");
  cmd->footer(
      "Example: weft optimize model.onnx -o model.wg --explain\n"
      "         weft optimize mobilenet.onnx resnet.onnx --list-ops -o ops.txt\n"
      "The model's inputs (Placeholders) and outputs (nodes nothing reads) keep their names; a folded or merged "
      "node keeps the name of the node it replaced.");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Optimize(ctx, *args); }; });
}

}  // namespace weft::cli
