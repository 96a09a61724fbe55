// `weft quantize MODEL --calibrate NAME=FILE.npy ... -o OUT`: post-training
// int8 quantization (docs/quantization.md). The model is optimized (level
// 2: batch norms folded, biases and activations fused), run on the
// calibration samples to observe the ranges of the tensors around its
// convolutions and products, and written in QDQ form with int8 weights;
// sessions at level 2 run those products as int8 kernels.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "core/base/file_util.h"
#include "core/graph/serialize.h"
#include "core/passes/quantize.h"
#include "core/runtime/session.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct QuantizeArgs {
  std::string model;
  std::string out;
  std::vector<std::string> calibrate;
  std::string method = "minmax";
  double percentile = 99.99;
  int64_t samples = 0;  // 0: every row of the files
  int64_t batch = 32;
  int weight_bits = 8;
  std::vector<std::string> exclude;
  bool verbose = false;
};

std::string Size(int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(bytes >= (1 << 20) ? 2 : 1);
  if (bytes >= (1 << 20)) {
    s << static_cast<double>(bytes) / (1 << 20) << " MiB";
  } else {
    s << static_cast<double>(bytes) / 1024 << " KiB";
  }
  return s.str();
}

// Whether this is an x86 CPU without VNNI, where 8-bit weights run the
// quantized ops on direct loops (docs/quantization.md).
bool X86WithoutVnni() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (!line.starts_with("flags")) continue;
    line += ' ';
    return line.find(" avx2 ") != std::string::npos && line.find(" avx512_vnni ") == std::string::npos &&
           line.find(" avx_vnni ") == std::string::npos;
  }
  return false;
}

// The first few of |names|, and how many more.
std::string Names(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 4;
  if (names.size() <= kShown) return StrJoin(names, ", ");
  std::vector<std::string> first(names.begin(), names.begin() + kShown);
  return StrCat(StrJoin(first, ", "), " and ", names.size() - kShown, " more");
}

// Rows [begin, end) of |t| along dimension 0, as a new tensor.
Tensor Rows(const Tensor& t, int64_t begin, int64_t end) {
  std::vector<int64_t> dims = t.shape().dims();
  const int64_t row_bytes =
      static_cast<int64_t>(DTypeSize(t.dtype())) * (t.num_elements() / std::max<int64_t>(dims[0], 1));
  dims[0] = end - begin;
  Tensor out = *Tensor::Allocate(t.dtype(), Shape(dims));
  std::memcpy(out.data<char>(), t.data<char>() + begin * row_bytes,
              static_cast<std::size_t>((end - begin) * row_bytes));
  return out;
}

// The calibration feeds: every --calibrate NAME=FILE.npy, with as many
// rows each (the samples, along dimension 0).
Expected<std::vector<std::pair<std::string, Tensor>>> ReadCalibration(const QuantizeArgs& args, int64_t* rows) {
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const std::string& flag : args.calibrate) {
    auto feed = ReadFeedFlag(flag, "--calibrate");
    if (!feed.ok()) return feed.status();
    if (feed->second.shape().rank() < 1 || feed->second.shape().dim(0) < 1) {
      return InvalidArgumentError("--calibrate ", flag, ": the array must hold samples along its first dimension, got ",
                                  feed->second.shape().ToString());
    }
    const int64_t n = feed->second.shape().dim(0);
    if (!feeds.empty() && n != *rows) {
      return InvalidArgumentError("--calibrate ", flag, " has ", n, " samples but ", feeds[0].first, " has ", *rows,
                                  ": every input needs the same number");
    }
    *rows = n;
    feeds.push_back(std::move(*feed));
  }
  return feeds;
}

