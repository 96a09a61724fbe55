// Weft's benchmarks, each against a peer measured in the same process:
//
//   matmul_256/1024/2048  GFLOP/s of a MatMul through a Session vs OpenBLAS
//                         cblas_sgemm called directly
//   conv_lenet, conv_resnet
//                         GFLOP/s of a Conv2D through a Session vs oneDNN's
//                         convolution called directly (weights reordered
//                         once, outside the timed loop)
//   executor_chain        microseconds per node of a 10,000-node chain
//   executor_fanout       microseconds per node of 10,000 independent nodes
//   run_trivial           microseconds per Session::Run of a one-op graph
//   while_loop_iter       microseconds per iteration of a 100,000-iteration
//                         loop with a trivial scalar body (s += i; i += 1
//                         while i < n) vs the same loop in TorchScript
//                         (tools/bench/torch_loop.py)
//   transfer_h2d, transfer_d2h
//                         GB/s of a 64 MiB copy host->device and device->host
//                         through the first device with its own memory (the
//                         OpenCL plugin on PoCL here), each copy waited for,
//                         vs a plain memcpy of 64 MiB between host buffers
//   train_mlp_sgd, train_mlp_adam (batch 128), train_cnn_sgd (batch 64)
//                         milliseconds per training step (forward, backward,
//                         update) of configs/models/fashion_{mlp,cnn}.wgt vs
//                         PyTorch running the same model (tools/bench/
//                         torch_train.py). Each side runs in its own process,
//                         alternately, so each one's peak RSS is its own.
//   lstm_cell             microseconds per LSTM cell step (batch 64, input and
//                         hidden 256, f32, forward) of the fused LSTMCell op
//                         through a Session vs PyTorch's torch.nn.LSTMCell
//                         (tools/bench/torch_lstm_cell.py, its own process);
//                         a second line gives the same cell composed from
//                         primitive ops (core/graph/nn_builders.h) vs fused
//   onnx_resnet18_b1, onnx_resnet18_b32, onnx_mobilenet_b1, onnx_efficientnet_b0,
//   onnx_bert_encoder     milliseconds per inference of a PyTorch model exported
//                         to ONNX (tools/onnx/export_models.py), imported with
//                         its initializers frozen and run through a Session, vs
//                         PyTorch running the original module under no_grad
//                         (tools/bench/torch_onnx_peer.py); a second line
//                         (<name>_vs_ort) has ONNX Runtime running the same
//                         .onnx file (tools/bench/ort_peer.js); these run at
//                         the default optimizer level, and
//                         <name>_optimize<L>_vs_ort lines give each lower
//                         level against the same ONNX Runtime figure
//   graph_prepare_1m      seconds and peak MiB of `weft run` (a child process,
//                         GPU plugins disabled) of a binary graph of a
//                         1,000,000-node chain of Neg fed a scalar; no peer
//   startup_run           milliseconds and peak MiB of `weft run` of a one-op
//                         graph with every plugin installed vs with every
//                         plugin but the CPU's disabled (children, alternately)
//
// Each prints one line: BENCH <name> weft=<v> peer=<v> unit=<u> speedup=<x>
// with medians of repeated runs; speedup > 1 means Weft is ahead (for
// times, peer / weft; for rates, weft / peer). Both sides use the same
// number of threads (the cores this process may use).
//
//   weft_bench NAME [--repeats N]
#include <cblas.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/thread_pool.h"
#include "core/graph/nn_builders.h"
#include "core/graph/serialize.h"
#include "core/onnx/onnx.h"
#include "core/ops/generated_ops.h"
#include "core/passes/pass.h"
#include "core/plugin/host_services.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/session.h"
#include "core/runtime/trace.h"
#include "core/tensor/npy.h"
#include "core/train/optimizer.h"
#include "core/train/training_graph.h"
#include "tools/bench/bench_util.h"

extern "C" void openblas_set_num_threads(int);

namespace weft::bench {
namespace {

// Medians of |weft| and |peer| timed in alternating blocks, so that a
// machine that speeds up or slows down during the run affects both sides
// alike. Each block starts after a pause and a warm-up call: thread pools
// spin for a while after their work (OpenBLAS's for ~0.1 s, OpenMP's
// briefly), and one side's spinning threads must not steal the cores the
// other side is being timed on.
std::pair<double, double> Interleaved(int repeats, int warmup, const std::function<void()>& weft,
                                      const std::function<void()>& peer) {
  for (int i = 0; i < warmup; ++i) {
    weft();
    peer();
  }
  const int total = g_repeats > 0 ? g_repeats : repeats;
  const int rounds = std::min(total, 5);
  std::vector<double> a, b;
  auto block = [&](const std::function<void()>& fn, std::vector<double>& times, int count) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    fn();
    for (int i = 0; i < count; ++i) times.push_back(Seconds(fn));
  };
  for (int r = 0; r < rounds; ++r) {
    const int count = total / rounds + (r < total % rounds ? 1 : 0);
    if (r % 2 == 0) {
      block(weft, a, count);
      block(peer, b, count);
    } else {
      block(peer, b, count);
      block(weft, a, count);
    }
  }
  return {Median(std::move(a)), Median(std::move(b))};
}

// The CPU device, loaded from the plugins next to libweft.
class Env {
 public:
  Env() {
    auto config = config::DefaultConfig();
    host_ = std::make_unique<plugin::PluginHost>(*config);
    Check(host_->LoadAll());
    auto devices = runtime::DeviceSet::Open(*host_);
    Check(devices.status());
    devices_ = std::move(*devices);
  }
  std::unique_ptr<runtime::Session> Session(const GraphBuilder& b, const runtime::SessionOptions& options = {}) {
    auto graph = b.Build();
    Check(graph.status());
    auto session = runtime::Session::Create(std::move(*graph), devices_, options);
    Check(session.status());
    return std::move(*session);
  }
  const runtime::DeviceSet& devices() const { return *devices_; }
  const std::shared_ptr<runtime::DeviceSet>& shared_devices() const { return devices_; }
  static void Check(const Status& s) {
    if (!s.ok()) {
      std::cerr << "weft_bench: " << s.ToString() << "\n";
      std::exit(2);
    }
  }

