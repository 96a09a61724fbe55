// weft-lite: runs a .wg model with the lite build (docs/lite.md), through
// the C inference API (weft/weft_inference.hpp) that the lite library
// provides, reading inputs from and writing outputs to .npy files.
//
//   weft-lite model.wg input=image.npy -o out/      # out/<output>.npy
//   weft-lite model.wg image.npy --repeat 20 --time  # the only input
//   weft-lite model.wg --info                         # inputs and outputs
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/base/logging.h"
#include "core/tensor/npy.h"
#include "core/tensor/tensor.h"
#include "weft/weft_inference.hpp"

namespace {

namespace wi = weft::inference;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "weft-lite: run a .wg model with the lite build (docs/lite.md)\n"
    "Usage: weft-lite MODEL.wg [NAME=FILE.npy | FILE.npy]... [OPTIONS]\n"
    "\n"
    "Inputs are .npy files, each NAME=FILE for the model's input NAME, or a\n"
    "bare FILE when the model has one input.\n"
    "\n"
    "Options:\n"
    "  -o, --out-dir DIR   write each output to DIR/<output>.npy (else print its shape and first values)\n"
    "  --threads N         intra-op threads (default: one per core)\n"
    "  --repeat N          run N times (default 1); with --time, print the median\n"
    "  --time              print the time to load, to the first result, and per run\n"
    "  --info              list the model's inputs and outputs, and exit\n"
    "  -v, --verbose       log what the runtime does (debug level) to stderr\n"
    "  -h, --help          print this help\n"
    "\n"
    "A .onnx model, or one the lite build lacks a kernel for, is refused with\n"
    "what to do: optimize it with the full build (`weft optimize MODEL -o MODEL.wg`),\n"
    "or rebuild the lite build for its ops (docs/lite.md).\n";

struct Args {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;  // name (may be empty), file
  std::string out_dir;
  int threads = 0;
  int repeat = 1;
  bool time = false;
  bool info = false;
  bool verbose = false;
};

[[noreturn]] void Usage(const std::string& error) {
  std::fprintf(stderr, "weft-lite: error: %s\nRun `weft-lite --help` for usage.\n", error.c_str());
  std::exit(2);
}

int PositiveInt(const std::string& flag, const char* text, int min) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000) {
    Usage(flag + " takes a whole number from " + std::to_string(min) + ", got '" + text + "'");
  }
  return static_cast<int>(v);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "-o" || arg == "--out-dir") {
      a.out_dir = value();
    } else if (arg == "--threads") {
      a.threads = PositiveInt(arg, value(), 0);
    } else if (arg == "--repeat") {
      a.repeat = PositiveInt(arg, value(), 1);
    } else if (arg == "--time") {
      a.time = true;
    } else if (arg == "--info") {
      a.info = true;
    } else if (arg == "-v" || arg == "--verbose") {
      a.verbose = true;
    } else if (arg.starts_with("-")) {
      Usage("unknown option " + arg);
    } else if (a.model.empty()) {
      a.model = arg;
    } else {
      const std::size_t eq = arg.find('=');
      if (eq == std::string::npos) {
        a.inputs.emplace_back("", arg);
      } else {
        a.inputs.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
      }
    }
  }
  if (a.model.empty()) Usage("no model given");
  return a;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

// The feeds, from the .npy files named on the command line.
std::vector<weft::Tensor> ReadInputs(const Args& args, const std::vector<wi::TensorInfo>& inputs,
                                     std::vector<wi::Feed>& feeds) {
  std::vector<weft::Tensor> tensors;
  for (const auto& [given_name, file] : args.inputs) {
    std::string name = given_name;
    if (name.empty()) {
      if (inputs.size() != 1 || args.inputs.size() != 1) {
        Usage("input file " + file + " has no NAME=; the model has " + std::to_string(inputs.size()) +
              " inputs, so name each (--info lists them)");
      }
      name = inputs[0].name;
    }
    weft::Expected<weft::Tensor> t = weft::ReadNpy(file);
    if (!t.ok()) throw wi::Error(WEFT_INVALID_ARGUMENT, t.status().ToString());
    tensors.push_back(std::move(*t));
    const weft::Tensor& v = tensors.back();
    feeds.emplace_back(name, static_cast<weft_dtype_t>(v.dtype()), v.shape().dims(), v.raw_data(), v.byte_size());
  }
  return tensors;
}

