// `weft bench MODEL`: how fast a model runs here, as a user would measure
// it before putting it into production (TensorFlow Lite's benchmark_model,
// ONNX Runtime's perf test): load time, the first run, latency percentiles
// over repeated runs, throughput, peak memory, and with --profile the ops
// that take the time. docs/cli.md describes the output.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "core/base/strings.h"
#include "core/graph/graph_walk.h"
#include "core/runtime/session.h"
#include "core/runtime/trace.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct BenchArgs {
  std::string model;
  std::vector<std::string> feeds;   // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=1x3x224x224
  std::vector<std::string> fetches;
  int warmup = 3;
  int repeat = 20;
  int threads = 0;
  int optimize = -1;
  bool profile = false;
  bool json = false;
};

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The value at fraction |q| of the sorted |values| (nearest rank).
double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const std::size_t rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::string Fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// "64x28x28x1" -> [64, 28, 28, 1].
Expected<Shape> ParseDims(const std::string& text, const std::string& what) {
  std::vector<int64_t> dims;
  for (const std::string& part : StrSplit(text, 'x')) {
    char* end = nullptr;
    const long long d = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || d < 0 || d > (int64_t{1} << 40)) {
      return InvalidArgumentError(what, ": expected dimensions like 1x3x224x224, got ", Quote(text));
    }
    dims.push_back(d);
  }
  return Shape(dims);
}

// Seeded values: floats uniform in [0, 1), integers and bools 0.
Expected<Tensor> Synthetic(DType dtype, const Shape& shape) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(dtype, shape));
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF32) t.data<float>()[i] = static_cast<float>(u(rng));
    if (dtype == DType::kF64) t.data<double>()[i] = u(rng);
  }
  return t;
}

// The Placeholders |node| needs.
std::set<std::string> PlaceholdersOf(const Graph& g, int node) {
  std::set<std::string> out;
  const std::vector<bool> seen = AncestorsOf(g, {node});
  for (const Graph::Node& n : g.nodes()) {
    if (seen[static_cast<std::size_t>(n.id)] && n.op_name() == "Placeholder") out.insert(n.name());
  }
  return out;
}

// One --shape NAME=DIMS: a seeded value of that shape for the Placeholder
// NAME, into |feeds|.
Status AddShapeFeed(const Graph& graph, const std::string& given, std::map<std::string, Tensor>& feeds) {
  const auto eq = given.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == given.size()) {
    return InvalidArgumentError("--shape ", Quote(given), ": expected NAME=1x3x224x224");
  }
  const std::string name = given.substr(0, eq);
  const Graph::Node* node = graph.Find(name);
  if (node == nullptr || node->op_name() != "Placeholder") {
    std::vector<std::string> names;
    for (const Graph::Node& n : graph.nodes()) {
      if (n.op_name() == "Placeholder") names.push_back(n.name());
    }
    const std::string hint = ClosestMatch(name, names);
    return InvalidArgumentError("--shape ", Quote(given), ": the model has no Placeholder ", Quote(name),
                                hint.empty() ? "" : StrCat("; did you mean ", Quote(hint), "?"),
                                " (its inputs: ", StrJoin(names, ", "), ")");
  }
  auto shape = ParseDims(given.substr(eq + 1), StrCat("--shape ", name));
  if (!shape.ok()) return shape.status();
  if (!node->output_shapes[0].IsCompatibleWith(*shape)) {
    return InvalidArgumentError("--shape ", Quote(given), ": ", Quote(name), " is declared ",
                                node->output_shapes[0].ToString(), ", which ", shape->ToString(), " does not fit");
  }
  auto value = Synthetic(node->output_types[0], *shape);
  if (!value.ok()) return value.status().WithContext(StrCat("--shape ", name));
  feeds[name] = std::move(*value);
  return Status();
}

// Feeds: files, then shapes, then the declared shape when fully known.
// |feedable| gets the Placeholders with a value.
Status CollectFeeds(const Graph& graph, const BenchArgs& args, std::map<std::string, Tensor>& feeds,
                    std::set<std::string>& feedable) {
  for (const std::string& feed : args.feeds) {
    auto value = ReadFeedFlag(feed);
    if (!value.ok()) return value.status();
    feeds[value->first] = std::move(value->second);
  }
  for (const std::string& given : args.shapes) WEFT_RETURN_IF_ERROR(AddShapeFeed(graph, given, feeds));
  for (const Graph::Node& n : graph.nodes()) {
    if (n.op_name() != "Placeholder") continue;
    if (!feeds.contains(n.name()) && n.output_shapes[0].IsFullyDefined()) {
      auto value = Synthetic(n.output_types[0], n.output_shapes[0]);
      if (value.ok()) feeds[n.name()] = std::move(*value);
    }
    if (feeds.contains(n.name())) feedable.insert(n.name());
  }
  return Status();
}

