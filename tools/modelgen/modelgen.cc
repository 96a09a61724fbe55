// Writes the sample graphs of configs/models/:
//
//   mnist_mlp.wgt    images f32[?,784] -> dense 64 ReLU -> dense 10 -> logits, probabilities
//   mnist_lenet.wgt  images f32[?,28,28,1] -> conv 5x5x6 SAME ReLU -> maxpool 2
//                    -> conv 5x5x16 VALID ReLU -> maxpool 2 -> dense 120 ReLU
//                    -> dense 84 ReLU -> dense 10 -> logits, probabilities
//
//   sample_digits_784.npy    f32[4,784]       four hand-drawn-style digits 0 1 4 7,
//   sample_digits_28x28.npy  f32[4,28,28,1]   the same, as images for LeNet
//
// They are inference graphs with their weights as constants, drawn from a
// fixed-seed Glorot-uniform initialiser, so the files are the same on every
// run and every machine (tests check the checked-in files are up to date).
//
//   weft_modelgen [--out DIR] [--format wg|wgt]
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>

#include "core/graph/serialize.h"
#include "core/tensor/npy.h"
#include "core/ops/generated_ops.h"

namespace weft {
namespace {

// SplitMix64: a tiny, fully specified generator, so the weights never
// depend on a standard library's implementation.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  double Symmetric() { return static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0; }