int Quantize(Context& ctx, const QuantizeArgs& args) {
  if (args.calibrate.empty()) {
    return ReportError(InvalidArgumentError(
        "no calibration data: give --calibrate NAME=FILE.npy for each input of the model (a few hundred "
        "representative samples along the first dimension; `weft inspect ",
        args.model, "` lists the inputs)"));
  }
  if (!FormatForPath(args.out).ok()) {
    return ReportError(InvalidArgumentError("-o ", Quote(args.out), ": weft quantize writes a .wg or .wgt graph file"));
  }
  passes::RangeObserver::Method method = passes::RangeObserver::Method::kMinMax;
  if (args.method == "percentile") {
    method = passes::RangeObserver::Method::kPercentile;
  } else if (args.method != "minmax") {
    return ReportError(InvalidArgumentError("--method ", Quote(args.method), ": expected minmax or percentile"));
  }
  int64_t rows = 0;
  auto feeds = ReadCalibration(args, &rows);
  if (!feeds.ok()) return ReportError(feeds.status());
  if (args.samples > 0) rows = std::min(rows, args.samples);

  passes::OptimizeOptions options = runtime::SessionOptions::FromConfig(ctx.config()).optimizer;
  options.level = 2;
  auto optimized = OptimizeModel(ctx, args.model, options);
  if (!optimized.ok()) return ReportError(optimized.status());
  const Graph& graph = *optimized->graph;
  passes::QuantizeOptions qoptions;
  qoptions.weight_bits = args.weight_bits;
  qoptions.exclude.insert(args.exclude.begin(), args.exclude.end());
  std::set<std::string> names;
  for (const Graph::Node& node : graph.nodes()) names.insert(node.name());
  for (const std::string& name : args.exclude) {
    if (!names.contains(name)) {
      return ReportError(NotFoundError("--exclude ", Quote(name),
                                       ": the optimized model has no such node (`weft "
                                       "optimize ",
                                       args.model, " --explain` shows what fusion named its nodes)"));
    }
  }
  const passes::QuantizePlan plan = passes::PlanQuantization(graph, qoptions);
  for (const std::string& why : plan.skipped) std::cerr << "note: " << why << "\n";
  if (plan.products.empty()) {
    return ReportError(InvalidArgumentError(args.model,
                                            ": nothing to quantize: no convolution or matrix product "
                                            "with constant weights"));
  }

  // Calibration: the optimized f32 graph on the samples, batch by batch.
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto devices = runtime::DeviceSet::Open(**host, runtime::DeviceSet::Opening::kLazy);
  if (!devices.ok()) return ReportError(devices.status());
  runtime::SessionOptions session_options = runtime::SessionOptions::FromConfig(ctx.config());
  session_options.optimizer.level = 0;
  auto session = runtime::Session::Create(graph, std::move(*devices), session_options);
  if (!session.ok()) return ReportError(session.status());
  passes::RangeObserver ranges(method, args.percentile);
  const auto start = std::chrono::steady_clock::now();
  for (int pass = 0; pass < ranges.passes(); ++pass) {
    for (int64_t begin = 0; begin < rows; begin += args.batch) {
      const int64_t end = std::min(rows, begin + args.batch);
      std::vector<std::pair<std::string, Tensor>> batch;
      for (const auto& [name, value] : *feeds) batch.emplace_back(name, Rows(value, begin, end));
      std::vector<Tensor> fetched;
      Status run = (*session)->Run(batch, plan.tensors, {}, &fetched);
      if (!run.ok()) {
        std::cerr << "\n";
        return ReportError(run.WithContext(StrCat("calibrating on samples ", begin, " to ", end)));
      }
      for (std::size_t i = 0; i < fetched.size(); ++i) {
        if (Status s = ranges.Observe(plan.tensors[i], fetched[i], pass); !s.ok()) return ReportError(s);
      }
      std::cerr << "\rcalibrating: pass " << pass + 1 << " of " << ranges.passes() << ", " << end << " of " << rows
                << " samples" << std::flush;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << " (" << std::fixed << std::setprecision(1) << seconds << " s)\n";

  passes::QuantizeReport report;
  auto quantized = passes::QuantizeGraph(graph, plan, ranges, qoptions, &report);
  if (!quantized.ok()) return ReportError(quantized.status());
  if (Status written = WriteGraphFile(args.out, *quantized); !written.ok()) return ReportError(written);
  if (args.verbose) {
    for (const std::string& line : report.lines) std::cout << "  " << line << "\n";
  }
  std::cout << args.model << ": " << report.products << " of "
            << report.products + static_cast<int64_t>(plan.skipped.size()) << " products int8 (" << Names(plan.products)
            << "), " << report.tensors << " tensors calibrated on " << rows << " samples (" << args.method << ")\n"
            << "  weights: " << Size(report.weights_f32_bytes) << " f32 -> " << Size(report.weights_int8_bytes)
            << " int8 (" << args.weight_bits << "-bit, per channel)\n";
  std::error_code in_error, out_error;
  const auto in_size = std::filesystem::file_size(args.model, in_error);
  const auto out_size = std::filesystem::file_size(args.out, out_error);
  if (!in_error && !out_error && in_size > 0) {
    std::cout << "  file: " << Size(static_cast<int64_t>(in_size)) << " -> " << Size(static_cast<int64_t>(out_size))
              << " (" << std::fixed << std::setprecision(0)
              << 100.0 * static_cast<double>(out_size) / static_cast<double>(in_size) << "%)\n";
  }
  std::cout << "wrote " << args.out << "\n";
  if (args.weight_bits == 8 && X86WithoutVnni()) {
    std::cerr << "note: this CPU has no VNNI: it computes a convolution with 8-bit weights as two int8 products "
                 "(about 2.4 times the time of one), and a matrix product with them on direct loops; with "
                 "--weight-bits 7 oneDNN's int8 kernels compute each exactly in one (docs/quantization.md)\n";
  }
  return kExitOk;
}

}  // namespace

void AddQuantizeCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Quantize a model's convolutions and matrix products to int8 from calibration data (docs/quantization.md)");
  cmd->add_option("MODEL", args->model,
                  "A .wg, .wgt or .onnx model with constant weights (an .onnx model is imported "
                  "frozen)")
      ->required();
  cmd->add_option("-o,--out", args->out, "The .wg or .wgt file to write")->required();
  cmd->add_option("--calibrate", args->calibrate,
                  "NAME=FILE.npy: representative samples of input NAME along the first dimension (repeat for each "
                  "input; a few hundred are enough)");
  cmd->add_option("--method", args->method,
                  "How a tensor's range is chosen: minmax (the extremes seen) or percentile (clips the rarest "
                  "values; two passes)")
      ->capture_default_str();
  cmd->add_option("--percentile", args->percentile, "With --method percentile: the percentile kept at each end")
      ->check(CLI::Range(50.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--samples", args->samples, "Use only the first N samples (default: all)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", args->batch, "Samples per calibration run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--weight-bits", args->weight_bits,
                  "8: weights in [-127, 127]; 7: in [-63, 63], which oneDNN's int8 kernels compute exactly in one "
                  "product on x86 CPUs without VNNI (8-bit weights take two there)")
      ->check(CLI::IsMember({7, 8}))
      ->capture_default_str();
  cmd->add_option("--exclude", args->exclude, "Keep this node (of the optimized model) in f32; repeat for more");
  cmd->add_flag("-v,--verbose", args->verbose, "Print each tensor's range, dtype, scale and zero point");
  cmd->footer(
      "Example: weft quantize cnn.onnx --calibrate images=calib.npy -o cnn_int8.wg\n"
      "The output holds int8 weights and QuantizeLinear/DequantizeLinear pairs (ONNX's QDQ form); at optimizer "
      "level 2 (the default) a session runs each quantized product as one int8 kernel, at level 0 the same values "
      "in f32.");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Quantize(ctx, *args); }; });
}

}  // namespace weft::cli