// Fetches: as given, or every output nothing reads whose inputs have values.
Expected<std::vector<std::string>> ChooseFetches(const Graph& graph, const BenchArgs& args,
                                                 const std::set<std::string>& feedable) {
  std::vector<std::string> fetches = args.fetches;
  if (!fetches.empty()) return fetches;
  std::set<std::string> missing;
  for (const Graph::Node& n : graph.nodes()) {
    if (n.op->stateful || n.num_outputs() == 0 || n.op_name() == "Placeholder") continue;
    if (!graph.consumers()[static_cast<std::size_t>(n.id)].empty()) continue;
    if (n.output_types[0] == DType::kResource) continue;
    bool fed = true;
    for (const std::string& p : PlaceholdersOf(graph, n.id)) {
      if (!feedable.contains(p)) missing.insert(p);
      fed = fed && feedable.contains(p);
    }
    if (fed) fetches.push_back(n.name());
  }
  if (fetches.empty()) {
    std::vector<std::string> hints;
    for (const std::string& p : missing) {
      hints.push_back(StrCat(p, " ", graph.Find(p)->output_shapes[0].ToString()));
    }
    return InvalidArgumentError(args.model,
                                ": every output needs an input without a value: give --shape NAME=DIMS (or --feed "
                                "NAME=FILE.npy) for ",
                                StrJoin(hints, ", "));
  }
  return fetches;
}

using RunFeeds = std::vector<std::pair<std::string, Tensor>>;

// The values of the Placeholders |fetches| need, from |feeds|.
Expected<RunFeeds> FeedsFor(const Graph& graph, const std::vector<std::string>& fetches,
                            const std::map<std::string, Tensor>& feeds) {
  std::set<std::string> needed;
  for (const std::string& f : fetches) {
    auto at = graph.ResolveTensor(f);
    if (!at.ok()) return at.status().WithContext(StrCat("--fetch ", f));
    for (const std::string& p : PlaceholdersOf(graph, at->node)) needed.insert(p);
  }
  RunFeeds run_feeds;
  for (const std::string& p : needed) {
    auto it = feeds.find(p);
    if (it == feeds.end()) {
      return InvalidArgumentError("input ", Quote(p), " (declared ", graph.Find(p)->output_shapes[0].ToString(),
                                  ") needs a value: give --shape ", p, "=DIMS or --feed ", p, "=FILE.npy");
    }
    run_feeds.emplace_back(p, it->second);
  }
  return run_feeds;
}

// A session on this process's devices (opened lazily) for |graph|;
// |options| gets what it was created with.
Expected<std::unique_ptr<runtime::Session>> OpenSession(Context& ctx, Graph graph, const BenchArgs& args,
                                                        runtime::SessionOptions& options) {
  ctx.DeferDeviceCounting();  // devices open when placement needs them
  ctx.LocalOnly();
  auto host = ctx.Plugins();
  if (!host.ok()) return host.status();
  auto devices = runtime::DeviceSet::Open(**host, runtime::DeviceSet::Opening::kLazy);
  if (!devices.ok()) return devices.status();
  options = runtime::SessionOptions::FromConfig(ctx.config());
  if (args.threads > 0) {
    options.intra_op_threads = args.threads;
    options.inter_op_threads = 1;
  }
  return runtime::Session::Create(std::move(graph), std::move(*devices), options);
}

// An op's share of the traced runs.
struct OpTime {
  std::string op;
  double us = 0;
  int64_t count = 0;
};

// What `weft bench` reports.
struct BenchFigures {
  bool has_init = false;
  double load_ms = 0;
  double first_ms = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
  int64_t batch = 0;
  std::vector<OpTime> ops;  // by total time, with --profile
  double traced_us = 0;
  double peak_mib = 0;
  int level = 0;
  int threads = 0;
};

using RunFn = std::function<Status(const runtime::RunOptions&)>;