void PrintInfo(const wi::Session& session) {
  for (const bool in : {true, false}) {
    for (const wi::TensorInfo& t : in ? session.Inputs() : session.Outputs()) {
      std::printf("%s %s %s %s\n", in ? "input " : "output", t.name.c_str(), weft_dtype_name(t.dtype),
                  t.rank < 0 ? "[?]" : DimsText(t.dims).c_str());
    }
  }
}

// An output: to DIR/<name>.npy, or its shape and first values.
void Emit(const Args& args, const std::string& name, const wi::Array& out) {
  weft::Expected<weft::Tensor> t =
      weft::Tensor::Allocate(static_cast<weft::DType>(out.dtype()), weft::Shape(out.dims()));
  if (!t.ok()) throw wi::Error(WEFT_INTERNAL, t.status().ToString());
  if (out.byte_size() > 0) std::copy_n(static_cast<const char*>(out.raw_data()), out.byte_size(), t->data<char>());
  if (!args.out_dir.empty()) {
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');
    const std::string path = (std::filesystem::path(args.out_dir) / (file + ".npy")).string();
    if (weft::Status s = weft::WriteNpy(path, *t); !s.ok()) throw wi::Error(WEFT_INTERNAL, s.ToString());
    std::printf("%s %s %s -> %s\n", name.c_str(), weft_dtype_name(out.dtype()), DimsText(out.dims()).c_str(),
                path.c_str());
    return;
  }
  std::printf("%s %s %s", name.c_str(), weft_dtype_name(out.dtype()), DimsText(out.dims()).c_str());
  if (out.dtype() == WEFT_DTYPE_F32) {
    const float* v = out.data<float>();
    const std::size_t n = out.byte_size() / sizeof(float);
    std::printf(":");
    for (std::size_t i = 0; i < std::min<std::size_t>(n, 6); ++i) std::printf(" %.6g", v[i]);
    if (n > 6) std::printf(" ...");
  }
  std::printf("\n");
}

int Run(const Args& args, Clock::time_point start) {
  if (!args.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.out_dir, ec);
    if (ec) Usage("cannot create --out-dir " + args.out_dir + ": " + ec.message());
  }
  const wi::Model model = wi::Model::Load(args.model);
  const Clock::time_point read = Clock::now();
  wi::SessionOptions options;
  options.Threads(args.threads, 0).OptimizerLevel(0);
  wi::Session session(model, options);
  const Clock::time_point loaded = Clock::now();
  if (args.info) {
    PrintInfo(session);
    return 0;
  }
  std::vector<wi::Feed> feeds;
  const std::vector<weft::Tensor> kept = ReadInputs(args, session.Inputs(), feeds);
  std::vector<std::string> fetches;
  for (const wi::TensorInfo& t : session.Outputs()) fetches.push_back(t.name);
  std::vector<double> runs;
  std::vector<wi::Array> outputs;
  Clock::time_point first;
  for (int i = 0; i < args.repeat; ++i) {
    const Clock::time_point t0 = Clock::now();
    outputs = session.Run(feeds, fetches);
    const Clock::time_point t1 = Clock::now();
    if (i == 0) first = t1;
    runs.push_back(Ms(t1 - t0));
  }
  for (std::size_t i = 0; i < fetches.size(); ++i) Emit(args, fetches[i], outputs[i]);
  if (args.time) {
    std::vector<double> sorted = runs;
    std::sort(sorted.begin(), sorted.end());
    std::printf(
        "time: start to first result %.2f ms (model read %.2f ms, session %.2f ms, first run %.2f ms); median of %d "
        "runs %.3f ms\n",
        Ms(first - start), Ms(read - start), Ms(loaded - read), runs[0], args.repeat, sorted[sorted.size() / 2]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point start = Clock::now();
  const Args args = Parse(argc, argv);
  if (args.verbose) weft::SetLogLevel(weft::LogLevel::kDebug);
  try {
    return Run(args, start);
  } catch (const wi::Error& e) {
    std::fprintf(stderr, "weft-lite: error: %s\n", e.what());
    return 1;
  }
}