 private:
  std::unique_ptr<plugin::PluginHost> host_;
  std::shared_ptr<runtime::DeviceSet> devices_;
};

// 64 MiB host->device (|to_device|) or device->host through the first
// device whose memory the host cannot address, each copy synchronized,
// against memcpy between two host buffers of the same size.
void Transfer(Env& env, bool to_device) {
  const char* name = to_device ? "transfer_h2d" : "transfer_d2h";
  const runtime::RuntimeDevice* device = nullptr;
  for (const runtime::RuntimeDevice* d : env.devices().devices()) {
    if (!d->host_visible()) {
      device = d;
      break;
    }
  }
  if (device == nullptr) {
    std::cerr << "weft_bench: " << name << ": no device with its own memory is loaded (the opencl plugin with an ICD "
              << "such as pocl-opencl-icd, or a GPU); skipped\n";
    return;
  }
  constexpr uint64_t kBytes = 64ull << 20;
  std::vector<char> host(kBytes, 1), other(kBytes, 2);
  auto buffer = device->device().Allocate(kBytes);
  Env::Check(buffer.status());
  const weft_device_plugin_t* t = device->table();
  auto sync = [&] { Env::Check(plugin::TakeStatus(t->stream_synchronize(device->handle(), device->stream()))); };
  auto copy = [&] {
    if (to_device) {
      Env::Check(plugin::TakeStatus(
          t->copy_host_to_device(device->handle(), device->stream(), host.data(), *buffer, 0, kBytes)));
    } else {
      Env::Check(plugin::TakeStatus(
          t->copy_device_to_host(device->handle(), device->stream(), *buffer, 0, host.data(), kBytes)));
    }
    sync();
  };
  auto [weft_s, peer_s] = Interleaved(15, 2, copy, [&] { std::memcpy(other.data(), host.data(), kBytes); });
  device->device().Free(*buffer);
  std::cerr << "# " << name << " through " << device->name() << "\n";
  Print(name, static_cast<double>(kBytes) / weft_s / 1e9, static_cast<double>(kBytes) / peer_s / 1e9, "GB/s", true);
}

Tensor Random(const Shape& shape, uint32_t seed) {
  Tensor t = *Tensor::Allocate(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

void MatMul(Env& env, int n) {
  Tensor a = Random(Shape{n, n}, 1), b = Random(Shape{n, n}, 2);
  GraphBuilder g;
  ops::MatMul(g, g.Placeholder(DType::kF32, Shape{n, n}, "a"), g.Placeholder(DType::kF32, Shape{n, n}, "b"), {}, "c");
  auto session = env.Session(g);
  std::vector<Tensor> out;
  const int repeats = n <= 256 ? 200 : (n <= 1024 ? 30 : 11);
  std::vector<float> c(static_cast<std::size_t>(n) * n);
  openblas_set_num_threads(AvailableCores());
  const auto [weft, peer] = Interleaved(
      repeats, 3,
      [&] {
        Env::Check(session->Run({{"a", a}, {"b", b}}, {"c"}, {}, &out));
      },
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n,
                    0.0f, c.data(), n);
      });
  const double flops = 2.0 * n * n * n;
  Print("matmul_" + std::to_string(n), flops / weft / 1e9, flops / peer / 1e9, "GFLOP/s", true);
}

// oneDNN's convolution called directly: the best straightforward use,
// with the weights in oneDNN's preferred layout prepared once. Returns the
// function that runs it once (it owns what it needs).
std::function<void()> OneDnnConv(const Tensor& input, const Tensor& filter) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const int64_t n = input.dim(0), h = input.dim(1), w = input.dim(2), c = input.dim(3);
  const int64_t kh = filter.dim(0), kw = filter.dim(1), k = filter.dim(3);
  const int64_t pad_top = (kh - 1) / 2, pad_left = (kw - 1) / 2;
  const dnnl::memory::dims src_dims = {n, c, h, w}, wei_dims = {k, c, kh, kw}, dst_dims = {n, k, h, w};
  dnnl::memory::desc src_md(src_dims, dt::f32, tag::nhwc), dst_md(dst_dims, dt::f32, tag::nhwc);
  dnnl::memory::desc wei_any(wei_dims, dt::f32, tag::any);
  dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md,
                                       wei_any, dst_md, {1, 1}, {pad_top, pad_left},
                                       {kh - 1 - pad_top, kw - 1 - pad_left});
  dnnl::convolution_forward::primitive_desc pd(desc, engine);
  dnnl::memory user_weights({wei_dims, dt::f32, tag::hwio}, engine, filter.raw_data());
  dnnl::memory weights(pd.weights_desc(), engine);
  dnnl::reorder(user_weights, weights).execute(stream, user_weights, weights);
  stream.wait();
  dnnl::memory src(src_md, engine, input.raw_data());
  auto out = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n * h * w * k));
  dnnl::memory dst(dst_md, engine, out->data());
  dnnl::convolution_forward conv(pd);
  return [=]() mutable {
    (void)out;
    conv.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  };
}

