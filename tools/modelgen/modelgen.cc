// Writes the sample graphs of configs/models/:
//
//   mnist_mlp.wgt    images f32[?,784] -> dense 64 ReLU -> dense 10 -> logits, probabilities
//   mnist_lenet.wgt  images f32[?,28,28,1] -> conv 5x5x6 SAME ReLU -> maxpool 2
//                    -> conv 5x5x16 VALID ReLU -> maxpool 2 -> dense 120 ReLU
//                    -> dense 84 ReLU -> dense 10 -> logits, probabilities
//
//   fashion_mlp.wgt  images f32[?,784], labels i64[?] -> dense 512 ReLU -> dense 512 ReLU
//                    -> dense 10 -> logits; loss, accuracy, init (training graphs)
//   fashion_cnn.wgt  images f32[?,28,28,1], labels i64[?] -> conv 5x5x32 SAME ReLU -> maxpool 2
//                    -> conv 5x5x64 SAME ReLU -> maxpool 2 -> dense 512 ReLU -> dense 10
//                    -> logits; loss, accuracy, init
//
//   char_lstm.wgt   chars f32[?,64] (byte values), lengths i64[?] -> embedding 256x32
//                    -> LSTM 128 (fused cell) run by a while loop over each line's
//                    length - 1 steps -> dense 256 predicting the next byte;
//                    loss (mean cross entropy per predicted byte), init
//
//   sample_digits_784.npy    f32[4,784]       four hand-drawn-style digits 0 1 4 7,
//   sample_digits_28x28.npy  f32[4,28,28,1]   the same, as images for LeNet
//
// The mnist graphs are inference graphs with their weights as constants,
// drawn from a fixed-seed Glorot-uniform initialiser, so the files are the
// same on every run and every machine (tests check the checked-in files are
// up to date). The fashion graphs are for `weft train`: their weights are
// variables, and the node "init" assigns them Glorot-uniform draws of seeded
// random ops (biases zero), so the files stay small.
//
//   weft_modelgen [--out DIR] [--format wg|wgt]
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>

#include "core/graph/nn_builders.h"
#include "core/graph/serialize.h"
#include "core/ops/generated_ops.h"
#include "core/tensor/npy.h"

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

// --- Training graphs -----------------------------------------------------------

// A variable of |shape| with its initial value assigned by an op collected
// in |inits|: Glorot-uniform when |fan_in| > 0, zeros otherwise.
Output Variable(GraphBuilder& b, const Shape& shape, const std::string& name, int64_t fan_in, int64_t fan_out,
                std::vector<Output>& inits) {
  Output handle = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(shape)}}, name);
  auto s = b.NameScope(name + "/init");
  Output value;
  if (fan_in > 0) {
    const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    Output u = b.Op("RandomUniform", {b.Const(Tensor::FromVector<int64_t>(shape.dims()), "shape")},
                    {{"dtype", AttrValue(DType::kF32)}});
    value = ops::Sub(b, ops::Mul(b, u, b.Scalar<float>(static_cast<float>(2 * limit), "width")),
                     b.Scalar<float>(static_cast<float>(limit), "limit"));
  } else {
    value = b.Op("Fill", {b.Const(Tensor::FromVector<int64_t>(shape.dims()), "shape"), b.Scalar<float>(0.0f, "zero")});
  }
  inits.push_back(b.Op("Assign", {handle, value}, {}, "assign"));
  return handle;
}

Output Read(GraphBuilder& b, Output handle) {
  return b.Op("ReadVariable", {handle}, {{"dtype", AttrValue(DType::kF32)}});
}

Output TrainDense(GraphBuilder& b, Output x, int64_t in, int64_t out, const std::string& scope, bool relu,
                  std::vector<Output>& inits) {
  Output w = Variable(b, Shape{in, out}, scope + "/kernel", in, out, inits);
  Output bias = Variable(b, Shape{out}, scope + "/bias", 0, 0, inits);
  auto s = b.NameScope(scope);
  Output y = ops::BiasAdd(b, ops::MatMul(b, x, Read(b, w)), Read(b, bias));
  return relu ? ops::Relu(b, y) : y;
}

