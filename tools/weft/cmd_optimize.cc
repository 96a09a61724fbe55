// `weft optimize MODEL -o OUT [--level L] [--explain]`: runs the graph
// optimizer over a whole model once and writes the result (ONNX Runtime's
// offline mode), and `--optimize LEVEL` for the commands that run graphs
// (docs/optimizer.md).
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "core/graph/serialize.h"
#include "core/passes/pass.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/session.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct OptimizeArgs {
  std::string model;
  std::string out;
  int level = -1;
  bool explain = false;
};

std::string Milliseconds(double ms) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(ms < 10 ? 2 : 1) << ms << " ms";
  return s.str();
}

int Optimize(Context& ctx, const OptimizeArgs& args) {
  if (!args.out.empty()) {
    auto format = FormatForPath(args.out);
    if (!format.ok()) {
      return ReportError(InvalidArgumentError("-o ", Quote(args.out),
                                              ": weft optimize writes a .wg or .wgt graph file (an optimized graph may "
                                              "hold ops ONNX does not have)"));
    }
  }
  auto def = onnx_io::ReadModelFile(args.model, FrozenImport());
  if (!def.ok()) return ReportError(def.status());
  auto graph = Graph::FromGraphDef(std::move(*def));
  if (!graph.ok()) return ReportError(graph.status().WithContext(args.model));

  runtime::SessionOptions session_options = runtime::SessionOptions::FromConfig(ctx.config());
  passes::OptimizeOptions options = session_options.optimizer;
  if (args.level >= 0) options.level = args.level;
  if (Status valid = passes::ValidateOptions(options); !valid.ok()) return ReportError(valid);

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
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto devices = runtime::DeviceSet::Open(**host, runtime::DeviceSet::Opening::kLazy);
  if (!devices.ok()) return ReportError(devices.status());
  // A session of nothing but the host device, to evaluate constants.
  session_options.optimizer.level = 0;
  auto evaluator = runtime::Session::Create(Graph(), std::move(*devices), session_options);
  if (!evaluator.ok()) return ReportError(evaluator.status());
  context.evaluate = [&](GraphDef part, const std::vector<std::string>& fetches) {
    return (*evaluator)->EvaluateOnHost(std::move(part), fetches);
  };
  const placement::PlacementOptions placement = runtime::PlacementOptionsFromConfig(ctx.config());
  context.requested_device = [&](const NodeDef& node) { return runtime::RequestedDevice(placement, node); };
  context.has_fused_kernel = [&](const NodeDef& node, const NodeDef& fused) {
    return runtime::FusedKernelEverywhere((*evaluator)->devices(), placement, node, fused);
  };
  auto shared = std::make_shared<const Graph>(std::move(*graph));
  auto result = passes::Optimize(shared, options, context);
  if (!result.ok()) return ReportError(result.status().WithContext(args.model));

  int64_t changed = 0;
  for (const passes::PassReport& r : result->reports) changed += r.changed;
  std::cout << args.model << ": " << result->nodes_before << " nodes -> " << result->nodes_after << " at level "
            << options.level << " (" << changed << " rewrite" << (changed == 1 ? "" : "s") << ")\n";
  if (args.explain) {
    std::cout << "\nPasses, in the order they run:\n";
    Table table({"  pass", "level", "rewrites", "time", "first nodes"});
    for (const passes::PassInfo& info : passes::ListPasses()) {
      const passes::PassReport* report = nullptr;
      for (const passes::PassReport& r : result->reports) {
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
    table.Print(std::cout);
    bool any_note = false;
    for (const passes::PassReport& r : result->reports) {
      for (const std::string& note : r.notes) {
        if (!any_note) std::cout << "\nLeft alone:\n";
        any_note = true;
        std::cout << "  " << r.pass << ": " << note << "\n";
      }
    }
  }
  if (!args.out.empty()) {
    if (Status written = WriteGraphFile(args.out, result->graph->ToGraphDef()); !written.ok()) {
      return ReportError(written);
    }
    std::cout << "wrote " << args.out << "\n";
  }
  return kExitOk;
}

}  // namespace

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
  cmd->add_option("MODEL", args->model, "A .wg, .wgt or .onnx model (an .onnx model is imported frozen)")->required();
  cmd->add_option("-o,--out", args->out, "Write the optimized graph to this .wg or .wgt file");
  cmd->add_option("--level", args->level,
                  "0 to 3 (default: [graph_optimizer] level, else the build's default); same as --optimize")
      ->check(CLI::Range(0, passes::kMaxLevel));
  cmd->add_option("--optimize", args->level, "Same as --level")->check(CLI::Range(0, passes::kMaxLevel));
  cmd->add_flag("--explain", args->explain,
                "List every pass: its level, how many rewrites it made, its time and the first nodes it rewrote, "
                "and what it left alone");
  cmd->footer(
      "Example: weft optimize model.onnx -o model.wg --explain\n"
      "The model's inputs (Placeholders) and outputs (nodes nothing reads) keep their names; a folded or merged "
      "node keeps the name of the node it replaced.");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Optimize(ctx, *args); }; });
}

}  // namespace weft::cli