void Conv(Env& env, const std::string& name, const Shape& in_shape, const Shape& filter_shape, int repeats) {
  Tensor input = Random(in_shape, 3), filter = Random(filter_shape, 4);
  GraphBuilder g;
  ops::Conv2DAttrs attrs;
  attrs.padding = "SAME";
  ops::Conv2D(g, g.Placeholder(DType::kF32, in_shape, "x"), g.Const(filter, "w"), attrs, "y");
  auto session = env.Session(g);
  std::vector<Tensor> out;
  const auto [weft, peer] = Interleaved(
      repeats, 3,
      [&] {
        Env::Check(session->Run({{"x", input}}, {"y"}, {}, &out));
      },
      OneDnnConv(input, filter));
  const double flops =
      2.0 * static_cast<double>(in_shape.dim(0) * in_shape.dim(1) * in_shape.dim(2)) *
      static_cast<double>(filter_shape.dim(0) * filter_shape.dim(1) * filter_shape.dim(2) * filter_shape.dim(3));
  Print(name, flops / weft / 1e9, flops / peer / 1e9, "GFLOP/s", true);
}

// The executor benchmarks time the executor itself: the graph optimizer
// would fold a Neg chain to nothing (Neg(Neg(x)) = x) and drop Negs no one
// reads, so it is off for them (level 0), as before it existed.
runtime::SessionOptions Unoptimized() {
  runtime::SessionOptions options;
  options.optimizer.level = 0;
  return options;
}

void ExecutorChain(Env& env) {
  constexpr int kNodes = 10000;
  GraphBuilder g;
  Output x = g.Placeholder(DType::kF32, Shape{}, "x");
  for (int i = 0; i < kNodes; ++i) x = ops::Neg(g, x);
  ops::Identity(g, x, "out");
  auto session = env.Session(g, Unoptimized());
  std::vector<Tensor> out;
  const Tensor one = Tensor::Scalar<float>(1);
  const double t = Median(21, 3, [&] { Env::Check(session->Run({{"x", one}}, {"out"}, {}, &out)); });
  Print("executor_chain", t / kNodes * 1e6, 0, "us_per_node", false);
}

void ExecutorFanout(Env& env) {
  constexpr int kNodes = 10000;
  GraphBuilder g;
  Output x = g.Placeholder(DType::kF32, Shape{}, "x");
  std::vector<Output> nodes;
  for (int i = 0; i < kNodes; ++i) nodes.push_back(ops::Neg(g, x));
  {
    auto deps = g.ControlDependencies(nodes);
    ops::NoOp(g, "all");
  }
  auto session = env.Session(g, Unoptimized());
  const Tensor one = Tensor::Scalar<float>(1);
  const double t = Median(21, 3, [&] { Env::Check(session->Run({{"x", one}}, {}, {"all"}, nullptr)); });
  Print("executor_fanout", t / kNodes * 1e6, 0, "us_per_node", false);
}

// i = 0, s = 0; while (i < n) { s += i; i += 1 }, written op by op.
void WhileLoopIter(Env& env) {
  constexpr int64_t kIterations = 100000;
  GraphBuilder g;
  Output n = g.Placeholder(DType::kI64, Shape{}, "n");
  const AttrMap frame = {{"frame_name", AttrValue(std::string("loop"))}};
  AttrMap invariant = frame;
  invariant["is_constant"] = AttrValue(true);
  std::vector<Output> merges;
  for (const char* name : {"i", "s"}) {
    Output enter = g.Op("Enter", {g.Scalar<int64_t>(0, StrCat(name, "0"))}, frame);
    merges.push_back(g.AddNode("Merge", {enter, enter})[0]);
  }
  Output limit = g.Op("Enter", {n}, invariant);
  Output pred = g.Op("LoopCond", {g.Op("Less", {merges[0], limit})});
  std::vector<Output> body, exits;
  for (const Output& m : merges) {
    std::vector<Output> sw = g.AddNode("Switch", {m, pred});
    body.push_back(g.Op("Identity", {sw[1]}));
    exits.push_back(g.Op("Exit", {sw[0]}, {}, "out"));
  }
  Output one;
  {
    auto deps = g.ControlDependencies({body[0]});
    one = g.Scalar<int64_t>(1);
  }
  const std::vector<Output> next = {g.Op("Add", {body[0], one}), g.Op("Add", {body[1], body[0]})};
  for (std::size_t k = 0; k < 2; ++k) Env::Check(g.SetInput(merges[k].node(), 1, g.Op("NextIteration", {next[k]})));
  auto session = env.Session(g, Unoptimized());
  std::vector<Tensor> out;
  const Tensor limit_value = Tensor::Scalar<int64_t>(kIterations);
  const double t = Median(7, 1, [&] { Env::Check(session->Run({{"n", limit_value}}, {exits[1].name()}, {}, &out)); });
  if (out[0].scalar<int64_t>() != kIterations * (kIterations - 1) / 2) Env::Check(InternalError("wrong loop sum"));
  // The peer, in its own process.
  const std::string command = StrCat("/usr/bin/python3 ", WEFT_SOURCE_DIR, "/tools/bench/torch_loop.py ", kIterations,
                                     " ", g_repeats > 0 ? g_repeats : 7);
  FILE* pipe = popen(command.c_str(), "r");
  double peer = 0;
  if (pipe != nullptr) {
    char buffer[256];
    while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) std::sscanf(buffer, "us_per_iter=%lf", &peer);
    if (pclose(pipe) != 0) peer = 0;
  }
  Print("while_loop_iter", t / kIterations * 1e6, peer, "us_per_iter", false);
}