Output TrainConv(GraphBuilder& b, Output x, int64_t k, int64_t in, int64_t out, const std::string& scope,
                 std::vector<Output>& inits) {
  Output w = Variable(b, Shape{k, k, in, out}, scope + "/kernel", k * k * in, k * k * out, inits);
  Output bias = Variable(b, Shape{out}, scope + "/bias", 0, 0, inits);
  auto s = b.NameScope(scope);
  ops::Conv2DAttrs attrs;
  attrs.padding = "SAME";
  return ops::Relu(b, ops::BiasAdd(b, ops::Conv2D(b, x, Read(b, w), attrs), Read(b, bias)));
}

// The heads every training graph ends with: logits, probabilities, the
// mean cross entropy "loss", the fraction of right answers "accuracy", and
// "init" running every initialiser.
Status FinishTraining(GraphBuilder& b, Output logits, Output labels, const std::vector<Output>& inits) {
  Finish(b, logits);
  Output xent = b.AddNode("SparseSoftmaxCrossEntropyWithLogits", {logits, labels}, {}, "xent")[0];
  b.Op("Mean", {xent}, {}, "loss");
  Output right;
  {
    auto s = b.NameScope("metrics");
    Output predicted = b.Op("ArgMax", {logits}, {{"axis", AttrValue(int64_t{1})}});
    right = b.Op("Cast", {b.Op("Equal", {predicted, labels})}, {{"DstT", AttrValue(DType::kF32)}});
  }
  b.Op("Mean", {right}, {}, "accuracy");
  {
    auto s = b.ControlDependencies(inits);
    b.Op("NoOp", {}, {}, "init");
  }
  return b.status();
}

Expected<GraphDef> FashionMlp() {
  GraphBuilder b;
  std::vector<Output> inits;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 784}, "images");
  Output labels = b.Placeholder(DType::kI64, Shape{-1}, "labels");
  Output h1 = TrainDense(b, x, 784, 512, "dense1", true, inits);
  Output h2 = TrainDense(b, h1, 512, 512, "dense2", true, inits);
  WEFT_RETURN_IF_ERROR(FinishTraining(b, TrainDense(b, h2, 512, 10, "dense3", false, inits), labels, inits));
  return b.def();
}

Expected<GraphDef> FashionCnn() {
  GraphBuilder b;
  std::vector<Output> inits;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 28, 28, 1}, "images");
  Output labels = b.Placeholder(DType::kI64, Shape{-1}, "labels");
  Output c1 = MaxPool2(b, TrainConv(b, x, 5, 1, 32, "conv1", inits));
  Output c2 = MaxPool2(b, TrainConv(b, c1, 5, 32, 64, "conv2", inits));
  Output flat = ops::Reshape(b, c2, b.Const(Tensor::FromVector<int64_t>({-1, 7 * 7 * 64}), "flatten/shape"), "flatten");
  Output f1 = TrainDense(b, flat, 7 * 7 * 64, 512, "dense1", true, inits);
  WEFT_RETURN_IF_ERROR(FinishTraining(b, TrainDense(b, f1, 512, 10, "dense2", false, inits), labels, inits));
  return b.def();
}