 private:
  uint64_t state_;
};

// Glorot-uniform weights of |shape| with the given fan in and out.
Tensor Glorot(Rng& rng, const Shape& shape, int64_t fan_in, int64_t fan_out) {
  Tensor t = *Tensor::Allocate(DType::kF32, shape);
  const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = static_cast<float>(limit * rng.Symmetric());
  return t;
}

Tensor SmallBias(Rng& rng, int64_t n) {
  Tensor t = *Tensor::Allocate(DType::kF32, Shape{n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(0.01 * rng.Symmetric());
  return t;
}

Output Dense(GraphBuilder& b, Rng& rng, Output x, int64_t in, int64_t out, const std::string& scope, bool relu) {
  auto s = b.NameScope(scope);
  Output w = b.Const(Glorot(rng, Shape{in, out}, in, out), "kernel");
  Output bias = b.Const(SmallBias(rng, out), "bias");
  Output y = ops::BiasAdd(b, ops::MatMul(b, x, w), bias);
  return relu ? ops::Relu(b, y) : y;
}

Output Conv(GraphBuilder& b, Rng& rng, Output x, int64_t k, int64_t in, int64_t out, const std::string& padding,
            const std::string& scope) {
  auto s = b.NameScope(scope);
  Output w = b.Const(Glorot(rng, Shape{k, k, in, out}, k * k * in, k * k * out), "kernel");
  Output bias = b.Const(SmallBias(rng, out), "bias");
  ops::Conv2DAttrs attrs;
  attrs.padding = padding;
  return ops::Relu(b, ops::BiasAdd(b, ops::Conv2D(b, x, w, attrs), bias));
}

Output MaxPool2(GraphBuilder& b, Output x) { return ops::MaxPool(b, x, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"); }

void Finish(GraphBuilder& b, Output logits) {
  ops::Identity(b, logits, "logits");
  ops::Softmax(b, logits, {}, "probabilities");
}

Expected<GraphDef> Mlp() {
  GraphBuilder b;
  Rng rng(20161102);  // the OSDI'16 paper's date, as good a seed as any
  Output x = b.Placeholder(DType::kF32, Shape{-1, 784}, "images");
  Output h = Dense(b, rng, x, 784, 64, "dense1", true);
  Finish(b, Dense(b, rng, h, 64, 10, "dense2", false));
  WEFT_RETURN_IF_ERROR(b.status());
  return b.def();
}

Expected<GraphDef> LeNet() {
  GraphBuilder b;
  Rng rng(19981101);  // LeCun et al., Proc. IEEE, November 1998
  Output x = b.Placeholder(DType::kF32, Shape{-1, 28, 28, 1}, "images");
  Output c1 = MaxPool2(b, Conv(b, rng, x, 5, 1, 6, "SAME", "conv1"));
  Output c2 = MaxPool2(b, Conv(b, rng, c1, 5, 6, 16, "VALID", "conv2"));
  Output flat = ops::Reshape(b, c2, b.Const(Tensor::FromVector<int64_t>({-1, 400}), "flatten/shape"), "flatten");
  Output f1 = Dense(b, rng, flat, 400, 120, "dense1", true);
  Output f2 = Dense(b, rng, f1, 120, 84, "dense2", true);
  Finish(b, Dense(b, rng, f2, 84, 10, "dense3", false));
  WEFT_RETURN_IF_ERROR(b.status());
  return b.def();
}

// Four 28x28 digits drawn with thick strokes, ink 1 on background 0, so the
// sample graphs have something digit-like to run on: 0, 1, 4 and 7.
Tensor Digits(const Shape& shape) {
  Tensor t = *Tensor::Allocate(DType::kF32, shape);
  float* px = t.data<float>();
  std::memset(px, 0, static_cast<size_t>(t.num_elements()) * sizeof(float));
  struct Segment {
    double x0, y0, x1, y1;
  };
  auto stroke = [&](int digit, Segment s) {
    for (int y = 0; y < 28; ++y) {
      for (int x = 0; x < 28; ++x) {
        const double dx = s.x1 - s.x0, dy = s.y1 - s.y0;
        const double len2 = dx * dx + dy * dy;
        double u = len2 == 0 ? 0 : ((x - s.x0) * dx + (y - s.y0) * dy) / len2;
        u = u < 0 ? 0 : (u > 1 ? 1 : u);
        const double ex = x - (s.x0 + u * dx), ey = y - (s.y0 + u * dy);
        if (ex * ex + ey * ey <= 2.25) px[digit * 784 + y * 28 + x] = 1.0f;
      }
    }
  };
  for (int i = 0; i < 32; ++i) {  // 0: an ellipse of 32 chords
    const double a = 2 * M_PI * i / 32, b = 2 * M_PI * (i + 1) / 32;
    stroke(0, {14 + 6 * std::cos(a), 14 + 9 * std::sin(a), 14 + 6 * std::cos(b), 14 + 9 * std::sin(b)});
  }
  stroke(1, {15, 4, 15, 24});
  stroke(1, {15, 4, 11, 8});
  stroke(2, {17, 4, 17, 24});
  stroke(2, {17, 4, 8, 17});
  stroke(2, {8, 17, 21, 17});
  stroke(3, {7, 5, 21, 5});
  stroke(3, {21, 5, 12, 24});
  return t;
}

int Main(int argc, char** argv) {
  std::string out = "configs/models";
  std::string format = "wgt";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (arg == "--format" && i + 1 < argc) {
      format = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      std::cout << "usage: weft_modelgen [--out DIR] [--format wg|wgt]\n"
                   "Writes the sample graphs mnist_mlp and mnist_lenet, and sample inputs, into DIR\n"
                   "(default configs/models).\n";
      return 0;
    } else {
      std::cerr << "weft_modelgen: unknown argument '" << arg << "' (see --help)\n";
      return 1;
    }
  }
  if (format != "wg" && format != "wgt") {
    std::cerr << "weft_modelgen: --format must be wg or wgt\n";
    return 1;
  }
  for (const auto& [name, make] : {std::pair<const char*, Expected<GraphDef> (*)()>{"mnist_mlp", Mlp},
                                   std::pair<const char*, Expected<GraphDef> (*)()>{"mnist_lenet", LeNet}}) {
    auto def = make();
    if (!def.ok()) {
      std::cerr << "weft_modelgen: " << name << ": " << def.status().ToString() << "\n";
      return 2;
    }
    const std::string path = StrCat(out, "/", name, ".", format);
    if (Status s = WriteGraphFile(path, *def); !s.ok()) {
      std::cerr << "weft_modelgen: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << path << " (" << def->nodes.size() << " nodes)\n";
  }
  for (const auto& [name, shape] : {std::pair<const char*, Shape>{"sample_digits_784", Shape{4, 784}},
                                    std::pair<const char*, Shape>{"sample_digits_28x28", Shape{4, 28, 28, 1}}}) {
    const std::string path = StrCat(out, "/", name, ".npy");
    if (Status s = WriteNpy(path, Digits(shape)); !s.ok()) {
      std::cerr << "weft_modelgen: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << path << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) { return weft::Main(argc, argv); }