void RunTrivial(Env& env) {
  GraphBuilder g;
  ops::Neg(g, g.Placeholder(DType::kF32, Shape{}, "x"), "y");
  auto session = env.Session(g);
  std::vector<Tensor> out;
  const Tensor one = Tensor::Scalar<float>(1);
  constexpr int kBatch = 1000;
  const double t = Median(15, 2, [&] {
    for (int i = 0; i < kBatch; ++i) Env::Check(session->Run({{"x", one}}, {"y"}, {}, &out));
  });
  Print("run_trivial", t / kBatch * 1e6, 0, "us_per_run", false);
}

// --- Training steps ---------------------------------------------------------------

struct TrainSpec {
  std::string model;      // "mlp" or "cnn"
  std::string optimizer;  // "sgd" or "adam"
  int batch = 0;
};

// One side's result: the median step time and the process's peak RSS.
struct SideResult {
  double ms = 0;
  long rss_kb = 0;
};

// Traces |count| calls of |run| and prints, to stderr, each op's time per
// call (|per| names the call: "step", "run"), largest first.
void PrintOpProfile(int count, const char* per, const std::function<void(const runtime::RunOptions&)>& run) {
  runtime::TraceRecorder trace;
  runtime::RunOptions run_options;
  run_options.trace = &trace;
  for (int i = 0; i < count; ++i) run(run_options);
  std::map<std::string, std::pair<int64_t, int>> by_op;
  for (const auto& e : trace.events()) {
    by_op[e.op].first += e.duration_us;
    by_op[e.op].second += 1;
  }
  std::vector<std::pair<int64_t, std::string>> sorted;
  for (const auto& [op, t] : by_op) sorted.emplace_back(t.first, op);
  std::sort(sorted.rbegin(), sorted.rend());
  for (const auto& [us, op] : sorted) {
    std::fprintf(stderr, "%-32s %10.3f ms/%s  (%d nodes/%s)\n", op.c_str(), static_cast<double>(us) / 1e3 / count, per,
                 by_op[op].second / count, per);
  }
}

// The Weft side, run in a child process (`weft_bench --train-side ...`):
// the model file's training graph, as `weft train` builds it, stepped on a
// fixed random batch.
int TrainSide(const TrainSpec& spec, int steps) {
  SetLogLevel(LogLevel::kWarning);
  auto config = config::DefaultConfig();
  Env::Check(config.status());
  plugin::PluginHost host(*config);
  Env::Check(host.LoadAll());
  auto devices = runtime::DeviceSet::Open(host);
  Env::Check(devices.status());
  std::shared_ptr<runtime::DeviceSet> shared = std::move(*devices);
  auto def = ReadGraphFile(StrCat(WEFT_SOURCE_DIR, "/configs/models/fashion_", spec.model, ".wgt"));
  Env::Check(def.status());
  auto model = Graph::FromGraphDef(std::move(*def));
  Env::Check(model.status());
  const plugin::OptimizerPlugin* plugin = host.optimizers().Find(spec.optimizer);
  if (plugin == nullptr) Env::Check(NotFoundError("optimizer plugin ", spec.optimizer, " is not loaded"));
  auto hyper = config::ValidateOptions(nullptr, "optimizer", plugin->hyperparameters);
  Env::Check(hyper.status());
  auto optimizer = train::Optimizer::Create(*plugin, *hyper);
  Env::Check(optimizer.status());
  const runtime::KernelTable* kernels = &shared->default_device()->kernels();
  train::TrainingGraphOptions options;
  options.init = "init";
  options.has_kernel = [kernels](std::string_view op, const std::vector<std::pair<std::string, DType>>&) {
    return !kernels->ForOp(op).empty();
  };
  auto tg = train::BuildTrainingGraph(*model, options, **optimizer);
  Env::Check(tg.status());
  auto session = runtime::Session::Create(tg->graph, shared);
  Env::Check(session.status());
  Env::Check((*session)->Run({}, {}, {tg->init}, nullptr));
  const Shape shape = spec.model == "mlp" ? Shape{spec.batch, 784} : Shape{spec.batch, 28, 28, 1};
  Tensor x = Random(shape, 1);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = 0.5f * (x.data<float>()[i] + 1.0f);
  Tensor y = *Tensor::Allocate(DType::kI64, Shape{spec.batch});
  for (int i = 0; i < spec.batch; ++i) y.data<int64_t>()[i] = (i * 7) % 10;
  const Tensor lr = Tensor::Scalar<float>(spec.optimizer == "sgd" ? 0.01f : 0.001f);
  std::vector<Tensor> out;
  auto step = [&] {
    Env::Check((*session)->Run({{"images", x}, {"labels", y}, {tg->learning_rate, lr}}, {tg->loss}, {tg->train}, &out));
  };
  for (int i = 0; i < 5; ++i) step();
  if (std::getenv("WEFT_BENCH_PROFILE") != nullptr) {
    // Where a step's time goes, by op, summed over |steps| traced steps.
    PrintOpProfile(steps, "step", [&](const runtime::RunOptions& run_options) {
      Env::Check((*session)->Run({{"images", x}, {"labels", y}, {tg->learning_rate, lr}}, {tg->loss}, {tg->train}, &out,
                                 run_options));
    });
  }
  std::vector<double> times;
  for (int i = 0; i < steps; ++i) times.push_back(Seconds(step));
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("ms_per_step=%.4f peak_rss_kb=%ld\n", Median(times) * 1e3, usage.ru_maxrss);
  return 0;
}