// The first run, the warm-up and the timed runs.
Status TimeRuns(const RunFn& run, const BenchArgs& args, BenchFigures& f) {
  const auto first_start = Clock::now();
  if (Status first = run({}); !first.ok()) return first;
  f.first_ms = MsSince(first_start);
  for (int i = 0; i < args.warmup; ++i) {
    if (Status st = run({}); !st.ok()) return st;
  }
  std::vector<double> ms;
  for (int i = 0; i < args.repeat; ++i) {
    const auto start = Clock::now();
    if (Status st = run({}); !st.ok()) return st;
    ms.push_back(MsSince(start));
  }
  double total = 0;
  for (double v : ms) total += v;
  f.mean = total / static_cast<double>(ms.size());
  f.p50 = Percentile(ms, 0.5);
  f.p90 = Percentile(ms, 0.9);
  f.p99 = Percentile(ms, 0.99);
  return Status();
}

// Where the time goes: the ops of |repeat| traced runs, by total time.
Status ProfileOps(const RunFn& run, int repeat, BenchFigures& f) {
  runtime::TraceRecorder trace;
  runtime::RunOptions traced;
  traced.trace = &trace;
  for (int i = 0; i < repeat; ++i) {
    if (Status st = run(traced); !st.ok()) return st;
  }
  std::map<std::string, OpTime> by_op;
  for (const auto& e : trace.events()) {
    OpTime& t = by_op[e.op];
    t.op = e.op;
    t.us += static_cast<double>(e.duration_us);
    ++t.count;
    f.traced_us += static_cast<double>(e.duration_us);
  }
  for (auto& [name, t] : by_op) f.ops.push_back(t);
  std::sort(f.ops.begin(), f.ops.end(), [](const OpTime& a, const OpTime& b) { return a.us > b.us; });
  return Status();
}

void PrintJson(const BenchArgs& args, const BenchFigures& f) {
  JsonWriter j(std::cout);
  j.BeginObject();
  j.String("model", args.model);
  j.Int("optimize", f.level);
  j.Int("threads", f.threads);
  j.Number("load_ms", f.load_ms);
  j.Number("first_run_ms", f.first_ms);
  j.Int("runs", args.repeat);
  j.Number("mean_ms", f.mean);
  j.Number("p50_ms", f.p50);
  j.Number("p90_ms", f.p90);
  j.Number("p99_ms", f.p99);
  j.Number("runs_per_second", 1000.0 / f.mean);
  j.Int("batch", f.batch);
  j.Number("peak_rss_mib", f.peak_mib);
  if (args.profile) {
    j.Key("ops");
    j.BeginArray();
    for (const OpTime& t : f.ops) {
      j.BeginObject();
      j.String("op", t.op);
      j.Number("ms_per_run", t.us / 1000.0 / args.repeat);
      j.Int("nodes", t.count / args.repeat);
      j.Number("share", f.traced_us > 0 ? t.us / f.traced_us : 0);
      j.EndObject();
    }
    j.EndArray();
  }
  j.EndObject();
}

void PrintText(const BenchArgs& args, const RunFeeds& run_feeds, const BenchFigures& f) {
  std::cout << args.model << " at --optimize " << f.level << ", " << f.threads << " thread"
            << (f.threads == 1 ? "" : "s") << "; inputs: ";
  std::vector<std::string> described;
  for (const auto& [name, value] : run_feeds) described.push_back(StrCat(name, " ", value.TypeString()));
  std::cout << (described.empty() ? std::string("none") : StrJoin(described, ", ")) << "\n";
  std::cout << "  load              " << Fixed(f.load_ms, 1) << " ms (read, plugins, devices, session"
            << (f.has_init ? ", init" : "") << ")\n";
  std::cout << "  first run         " << Fixed(f.first_ms, 2) << " ms (optimizes and prepares the graph)\n";
  std::cout << "  latency           p50 " << Fixed(f.p50, 3) << " ms  p90 " << Fixed(f.p90, 3) << " ms  p99 "
            << Fixed(f.p99, 3) << " ms  (" << args.repeat << " runs after " << args.warmup << " warm-up)\n";
  std::cout << "  throughput        " << Fixed(1000.0 / f.mean, 1) << " runs/s";
  if (f.batch > 0)
    std::cout << " (" << Fixed(1000.0 / f.mean * static_cast<double>(f.batch), 0) << " examples/s at batch " << f.batch
              << ")";
  std::cout << "\n  peak memory       " << Fixed(f.peak_mib, 1) << " MiB resident\n";
  if (args.profile) {
    std::cout << "\nOps by time (" << args.repeat << " traced runs):\n";
    Table table({"  op", "ms/run", "share", "nodes"});
    const std::size_t shown = std::min<std::size_t>(f.ops.size(), 15);
    for (std::size_t i = 0; i < shown; ++i) {
      const OpTime& t = f.ops[i];
      table.AddRow({"  " + t.op, Fixed(t.us / 1000.0 / args.repeat, 3),
                    Fixed(f.traced_us > 0 ? 100.0 * t.us / f.traced_us : 0, 1) + "%",
                    std::to_string(t.count / args.repeat)});
    }
    table.Print(std::cout);
    if (f.ops.size() > shown) std::cout << "  (" << f.ops.size() - shown << " more ops)\n";
  }
}