// A character-level language model over lines of text (the "text" data
// format: each example is up to 64 byte values, zero-padded, and its label
// the line's length). From byte t it predicts byte t + 1, for t < length - 1;
// the loss is the mean cross entropy over those predictions, accumulated
// inside the loop.
Expected<GraphDef> CharLstm() {
  constexpr int64_t kLength = 64, kVocabulary = 256, kEmbedding = 32, kHidden = 128;
  GraphBuilder b;
  std::vector<Output> inits;
  Output chars = b.Placeholder(DType::kF32, Shape{-1, kLength}, "chars");
  Output lengths = b.Placeholder(DType::kI64, Shape{-1}, "lengths");
  Output embedding = Variable(b, Shape{kVocabulary, kEmbedding}, "embedding", kVocabulary, kEmbedding, inits);
  Output kernel =
      Variable(b, Shape{kEmbedding + kHidden, 4 * kHidden}, "lstm/kernel", kEmbedding + kHidden, 4 * kHidden, inits);
  Output bias = Variable(b, Shape{4 * kHidden}, "lstm/bias", 0, 0, inits);
  Output proj = Variable(b, Shape{kHidden, kVocabulary}, "output/kernel", kHidden, kVocabulary, inits);
  Output proj_bias = Variable(b, Shape{kVocabulary}, "output/bias", 0, 0, inits);
  Output ids, inputs, steps, zeros;
  {
    auto s = b.NameScope("inputs");
    ids = b.Op("Transpose", {b.Op("Cast", {chars}, {{"DstT", AttrValue(DType::kI64)}})},
               {{"perm", AttrValue(std::vector<int64_t>{1, 0})}});                           // [time, batch]
    inputs = b.Op("ResourceGather", {embedding, ids}, {{"dtype", AttrValue(DType::kF32)}});  // [time, batch, 32]
    steps = ops::Sub(b, lengths, b.Scalar<int64_t>(1, "one"), "steps");
    // [batch, hidden] zeros: a zero per example times a zero row.
    Output per_example =
        b.Op("ExpandDims", {b.Op("ZerosLike", {b.Op("Cast", {lengths}, {{"DstT", AttrValue(DType::kF32)}})})},
             {{"axis", AttrValue(int64_t{1})}});
    zeros =
        ops::Mul(b, per_example,
                 b.Const(Tensor::FromVector<float>(std::vector<float>(kHidden, 0.0f), Shape{1, kHidden}), "zero_row"),
                 "zero_state");
  }
  Output w_out = Read(b, proj), b_out = Read(b, proj_bias);
  DynamicLstmOptions options;
  options.name = "lstm";
  options.per_step = [&](const Output& t, const Output& h, const Output& mask) -> Expected<Output> {
    Output next = b.Op("Gather", {ids, ops::Add(b, t, b.Scalar<int64_t>(1))}, {}, "next_chars");
    Output logits = ops::BiasAdd(b, ops::MatMul(b, h, w_out), b_out);
    Output xent = b.AddNode("SparseSoftmaxCrossEntropyWithLogits", {logits, next}, {}, "xent")[0];
    return b.Op("Sum", {ops::Mul(b, xent, mask)}, {}, "step_loss");
  };
  WEFT_ASSIGN_OR_RETURN(DynamicLstmResult r,
                        DynamicLstm(b, inputs, steps, Read(b, kernel), Read(b, bias), zeros, zeros, options));
  Output predictions = b.Op("Sum", {b.Op("Cast", {steps}, {{"DstT", AttrValue(DType::kF32)}})}, {}, "predictions");
  b.Op("RealDiv", {r.sum, predictions}, {}, "loss");
  {
    auto s = b.ControlDependencies(inits);
    b.Op("NoOp", {}, {}, "init");
  }
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
                   "Writes the sample graphs mnist_mlp, mnist_lenet, fashion_mlp, fashion_cnn and char_lstm, and\n"
                   "sample inputs, into DIR\n"
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
  using Maker = std::pair<const char*, Expected<GraphDef> (*)()>;
  for (const auto& [name, make] :
       {Maker{"mnist_mlp", Mlp}, Maker{"mnist_lenet", LeNet}, Maker{"fashion_mlp", FashionMlp},
        Maker{"fashion_cnn", FashionCnn}, Maker{"char_lstm", CharLstm}}) {
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