// Runs |command| and parses its "ms_per_step=<x> peak_rss_kb=<y>" line.
SideResult RunSide(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) Env::Check(InternalError("cannot run ", command));
  char buffer[512];
  SideResult r;
  bool parsed = false;
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) {
    if (std::sscanf(buffer, "ms_per_step=%lf peak_rss_kb=%ld", &r.ms, &r.rss_kb) == 2) parsed = true;
  }
  const int rc = pclose(pipe);
  if (!parsed || rc != 0) Env::Check(InternalError("benchmark side failed (exit ", rc, "): ", command));
  return r;
}

void TrainBench(const std::string& name, const TrainSpec& spec, const std::string& self) {
  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  const int steps = spec.model == "mlp" ? 40 : 20;
  const int rounds = g_repeats > 0 ? g_repeats : 3;
  const std::string args = StrCat(spec.model, " ", spec.optimizer, " ", spec.batch);
  const std::string weft_cmd = StrCat(self, " --train-side ", args, " ", steps);
  const std::string peer_cmd =
      StrCat("/usr/bin/python3 ", WEFT_SOURCE_DIR, "/tools/bench/torch_train.py ", args, " ", threads, " ", steps);
  std::vector<double> weft_ms, peer_ms;
  long weft_rss = 0, peer_rss = 0;
  for (int r = 0; r < rounds; ++r) {
    for (int side = 0; side < 2; ++side) {
      const bool weft_side = (side == 0) == (r % 2 == 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      const SideResult result = RunSide(weft_side ? weft_cmd : peer_cmd);
      (weft_side ? weft_ms : peer_ms).push_back(result.ms);
      long& rss = weft_side ? weft_rss : peer_rss;
      rss = std::max(rss, result.rss_kb);
    }
  }
  Print(name, Median(weft_ms), Median(peer_ms), "ms", false);
  std::printf("# %s peak_rss_mib weft=%.1f peer=%.1f\n", name.c_str(), static_cast<double>(weft_rss) / 1024.0,
              static_cast<double>(peer_rss) / 1024.0);
}

// --- LSTM cell ----------------------------------------------------------------------

// One LSTM cell step of batch |batch|, |input| inputs and |hidden| units:
// the fused op and the composed graph, in this process and interleaved,
// against PyTorch's LSTMCell in a child process.
void LstmCell(Env& env, int64_t batch, int64_t input, int64_t hidden) {
  const Tensor x = Random(Shape{batch, input}, 1), c = Random(Shape{batch, hidden}, 2);
  const Tensor h = Random(Shape{batch, hidden}, 3);
  Tensor w = Random(Shape{input + hidden, 4 * hidden}, 4), b = Random(Shape{4 * hidden}, 5);
  for (int64_t i = 0; i < w.num_elements(); ++i) w.data<float>()[i] *= 0.05f;
  std::vector<std::string> fetches[2];
  std::unique_ptr<runtime::Session> sessions[2];
  for (int fused = 0; fused < 2; ++fused) {
    GraphBuilder g;
    std::vector<Output> ins = {g.Placeholder(DType::kF32, Shape{batch, input}, "x"),
                               g.Placeholder(DType::kF32, Shape{batch, hidden}, "c"),
                               g.Placeholder(DType::kF32, Shape{batch, hidden}, "h"), g.Const(w, "w"), g.Const(b, "b")};
    std::vector<Output> outs;
    if (fused == 1) {
      outs = g.AddNode("LSTMCell", ins, {}, "cell");
    } else {
      auto composed = LstmCellComposed(g, ins[0], ins[1], ins[2], ins[3], ins[4]);
      Env::Check(composed.status());
      outs = *composed;
    }
    fetches[fused] = {outs[0].name(), outs[1].name()};
    sessions[fused] = env.Session(g);
  }
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"c", c}, {"h", h}};
  std::vector<Tensor> out;
  const auto [fused, composed] = Interleaved(
      300, 10, [&] { Env::Check(sessions[1]->Run(feeds, fetches[1], {}, &out)); },
      [&] { Env::Check(sessions[0]->Run(feeds, fetches[0], {}, &out)); });
  const int threads = AvailableCores();
  const std::string peer_cmd = StrCat("/usr/bin/python3 ", WEFT_SOURCE_DIR, "/tools/bench/torch_lstm_cell.py ", batch,
                                      " ", input, " ", hidden, " ", threads, " ", g_repeats > 0 ? g_repeats : 300);
  std::vector<double> peer_ms;
  for (int r = 0; r < 3; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    peer_ms.push_back(RunSide(peer_cmd).ms);
  }
  Print("lstm_cell", fused * 1e6, Median(peer_ms) * 1e3, "us", false);
  Print("lstm_cell_composed", composed * 1e6, fused * 1e6, "us", false);
}