int Bench(Context& ctx, const BenchArgs& args) {
  ApplyOptimizeOption(ctx, args.optimize);
  if (args.repeat < 1 || args.warmup < 0) {
    return ReportError(InvalidArgumentError("--repeat must be at least 1 and --warmup at least 0"));
  }
  const auto load_start = Clock::now();
  auto def = onnx_io::ReadModelFile(args.model, FrozenImport());
  if (!def.ok()) return ReportError(def.status());
  auto graph = Graph::FromGraphDef(std::move(*def));
  if (!graph.ok()) return ReportError(graph.status().WithContext(args.model));

  std::map<std::string, Tensor> feeds;
  std::set<std::string> feedable;  // Placeholders with a value
  if (Status st = CollectFeeds(*graph, args, feeds, feedable); !st.ok()) return ReportError(st);
  auto fetches = ChooseFetches(*graph, args, feedable);
  if (!fetches.ok()) return ReportError(fetches.status());
  auto run_feeds = FeedsFor(*graph, *fetches, feeds);
  if (!run_feeds.ok()) return ReportError(run_feeds.status());
  BenchFigures f;
  f.has_init = graph->Find("init") != nullptr && graph->Find("init")->num_outputs() == 0;

  runtime::SessionOptions options;
  auto session = OpenSession(ctx, std::move(*graph), args, options);
  if (!session.ok()) return ReportError(session.status());
  runtime::Session& s = **session;
  if (f.has_init) {
    // A trainable model: its variables get their initial values first.
    if (Status init = s.Run({}, {}, {"init"}, nullptr); !init.ok()) return ReportError(init.WithContext("init"));
  }
  f.load_ms = MsSince(load_start);

  std::vector<Tensor> out;
  // Used only below, while the session, the feeds and the fetches live.
  const RunFn run = [&](const runtime::RunOptions& run_options) {
    return s.Run(*run_feeds, *fetches, {}, &out, run_options);
  };
  if (Status st = TimeRuns(run, args, f); !st.ok()) return ReportError(st);
  // The batch: the first dimension of the first input, when it has one.
  if (!run_feeds->empty() && run_feeds->front().second.rank() > 0) f.batch = run_feeds->front().second.dim(0);
  if (args.profile) {
    if (Status st = ProfileOps(run, args.repeat, f); !st.ok()) return ReportError(st);
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  f.peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  f.level = options.optimizer.level;
  f.threads = s.intra_op_threads();

  if (args.json) {
    PrintJson(args, f);
  } else {
    PrintText(args, *run_feeds, f);
  }
  return kExitOk;
}

}  // namespace

void AddBenchCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time a model: load, first run, latency percentiles, throughput, peak memory; --profile: by op");
  cmd->add_option("MODEL", args->model, "A .wg, .wgt or .onnx model (an .onnx model is imported frozen)")->required();
  cmd->add_option("--feed", args->feeds, "NAME=FILE.npy: an input's value; repeatable");
  cmd->add_option("--shape", args->shapes,
                  "NAME=1x3x224x224: an input of this shape, filled with seeded values (floats in [0, 1), "
                  "integers 0); repeatable. Inputs whose declared shape is fully known need neither");
  cmd->add_option("--fetch", args->fetches,
                  "NAME or NAME:K: what to compute; repeatable (default: every output nothing reads whose inputs "
                  "have values)");
  cmd->add_option("--warmup", args->warmup, "Runs before timing starts (default 3)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeat", args->repeat, "Timed runs (default 20)")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", args->threads,
                  "Threads one kernel may use (default: [runtime] intra_op_threads, else every core)")
      ->check(CLI::PositiveNumber);
  AddOptimizeOption(cmd, &args->optimize);
  cmd->add_flag("--profile", args->profile, "Also trace --repeat runs and list the ops that take the most time");
  cmd->add_flag("--json", args->json, "Print the figures as one JSON object");
  cmd->footer(
      "Example: weft bench configs/models/fashion_cnn.wgt --shape images=64x28x28x1 --profile\n"
      "A trainable model's variables are initialised with its 'init' node first.");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Bench(ctx, *args); }; });
}

}  // namespace weft::cli