// Runs |command| and returns the number after "ms_per_step=" in its output,
// and the text after |tag|= (a version) in |version|.
double RunPeer(const std::string& command, const char* tag, std::string* version) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) Env::Check(InternalError("cannot run ", command));
  char buffer[512];
  double ms = -1;
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) {
    const std::string line = buffer;
    if (std::sscanf(buffer, "ms_per_step=%lf", &ms) != 1) continue;
    const auto at = line.find(StrCat(tag, "="));
    if (at != std::string::npos) {
      *version = line.substr(at + std::strlen(tag) + 1);
      while (!version->empty() && (version->back() == '\n' || version->back() == ' ')) version->pop_back();
    }
  }
  const int rc = pclose(pipe);
  if (ms < 0 || rc != 0) Env::Check(InternalError("benchmark peer failed (exit ", rc, "): ", command));
  return ms;
}

// One run of the weft CLI in a child process: wall seconds and peak
// resident set (MiB, the child's ru_maxrss).
struct ChildRun {
  double seconds = 0;
  double rss_mib = 0;
};

ChildRun RunWeftCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {StrCat(WEFT_BINARY_DIR, "/bin/weft")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    setenv("WEFT_PLUGIN_PATH", "", 1);
    execv(raw[0], raw.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    Env::Check(InternalError("weft_bench: ", StrJoin(argv, " "), " failed"));
  }
  ChildRun run;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  return run;
}

// A scratch folder for the CLI benchmarks' files, removed at exit.
struct ScratchDir {
  std::string path = StrCat("/tmp/weft_bench_", getpid());
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() { std::filesystem::remove_all(path); }
};

// The nodes of the CLI benchmarks' graphs: an f32 scalar Placeholder, and
// a Neg of |input|.
NodeDef ScalarPlaceholder(std::string name) {
  NodeDef x;
  x.name = std::move(name);
  x.op = "Placeholder";
  x.attrs = {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}};
  return x;
}

NodeDef NegOf(std::string name, std::string input) {
  NodeDef neg;
  neg.name = std::move(name);
  neg.op = "Neg";
  neg.inputs = {std::move(input)};
  neg.attrs = {{"T", AttrValue(DType::kF32)}};
  return neg;
}

// graph_prepare_1m: `weft run` of a binary .wg holding a chain of a million
// Negs fed a scalar, with the GPU plugins disabled: loading, validating,
// pruning, optimizing, placing and running it, in seconds and peak MiB.
// There is no peer; the budget is 3 s and 500 MiB.
void GraphPrepare1M() {
  constexpr int kNodes = 1000000;
  ScratchDir dir;
  GraphDef def;
  def.nodes.reserve(kNodes + 1);
  def.nodes.push_back(ScalarPlaceholder("x"));
  for (int i = 0; i < kNodes; ++i) def.nodes.push_back(NegOf(StrCat("n", i), i == 0 ? "x" : StrCat("n", i - 1)));
  const std::string graph = dir.path + "/chain_1m.wg";
  Env::Check(WriteGraphFile(graph, def));
  def = GraphDef();
  Env::Check(WriteNpy(dir.path + "/x.npy", Tensor::Scalar<float>(1.5f)));
  const std::string config = dir.path + "/no_gpu.toml";
  std::ofstream(config) << "[plugins]\ndisable = [\"cuda\", \"hip\"]\n";
  const std::vector<std::string> args = {
      "--config", config,   "run", graph, "--feed", "x=" + dir.path + "/x.npy", "--fetch", StrCat("n", kNodes - 1),
      "--out",    dir.path, "-q"};
  std::vector<double> seconds, rss;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  for (int i = 0; i < repeats; ++i) {
    const ChildRun run = RunWeftCli(args);
    seconds.push_back(run.seconds);
    rss.push_back(run.rss_mib);
  }
  Print("graph_prepare_1m", Median(seconds), 0, "s", false);
  Print("graph_prepare_1m_rss", Median(rss), 0, "MiB", false);
}

// startup_run: `weft run` of a one-op graph with every plugin installed
// (devices are opened when placement needs them) against the same with
// every plugin but the CPU's disabled, alternately.
void StartupRun() {
  ScratchDir dir;
  GraphDef def;
  def.nodes = {ScalarPlaceholder("x"), NegOf("y", "x")};
  const std::string graph = dir.path + "/one_op.wg";
  Env::Check(WriteGraphFile(graph, def));
  Env::Check(WriteNpy(dir.path + "/x.npy", Tensor::Scalar<float>(1.5f)));
  const std::string only_cpu = dir.path + "/only_cpu.toml";
  std::ofstream(only_cpu) << "[plugins]\ndisable = [\"cuda\", \"hip\", \"opencl\", \"nccl\", \"gloo\", "
                             "\"rdma\", \"zmq\", \"tcp\", \"sgd\", \"momentum\", \"adam\", \"adamw\", "
                             "\"adagrad\", \"rmsprop\"]\n";
  const std::vector<std::string> run = {"run",   graph,    "--feed", "x=" + dir.path + "/x.npy", "--fetch", "y",
                                        "--out", dir.path, "-q"};
  std::vector<std::string> with_cpu_only = {"--config", only_cpu};
  with_cpu_only.insert(with_cpu_only.end(), run.begin(), run.end());
  std::vector<double> all_s, all_rss, cpu_s, cpu_rss;
  const int repeats = g_repeats > 0 ? g_repeats : 15;
  for (int i = 0; i < repeats + 2; ++i) {
    const ChildRun a = RunWeftCli(run);
    const ChildRun b = RunWeftCli(with_cpu_only);
    if (i < 2) continue;  // warm the page cache
    all_s.push_back(a.seconds * 1e3);
    all_rss.push_back(a.rss_mib);
    cpu_s.push_back(b.seconds * 1e3);
    cpu_rss.push_back(b.rss_mib);
  }
  Print("startup_run", Median(all_s), Median(cpu_s), "ms", false);
  Print("startup_run_rss", Median(all_rss), Median(cpu_rss), "MiB", false);
}

// One exported model: Weft (in this process) against PyTorch and ONNX
// Runtime (child processes), in alternating rounds.
void OnnxBench(Env& env, const std::string& name, const std::string& model, const Shape& shape) {
  const int64_t batch = shape.dim(0);
  const std::string dir = StrCat(WEFT_BINARY_DIR, "/onnx_bench");
  const std::string path = StrCat(dir, "/", model, ".onnx");
  if (!std::ifstream(path).good()) {
    const std::string export_cmd = StrCat("/usr/bin/python3 ", WEFT_SOURCE_DIR, "/tools/onnx/export_models.py ", dir,
                                          " --models ", model, " --batch ", batch, " > /dev/null 2>&1");
    if (std::system(export_cmd.c_str()) != 0) Env::Check(InternalError("exporting failed: ", export_cmd));
  }
  onnx_io::ImportOptions options;
  options.freeze = true;
  auto imported = onnx_io::ImportOnnxFile(path, options);
  Env::Check(imported.status());
  auto graph = Graph::FromGraphDef(std::move(imported->def));
  Env::Check(graph.status());
  // One session per optimizer level, the default last: the gain of each
  // level is on record (docs/optimizer.md).
  std::vector<int> levels;
  for (int level = 0; level < passes::kDefaultLevel; ++level) levels.push_back(level);
  levels.push_back(passes::kDefaultLevel);
  std::vector<std::unique_ptr<runtime::Session>> sessions;
  for (int level : levels) {
    runtime::SessionOptions session_options;
    session_options.optimizer.level = level;
    auto session = runtime::Session::Create(Graph(*graph), env.shared_devices(), session_options);
    Env::Check(session.status());
    sessions.push_back(std::move(*session));
  }
  const Tensor x = Random(shape, 3);
  const std::vector<std::pair<std::string, Tensor>> feeds = {{imported->inputs[0], x}};
  const std::vector<std::string> fetches = {imported->outputs[0]};
  std::vector<Tensor> out;
  std::size_t current = sessions.size() - 1;
  auto run = [&] { Env::Check(sessions[current]->Run(feeds, fetches, {}, &out)); };
  const int repeats = g_repeats > 0 ? g_repeats : (batch > 8 ? 5 : 30);
  for (current = 0; current < sessions.size(); ++current) {
    for (int i = 0; i < 3; ++i) run();
  }
  current = sessions.size() - 1;
  if (std::getenv("WEFT_BENCH_PROFILE") != nullptr) {
    PrintOpProfile(repeats, "run", [&](const runtime::RunOptions& run_options) {
      Env::Check(sessions[current]->Run(feeds, fetches, {}, &out, run_options));
    });
  }
  const int threads = AvailableCores();
  const std::string ort_prefix = StrCat(WEFT_BINARY_DIR, "/ort");
  const std::string torch_cmd = StrCat("/usr/bin/python3 ", WEFT_SOURCE_DIR, "/tools/bench/torch_onnx_peer.py ", model,
                                       " ", batch, " ", threads, " ", repeats);
  std::vector<std::string> dims;
  for (int i = 0; i < shape.rank(); ++i) dims.push_back(std::to_string(shape.dim(i)));
  const std::string ort_cmd = StrCat("node ", WEFT_SOURCE_DIR, "/tools/bench/ort_peer.js ", ort_prefix, " ", path, " ",
                                     StrJoin(dims, ","), " ", threads, " ", repeats);
  const bool have_ort = std::ifstream(StrCat(ort_prefix, "/node_modules/onnxruntime-node/package.json")).good();
  std::vector<std::vector<double>> level_ms(sessions.size());
  std::vector<double> torch_ms, ort_ms;
  std::string torch_version, ort_version;
  for (int round = 0; round < 3; ++round) {
    for (current = 0; current < sessions.size(); ++current) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      run();
      for (int i = 0; i < repeats; ++i) level_ms[current].push_back(Seconds(run) * 1e3);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    torch_ms.push_back(RunPeer(torch_cmd, "torch", &torch_version));
    if (have_ort) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      ort_ms.push_back(RunPeer(ort_cmd, "ort", &ort_version));
    }
  }
  const double weft = Median(level_ms.back());
  Print(name, weft, Median(torch_ms), "ms", false);
  if (have_ort) {
    Print(name + "_vs_ort", weft, Median(ort_ms), "ms", false);
    for (std::size_t i = 0; i + 1 < levels.size(); ++i) {
      Print(StrCat(name, "_optimize", levels[i], "_vs_ort"), Median(level_ms[i]), Median(ort_ms), "ms", false);
    }
  } else {
    std::cerr << "weft_bench: ONNX Runtime is not installed under " << ort_prefix
              << " (tools/bench/run.sh installs it with npm); no _vs_ort line\n";
  }
  std::cerr << "# " << name << ": " << threads << " threads; the first line at --optimize " << levels.back()
            << " (the default), the _optimizeN lines at lower levels; PyTorch " << torch_version
            << (have_ort ? ", ONNX Runtime " + ort_version : std::string()) << "\n";
}

int Main(int argc, char** argv) {
  if (argc >= 6 && std::string(argv[1]) == "--train-side") {
    return TrainSide({argv[2], argv[3], std::atoi(argv[4])}, std::atoi(argv[5]));
  }
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::cout << "usage: weft_bench NAME [--repeats N]\nNAME: matmul_256 matmul_1024 matmul_2048 conv_lenet "
                 "conv_resnet executor_chain executor_fanout run_trivial transfer_h2d transfer_d2h train_mlp_sgd "
                 "train_mlp_adam train_cnn_sgd lstm_cell onnx_resnet18_b1 onnx_resnet18_b32 onnx_mobilenet_b1 "
                 "onnx_efficientnet_b0 onnx_bert_encoder graph_prepare_1m startup_run\n";
    return argc < 2 ? 1 : 0;
  }
  ParseRepeats(argc, argv);
  SetLogLevel(LogLevel::kWarning);
  Env env;
  const std::string name = argv[1];
  const std::map<std::string, std::function<void()>> benches = {
      {"matmul_256", [&] { MatMul(env, 256); }},
      {"matmul_1024", [&] { MatMul(env, 1024); }},
      {"matmul_2048", [&] { MatMul(env, 2048); }},
      {"conv_lenet",
       [&] {
         Conv(env, "conv_lenet", Shape{64, 28, 28, 1}, Shape{5, 5, 1, 32}, 30);
       }},
      {"conv_resnet",
       [&] {
         Conv(env, "conv_resnet", Shape{32, 56, 56, 64}, Shape{3, 3, 64, 64}, 7);
       }},
      {"executor_chain", [&] { ExecutorChain(env); }},
      {"while_loop_iter", [&] { WhileLoopIter(env); }},
      {"executor_fanout", [&] { ExecutorFanout(env); }},
      {"run_trivial", [&] { RunTrivial(env); }},
      {"transfer_h2d", [&] { Transfer(env, true); }},
      {"transfer_d2h", [&] { Transfer(env, false); }},
      {"train_mlp_sgd",
       [&] {
         TrainBench("train_mlp_sgd", {"mlp", "sgd", 128}, argv[0]);
       }},
      {"train_mlp_adam",
       [&] {
         TrainBench("train_mlp_adam", {"mlp", "adam", 128}, argv[0]);
       }},
      {"train_cnn_sgd",
       [&] {
         TrainBench("train_cnn_sgd", {"cnn", "sgd", 64}, argv[0]);
       }},
      {"lstm_cell", [&] { LstmCell(env, 64, 256, 256); }},
      {"onnx_resnet18_b1",
       [&] {
         OnnxBench(env, "onnx_resnet18_b1", "resnet18", Shape{1, 3, 224, 224});
       }},
      {"onnx_resnet18_b32",
       [&] {
         OnnxBench(env, "onnx_resnet18_b32", "resnet18", Shape{32, 3, 224, 224});
       }},
      {"onnx_mobilenet_b1",
       [&] {
         OnnxBench(env, "onnx_mobilenet_b1", "mobilenet_v2", Shape{1, 3, 224, 224});
       }},
      {"onnx_efficientnet_b0",
       [&] {
         OnnxBench(env, "onnx_efficientnet_b0", "efficientnet_b0", Shape{1, 3, 224, 224});
       }},
      {"onnx_bert_encoder",
       [&] {
         OnnxBench(env, "onnx_bert_encoder", "bert_encoder", Shape{1, 128, 256});
       }},
      {"graph_prepare_1m", [&] { GraphPrepare1M(); }},
      {"startup_run", [&] { StartupRun(); }},
  };
  auto it = benches.find(name);
  if (it == benches.end()) {
    std::cerr << "weft_bench: unknown benchmark '" << name << "'\n";
    return 1;
  }
  it->second();
  return 0;
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) { return weft::bench::Main(argc, argv); }
