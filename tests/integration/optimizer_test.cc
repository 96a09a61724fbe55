// The optimizer plugins (plugins/optimizers) driven through
// train::Optimizer on the CPU device, against torch.optim.
//
// Each trajectory of tests/data/optimizer_reference/trajectories.toml
// (written by make_optimizer_reference.py with PyTorch in f64) is built as
// a Weft training graph: W [3, 4] and b [4] as variables, the loss
// mean((tanh(X W + b) - Y)^2) from constants, grad::AddGradients, optional
// clipping by global norm, one Optimizer::BuildUpdate per variable and a
// global-step variable; the learning rate comes from train::LearningRateAt
// and is fed each step. It runs 12 steps twice, once with the device's
// fused apply ops and once composed from primitive ops, and every step's
// loss, W and b must match PyTorch within a relative 1e-6, and the two
// paths each other within 1e-12.
//
// Then: ClipByGlobalNorm against torch.nn.utils.clip_grad_norm_, and every
// error of Optimizer and ClipByGlobalNorm with its message.
#include "core/train/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/grad/gradients.h"
#include "core/plugin/host_services.h"
#include "core/train/schedule.h"
#include "tests/integration/optimizer_reference.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::Close;
using testing::NumberRows;
using testing::Numbers;
using testing::RuntimeEnv;

constexpr double kTorchRtol = 1e-6;
constexpr double kPathsRtol = 1e-12;
constexpr double kF32Rtol = 1e-4;
constexpr double kF32Atol = 1e-5;

const toml::table& Trajectories() {
  static const toml::table table = testing::ReadReference("trajectories.toml");
  return table;
}

const toml::table* FindTrajectory(std::string_view name) {
  if (const toml::array* all = Trajectories()["trajectory"].as_array()) {
    for (const toml::node& t : *all) {
      if (t.as_table() != nullptr && (*t.as_table())["name"].value_or(std::string()) == name) return t.as_table();
    }
  }
  return nullptr;
}

std::vector<std::string> TrajectoryNames() {
  std::vector<std::string> names;
  if (const toml::array* all = Trajectories()["trajectory"].as_array()) {
    for (const toml::node& t : *all) {
      names.push_back(t.as_table() != nullptr ? (*t.as_table())["name"].value_or(std::string()) : "");
    }
  }
  return names;
}

using testing::Doubles;

Tensor ProblemTensor(std::string_view key) {
  const auto problem = Trajectories()["problem"];
  std::vector<int64_t> dims;
  for (double d : Numbers(problem[std::string(key) + "_shape"])) dims.push_back(static_cast<int64_t>(d));
  return Tensor::FromVector<double>(Numbers(problem[key]), Shape(dims));
}

// The kernels the default device offers: the fused path.
train::HasKernelFn DeviceKernels(const RuntimeEnv& env) {
  const runtime::RuntimeDevice* device = env.devices()->default_device();
  return [device](std::string_view op, const std::vector<std::pair<std::string, DType>>& constraints) {
    for (const weft_kernel_def_t* def : device->kernels().ForOp(op)) {
      bool matches = true;
      for (const auto& [attr, dtype] : constraints) {
        for (size_t i = 0; i < def->num_constraints; ++i) {
          if (attr == def->constraint_attrs[i] && static_cast<DType>(def->constraint_dtypes[i]) != dtype) {
            matches = false;
          }
        }
      }
      if (matches) return true;
    }
    return false;
  };
}

// No fused kernels: the composed path.
bool NoKernels(std::string_view, const std::vector<std::pair<std::string, DType>>&) { return false; }

// The loaded optimizer plugin |name|, or nullptr after failing the test.
const plugin::OptimizerPlugin* PluginNamed(const RuntimeEnv& env, std::string_view name) {
  const plugin::OptimizerPlugin* plugin = env.host().optimizers().Find(name);
  EXPECT_NE(plugin, nullptr) << "optimizer plugin '" << name << "' is not loaded";
  return plugin;
}

// [optimizer] with the given body, as the config parser reads it.
config::Section OptimizerSection(const std::string& body) {
  auto parsed = config::ParseConfig("[optimizer]\n" + body, "train.toml", "/");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() && parsed->optimizer ? *parsed->optimizer : config::Section{};
}

Output Var(GraphBuilder& b, DType dtype, const Shape& shape, std::string_view name) {
  return b.Op("VarHandle", {}, {{"dtype", AttrValue(dtype)}, {"shape", AttrValue(shape)}}, name);
}

Output Read(GraphBuilder& b, Output var, DType dtype, std::string_view name = {}) {
  return b.Op("ReadVariable", {var}, {{"dtype", AttrValue(dtype)}}, name);
}

// A constant of |dtype| holding |value| (given in f64).
Output ConstAs(GraphBuilder& b, const Tensor& value, DType dtype) {
  const Output c = b.Const(value);
  return dtype == DType::kF64 ? c : b.Op("Cast", {c}, {{"DstT", AttrValue(dtype)}});
}

Tensor Filled(const Shape& shape, double value) {
  return Tensor::FromVector<double>(std::vector<double>(static_cast<std::size_t>(shape.num_elements()), value), shape);
}

std::vector<double> AsDoubles(const Tensor& t) {
  if (t.dtype() == DType::kF64) return Doubles(t);
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) out.push_back(static_cast<double>(t.data<float>()[i]));
  return out;
}

// What one run of a trajectory produced, per step.
struct TrajectoryRun {
  std::vector<double> lr, loss, norm;
  std::vector<std::vector<double>> W, b;
  int64_t final_step = 0;
  std::multiset<std::string> ops;  // the op of every node of the graph
};

// Builds the training graph of |t| (see the file comment) with variables
// of |dtype| and runs it.
TrajectoryRun RunTrajectory(RuntimeEnv& env, const toml::table& t, const train::HasKernelFn& has_kernel,
                            DType dtype = DType::kF64) {
  TrajectoryRun run;
  const std::string optimizer_name = t["optimizer"].value_or(std::string());
  const config::Section hyperparameters = OptimizerSection(testing::TomlLines(t["hyperparameters"].as_table()));
  const plugin::OptimizerPlugin* plugin = PluginNamed(env, optimizer_name);
  if (plugin == nullptr) return run;
  auto optimizer = train::Optimizer::Create(*plugin, &hyperparameters);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status().ToString();
  if (!optimizer.ok()) return run;
  const config::ScheduleConfig schedule = testing::ScheduleFrom(t["schedule"].as_table());
  const double base_lr = t["learning_rate"].value_or(0.0);
  const double clip_norm = t["clip_norm"].value_or(0.0);
  const int64_t steps = Trajectories()["problem"]["steps"].value_or(int64_t{0});

  GraphBuilder b;
  const Tensor w0 = ProblemTensor("W"), b0 = ProblemTensor("b");
  const Output w = Var(b, dtype, w0.shape(), "W");
  const Output bias = Var(b, dtype, b0.shape(), "b");
  const Output global_step = Var(b, DType::kI64, Shape{}, "global_step");
  std::vector<Output> init = {b.Op("Assign", {w, ConstAs(b, w0, dtype)}), b.Op("Assign", {bias, ConstAs(b, b0, dtype)}),
                              b.Op("Assign", {global_step, b.Scalar<int64_t>(0)})};
  // The slots of each variable, created and initialised as the trainer does.
  std::vector<std::vector<Output>> slots(2);
  const std::pair<Output, Shape> vars[] = {{w, w0.shape()}, {bias, b0.shape()}};
  const char* names[] = {"W", "b"};
  for (int v = 0; v < 2; ++v) {
    auto defs = (*optimizer)->Slots(dtype, vars[v].second);
    EXPECT_TRUE(defs.ok()) << defs.status().ToString();
    if (!defs.ok()) return run;
    for (const train::SlotDef& def : *defs) {
      Output slot = Var(b, dtype, vars[v].second, std::string(names[v]) + "/slot/" + def.name);
      slots[static_cast<std::size_t>(v)].push_back(slot);
      init.push_back(b.Op("Assign", {slot, ConstAs(b, Filled(vars[v].second, def.initial_value), dtype)}));
    }
  }
  {
    auto deps = b.ControlDependencies(init);
    b.Op("NoOp", {}, {}, "init");
  }

  const Output logits =
      b.Op("Add", {b.Op("MatMul", {ConstAs(b, ProblemTensor("X"), dtype), Read(b, w, dtype)}), Read(b, bias, dtype)});
  const Output loss =
      b.Op("Mean", {b.Op("Square", {b.Op("Sub", {b.Op("Tanh", {logits}), ConstAs(b, ProblemTensor("Y"), dtype)})})}, {},
           "loss");
  auto grads = grad::AddGradients(b, {loss}, {w, bias});
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  if (!grads.ok()) return run;
  Output norm;
  if (clip_norm > 0) {
    auto clipped = train::ClipByGlobalNorm(b, *grads, clip_norm, &norm);
    EXPECT_TRUE(clipped.ok()) << clipped.status().ToString();
    if (!clipped.ok()) return run;
    grads = std::move(clipped);
  }
  const Output lr = b.Placeholder(dtype, Shape{}, "lr");
  const Output step = b.Op("Add", {Read(b, global_step, DType::kI64), b.Scalar<int64_t>(1)}, {}, "step");
  std::vector<Output> updates = {step};
  for (int v = 0; v < 2; ++v) {
    train::UpdateArgs args;
    args.variable_name = names[v];
    args.dtype = dtype;
    args.variable = vars[v].first;
    args.gradient = (*grads)[static_cast<std::size_t>(v)];
    args.learning_rate = lr;
    args.step = step;
    args.slots = slots[static_cast<std::size_t>(v)];
    auto update = (*optimizer)->BuildUpdate(b, args, has_kernel);
    EXPECT_TRUE(update.ok()) << update.status().ToString();
    if (!update.ok()) return run;
    updates.push_back(*update);
  }
  // The step counter moves once every update (and the step's read) ran.
  Output increment;
  {
    auto deps = b.ControlDependencies(updates);
    increment = b.Op("AssignAdd", {global_step, b.Scalar<int64_t>(1)});
  }
  {
    auto deps = b.ControlDependencies({increment});
    b.Op("NoOp", {}, {}, "train");
  }
  Read(b, w, dtype, "W_value");
  Read(b, bias, dtype, "b_value");
  Read(b, global_step, DType::kI64, "global_step_value");
  for (const NodeDef& node : b.def().nodes) run.ops.insert(node.op);

  auto session = env.Session(b);
  if (session == nullptr) return run;
  Status s = session->Run({}, {}, {"init"}, nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> fetches = {"loss"};
  if (norm.valid()) fetches.push_back(norm.name());
  for (int64_t i = 0; i < steps && s.ok(); ++i) {
    const double rate = train::LearningRateAt(schedule, base_lr, i, steps);
    const Tensor fed =
        dtype == DType::kF64 ? Tensor::Scalar<double>(rate) : Tensor::Scalar<float>(static_cast<float>(rate));
    std::vector<Tensor> out;
    s = session->Run({{"lr", fed}}, fetches, {"train"}, &out);
    EXPECT_TRUE(s.ok()) << "step " << i << ": " << s.ToString();
    if (!s.ok()) break;
    run.lr.push_back(rate);
    run.loss.push_back(AsDoubles(out[0])[0]);
    if (norm.valid()) run.norm.push_back(AsDoubles(out[1])[0]);
    s = session->Run({}, {"W_value", "b_value"}, {}, &out);
    EXPECT_TRUE(s.ok()) << "step " << i << ": " << s.ToString();
    if (!s.ok()) break;
    run.W.push_back(AsDoubles(out[0]));
    run.b.push_back(AsDoubles(out[1]));
  }
  std::vector<Tensor> out;
  if (s.ok() && session->Run({}, {"global_step_value"}, {}, &out).ok()) run.final_step = out[0].scalar<int64_t>();
  return run;
}

void ExpectRowsClose(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                     double rtol, double atol, std::string_view what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << what << " at step " << s;
    for (std::size_t i = 0; i < want[s].size(); ++i) {
      EXPECT_TRUE(Close(got[s][i], want[s][i], rtol, atol)) << what << "[" << i << "] after step " << s;
    }
  }
}

void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                 std::string_view what) {
  ExpectRowsClose({got}, {want}, rtol, atol, what);
}

// The fused op a trajectory's fused path must use.
std::string FusedOp(const toml::table& t) {
  const std::string name = t["optimizer"].value_or(std::string());
  const bool centered = t["hyperparameters"]["centered"].value_or(false);
  if (name == "sgd") return "ResourceApplyGradientDescent";
  if (name == "momentum") return "ResourceApplyMomentum";
  if (name == "adam") return "ResourceApplyAdam";
  if (name == "adamw") return "ResourceApplyAdamW";
  if (name == "rmsprop") return centered ? "ResourceApplyCenteredRMSProp" : "ResourceApplyRMSProp";
  if (name == "adagrad") return "ResourceApplyAdagrad";
  return "?";
}

class TorchTrajectory : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchTrajectory, FusedAndComposedMatchTorchAndEachOther) {
  const toml::table* t = FindTrajectory(GetParam());
  ASSERT_NE(t, nullptr);
  SCOPED_TRACE((*t)["torch"].value_or(std::string()));
  RuntimeEnv env;
  const TrajectoryRun fused = RunTrajectory(env, *t, DeviceKernels(env));
  const TrajectoryRun composed = RunTrajectory(env, *t, NoKernels);
  // Each path is what it claims: two fused updates, or none at all.
  EXPECT_EQ(fused.ops.count(FusedOp(*t)), 2u);
  for (const std::string& op : composed.ops) EXPECT_EQ(op.rfind("ResourceApply", 0), std::string::npos) << op;

  const std::vector<double> lr = Numbers((*t)["lr"]), loss = Numbers((*t)["loss"]);
  const auto W = NumberRows((*t)["W"]), b = NumberRows((*t)["b"]);
  ASSERT_EQ(W.size(), 12u);
  for (const auto* run : {&fused, &composed}) {
    SCOPED_TRACE(run == &fused ? "fused" : "composed");
    EXPECT_EQ(run->final_step, 12);
    ExpectClose(run->lr, lr, 1e-12, 0, "learning rate");
    ExpectClose(run->loss, loss, kTorchRtol, 0, "loss");
    ExpectRowsClose(run->W, W, kTorchRtol, 0, "W");
    ExpectRowsClose(run->b, b, kTorchRtol, 0, "b");
    if ((*t)["norm"]) ExpectClose(run->norm, Numbers((*t)["norm"]), kTorchRtol, 0, "global norm");
  }
  // The paths order their arithmetic differently; an element that
  // cancels to near zero (Adam's first step moves b[0] from 0.05 to 2e-8)
  // keeps only an absolute agreement.
  ExpectRowsClose(fused.W, composed.W, kPathsRtol, 1e-15, "W, fused vs composed");
  ExpectRowsClose(fused.b, composed.b, kPathsRtol, 1e-15, "b, fused vs composed");
}

TEST_P(TorchTrajectory, F32StaysNearTorch) {
  // f32 variables through both paths: the same rules in single precision,
  // near PyTorch's f64 trajectory (relative 1e-4 plus 1e-5 absolute, the
  // parameters being of order 0.1 to 1).
  const toml::table* t = FindTrajectory(GetParam());
  ASSERT_NE(t, nullptr);
  RuntimeEnv env;
  const auto W = NumberRows((*t)["W"]), b = NumberRows((*t)["b"]);
  for (const bool fused_path : {true, false}) {
    SCOPED_TRACE(fused_path ? "fused" : "composed");
    const TrajectoryRun run =
        RunTrajectory(env, *t, fused_path ? DeviceKernels(env) : train::HasKernelFn(NoKernels), DType::kF32);
    ExpectClose(run.loss, Numbers((*t)["loss"]), kF32Rtol, kF32Atol, "loss");
    ExpectRowsClose(run.W, W, kF32Rtol, kF32Atol, "W");
    ExpectRowsClose(run.b, b, kF32Rtol, kF32Atol, "b");
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TorchTrajectory, ::testing::ValuesIn(TrajectoryNames()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST(TorchTrajectory, ReferenceCoversEveryConfiguration) {
  // The brief's list: a trajectory missing from the file would silently
  // drop out of the parameterised test above.
  const std::vector<std::string> names = TrajectoryNames();
  for (const char* want : {"sgd", "sgd_weight_decay", "momentum", "momentum_nesterov", "adam", "adam_weight_decay",
                           "adamw", "rmsprop", "rmsprop_centered", "rmsprop_momentum", "adagrad", "adagrad_lr_decay",
                           "adagrad_initial_accumulator", "sgd_clip", "adam_cosine_warmup"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
}

// --- ClipByGlobalNorm against torch.nn.utils.clip_grad_norm_ -----------------------------

TEST(ClipByGlobalNorm, MatchesTorchClipGradNorm) {
  RuntimeEnv env;
  const toml::table reference = testing::ReadReference("clipping.toml");
  const toml::array* cases = reference["case"].as_array();
  ASSERT_NE(cases, nullptr);
  ASSERT_EQ(cases->size(), 4u);
  for (const toml::node& node : *cases) {
    const toml::table& c = *node.as_table();
    SCOPED_TRACE(c["name"].value_or(std::string()));
    const auto shapes = NumberRows(c["shapes"]);
    const auto grads = NumberRows(c["grads"]);
    const auto want = NumberRows(c["clipped"]);
    for (DType dtype : {DType::kF64, DType::kF32}) {
      SCOPED_TRACE(DTypeName(dtype));
      GraphBuilder b;
      std::vector<Output> inputs;
      for (std::size_t i = 0; i < grads.size(); ++i) {
        std::vector<int64_t> dims(shapes[i].begin(), shapes[i].end());
        Output g = b.Const(Tensor::FromVector<double>(grads[i], Shape(dims)));
        inputs.push_back(dtype == DType::kF64 ? g : b.Op("Cast", {g}, {{"DstT", AttrValue(DType::kF32)}}));
      }
      Output norm;
      auto clipped = train::ClipByGlobalNorm(b, inputs, c["max_norm"].value_or(0.0), &norm);
      ASSERT_TRUE(clipped.ok()) << clipped.status().ToString();
      EXPECT_EQ(norm.node_name(), "clip_by_global_norm/global_norm");
      std::vector<std::string> fetches = {norm.name()};
      for (const Output& o : *clipped) fetches.push_back(o.name());
      auto session = env.Session(b);
      ASSERT_NE(session, nullptr);
      std::vector<Tensor> out;
      Status s = session->Run({}, fetches, {}, &out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      // f32 rounds the inputs and the arithmetic: 1e-6 relative.
      const double rtol = dtype == DType::kF64 ? 1e-12 : 1e-6;
      auto value = [&](const Tensor& t, int64_t i) {
        return dtype == DType::kF64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]);
      };
      EXPECT_TRUE(Close(value(out[0], 0), c["norm"].value_or(0.0), rtol));
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(out[i + 1].num_elements(), static_cast<int64_t>(want[i].size()));
        EXPECT_EQ(out[i + 1].dtype(), dtype);
        for (std::size_t k = 0; k < want[i].size(); ++k) {
          EXPECT_TRUE(Close(value(out[i + 1], static_cast<int64_t>(k)), want[i][k], rtol)) << "gradient " << i;
        }
      }
    }
  }
}

TEST(ClipByGlobalNorm, ZeroGradientsStayZero) {
  // By hand: norm 0, coef = max_norm / 1e-6, clamped to 1: 0 * 1 = 0.
  RuntimeEnv env;
  GraphBuilder b;
  Output norm;
  auto clipped = train::ClipByGlobalNorm(b, {b.Const(Tensor::FromVector<double>({0, 0, 0}))}, 1.0, &norm);
  ASSERT_TRUE(clipped.ok()) << clipped.status().ToString();
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {norm.name(), (*clipped)[0].name()}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<double>(), 0.0);
  EXPECT_EQ(Doubles(out[1]), (std::vector<double>{0, 0, 0}));
}

TEST(ClipByGlobalNorm, Errors) {
  GraphBuilder b;
  const Output f64 = b.Const(Tensor::FromVector<double>({1, 2}), "g64");
  const Output f32 = b.Const(Tensor::FromVector<float>({1, 2}), "g32");
  const Output i32 = b.Const(Tensor::FromVector<int32_t>({1, 2}), "counts");
  auto message = [&](const std::vector<Output>& grads, double max_norm) {
    auto r = train::ClipByGlobalNorm(b, grads, max_norm, nullptr);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(message({}, 1), "ClipByGlobalNorm: no gradients to clip");
  EXPECT_EQ(message({f64}, 0), "ClipByGlobalNorm: max_norm must be a finite number > 0, got 0");
  EXPECT_EQ(message({f64}, -2.5), "ClipByGlobalNorm: max_norm must be a finite number > 0, got -2.5");
  EXPECT_EQ(message({f64}, std::nan("")), "ClipByGlobalNorm: max_norm must be a finite number > 0, got nan");
  EXPECT_EQ(message({f64, Output()}, 1), "ClipByGlobalNorm: gradient 1 is not a tensor of the graph");
  EXPECT_EQ(message({i32}, 1),
            "ClipByGlobalNorm: gradient 0 ('counts') is i32; only f32 and f64 gradients can be clipped");
  EXPECT_EQ(message({f64, f32}, 1),
            "ClipByGlobalNorm: gradient 1 ('g32') is f32 but gradient 0 ('g64') is f64; clip gradients of one dtype "
            "together");
  EXPECT_TRUE(b.status().ok()) << "a refused call must not touch the graph";
}

// --- Errors ------------------------------------------------------------------------------

std::string CreateError(const RuntimeEnv& env, std::string_view optimizer, const std::string& body) {
  const config::Section section = OptimizerSection(body);
  const plugin::OptimizerPlugin* plugin = PluginNamed(env, optimizer);
  if (plugin == nullptr) return "";
  auto created = train::Optimizer::Create(*plugin, &section);
  EXPECT_FALSE(created.ok()) << body;
  if (created.ok()) return "";
  EXPECT_EQ(created.status().code(), Code::kInvalidArgument);
  return created.status().message();
}

// An [optimizer] section the optimizer |optimizer| refuses, and the message.
struct Refused {
  std::string_view optimizer;
  std::string body;
  std::string message;
};

void ExpectRefused(const std::vector<Refused>& cases) {
  RuntimeEnv env;
  for (const Refused& c : cases) EXPECT_EQ(CreateError(env, c.optimizer, c.body), c.message) << c.optimizer;
}

TEST(OptimizerErrors, UnknownHyperparameterSuggestsTheClosest) {
  ExpectRefused({
      {"adam", "beta3 = 0.5\n", "train.toml:2:1: optimizer.beta3: unknown key; did you mean 'beta1'?"},
      {"sgd", "momentum = 0.9\n", "train.toml:2:1: optimizer.momentum: unknown key; known keys: weight_decay"},
  });
}

TEST(OptimizerErrors, ValuesOutOfRangeOrOfTheWrongType) {
  ExpectRefused({
      {"adam", "beta2 = 1.5\n", "train.toml:2:9: optimizer.beta2: expected a number in [0, 1], got 1.5"},
      {"rmsprop", "epsilon = -1e-8\nrho = 2\n",
       "train.toml:2:11: optimizer.epsilon: expected a number in [0, 1], got -1e-08\n"
       "train.toml:3:7: optimizer.rho: expected a number in [0, 1], got 2"},
      {"momentum", "nesterov = \"yes\"\n", "train.toml:2:12: optimizer.nesterov: expected a boolean, got \"yes\""},
  });
}

TEST(OptimizerErrors, CombinationsThePluginRefuses) {
  ExpectRefused({
      {"adam", "beta1 = 1.0\n", "optimizer 'adam': beta1 must be below 1 (1 - beta1^step would be 0), got 1"},
      {"adamw", "beta2 = 1\n", "optimizer 'adamw': beta2 must be below 1 (1 - beta2^step would be 0), got 1"},
      {"momentum", "momentum = 0\nnesterov = true\n", "optimizer 'momentum': nesterov = true needs momentum > 0"},
  });
}

TEST(OptimizerErrors, DefaultsNeedNoSection) {
  RuntimeEnv env;
  const plugin::OptimizerPlugin* adamw = PluginNamed(env, "adamw");
  ASSERT_NE(adamw, nullptr);
  auto created = train::Optimizer::Create(*adamw, nullptr);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_EQ((*created)->hyperparameters().section_path(), "optimizers.adamw");
  EXPECT_EQ(*(*created)->hyperparameters().GetFloat("weight_decay"), 0.01);
  auto slots = (*created)->Slots(DType::kF32, Shape{2, 3});
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[0].name, "m");
  EXPECT_EQ((*slots)[1].name, "v");
}

// A well-formed update of a variable of |dtype| [2] for |optimizer|, for
// the error tests to spoil one argument of.
struct UpdateFixture {
  GraphBuilder b;
  train::UpdateArgs args;
  std::unique_ptr<train::Optimizer> optimizer;

  UpdateFixture(const RuntimeEnv& env, std::string_view name, DType dtype) {
    const plugin::OptimizerPlugin* plugin = PluginNamed(env, name);
    if (plugin == nullptr) return;
    auto created = train::Optimizer::Create(*plugin, nullptr);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created.ok()) return;
    optimizer = std::move(*created);
    args.variable_name = "v";
    args.dtype = dtype;
    args.variable = Var(b, dtype, Shape{2}, "v");
    args.gradient = b.Op("Cast", {b.Const(Tensor::FromVector<double>({1, 2}))}, {{"DstT", AttrValue(dtype)}}, "grad");
    args.learning_rate = b.Op("Cast", {b.Scalar<double>(0.1)}, {{"DstT", AttrValue(dtype)}}, "lr");
    args.step = b.Scalar<int64_t>(1, "step");
    auto slots = optimizer->Slots(dtype, Shape{2});
    EXPECT_TRUE(slots.ok()) << slots.status().ToString();
    if (!slots.ok()) return;
    for (const train::SlotDef& slot : *slots) args.slots.push_back(Var(b, dtype, Shape{2}, "v/" + slot.name));
  }

  std::string Error(const train::HasKernelFn& has_kernel = NoKernels) {
    if (!optimizer) return "";
    auto update = optimizer->BuildUpdate(b, args, has_kernel);
    EXPECT_FALSE(update.ok());
    if (update.ok()) return "";
    EXPECT_EQ(update.status().code(), Code::kInvalidArgument);
    return update.status().message();
  }
};

TEST(OptimizerErrors, OnlyFloatVariablesCanBeTrained) {
  RuntimeEnv env;
  for (const char* name : {"sgd", "adam", "rmsprop"}) {
    UpdateFixture f(env, name, DType::kI32);
    EXPECT_EQ(f.Error(), StrCat("optimizer '", name,
                                "', update of variable 'v': cannot train a variable of dtype i32; "
                                "the update rules take f32 or f64"));
    UpdateFixture half(env, name, DType::kF16);
    EXPECT_EQ(half.Error(DeviceKernels(env)), StrCat("optimizer '", name,
                                                     "', update of variable 'v': cannot train a variable of dtype f16; "
                                                     "the update rules take f32 or f64"));
  }
}

TEST(OptimizerErrors, ArgumentsAreChecked) {
  RuntimeEnv env;
  ASSERT_NE(PluginNamed(env, "adam"), nullptr);
  const std::string prefix = "optimizer 'adam', update of variable 'v': ";
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.variable_name = "";
    EXPECT_EQ(f.Error(), "optimizer 'adam', update of variable '': the variable has no name");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.variable = Output();
    EXPECT_EQ(f.Error(), prefix + "the variable handle is missing");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.gradient = Output();
    EXPECT_EQ(f.Error(), prefix + "the gradient is missing");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    GraphBuilder other;
    for (int i = 0; i < 20; ++i) other.Scalar<float>(1.0f);
    f.args.learning_rate = other.Scalar<float>(0.1f, "other_lr");
    EXPECT_EQ(f.Error(), prefix + "the learning rate is not a tensor of this graph");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.gradient = f.b.Const(Tensor::FromVector<double>({1, 2}), "g64");
    EXPECT_EQ(f.Error(), prefix + "the gradient 'g64' is f64, not f32");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.gradient = f.b.Const(Tensor::FromVector<float>({1, 2, 3}), "g3");
    EXPECT_EQ(f.Error(), prefix + "the gradient 'g3' has shape [3] but the variable 'v' has shape [2]");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.learning_rate = f.b.Const(Tensor::FromVector<float>({0.1f, 0.2f}), "rates");
    EXPECT_EQ(f.Error(), prefix + "the learning rate 'rates' must be a scalar, got shape [2]");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.step = f.b.Scalar<int32_t>(1, "step32");
    EXPECT_EQ(f.Error(), prefix + "the step 'step32' is i32, not i64");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.variable = f.b.Const(Tensor::FromVector<float>({1, 2}), "not_a_handle");
    EXPECT_EQ(f.Error(), prefix + "the variable handle 'not_a_handle' is f32, not resource");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.variable = Var(f.b, DType::kF64, Shape{2}, "w64");
    EXPECT_EQ(f.Error(), prefix + "the variable 'w64' holds f64, but the update is for f32");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.slots.pop_back();
    EXPECT_EQ(f.Error(), prefix + "the optimizer keeps 2 slot variables per variable (m, v) but 1 were given");
  }
  {
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.slots[1] = f.b.Const(Tensor::FromVector<float>({0, 0}), "v_values");
    EXPECT_EQ(f.Error(), prefix + "slot 'v' 'v_values' is f32, not resource");
  }
  {
    // What a fused op's shape function says reaches the caller too.
    UpdateFixture f(env, "adam", DType::kF32);
    f.args.slots[0] = Var(f.b, DType::kF32, Shape{3}, "m3");
    const std::string message = f.Error(DeviceKernels(env));
    EXPECT_NE(message.find(prefix), std::string::npos) << message;
    EXPECT_NE(message.find("ResourceApplyAdam"), std::string::npos) << message;
    EXPECT_NE(message.find("[3]"), std::string::npos) << message;
  }
}

// The plugin's own checks, for hosts that skip Optimizer's: called through
// the C table directly.
TEST(OptimizerErrors, PluginChecksTheArgumentsItIndexes) {
  RuntimeEnv env;
  ASSERT_NE(PluginNamed(env, "adam"), nullptr);
  const plugin::OptimizerPlugin& adam = *PluginNamed(env, "adam");
  auto values = config::ValidateOptions(nullptr, "optimizers.adam", adam.hyperparameters);
  ASSERT_TRUE(values.ok());
  train::EnableGraphServices();
  void* state = nullptr;
  ASSERT_TRUE(plugin::TakeStatus(adam.table->create(plugin::AsOptionsHandle(&*values), &state)).ok());
  weft_update_args_t args{};
  args.struct_size = sizeof(args);
  args.variable_name = "v";
  args.dtype = WEFT_DTYPE_F32;
  args.num_slots = 1;
  weft_value_t out = nullptr;
  Status s = plugin::TakeStatus(adam.table->build_update(state, nullptr, &args, &out));
  EXPECT_EQ(s.message(), "expected 2 slot variables, got 1");
  args.struct_size = 8;
  s = plugin::TakeStatus(adam.table->build_update(state, nullptr, &args, &out));
  EXPECT_EQ(s.message(), "weft_update_args_t.struct_size is 8, smaller than ABI 1.0's");
  adam.table->destroy(state);
}

// --- What the host checks in a plugin's answers -------------------------------------------

// An optimizer table that misbehaves as told: the real plugins cannot be
// made to, and the host must not trust them blindly. Its state is
// g_misbehaviour, which each test sets.
struct Misbehaviour {
  const weft_slot_def_t* slots = nullptr;
  size_t count = 0;
};
Misbehaviour g_misbehaviour;

weft_status_t BadCreate(const weft_options_t*, void** out_state) {
  *out_state = &g_misbehaviour;
  return nullptr;
}
void BadDestroy(void*) {}
weft_status_t BadSlots(void* state, weft_dtype_t, int32_t, const int64_t*, const weft_slot_def_t** out_slots,
                       size_t* out_count) {
  *out_slots = static_cast<Misbehaviour*>(state)->slots;
  *out_count = static_cast<Misbehaviour*>(state)->count;
  return nullptr;
}
// Claims success without naming the node that completes the update.
weft_status_t BadBuild(void*, weft_graph_builder_t*, const weft_update_args_t*, weft_value_t* out_update) {
  *out_update = nullptr;
  return nullptr;
}

const weft_optimizer_plugin_t kBadTable = [] {
  weft_optimizer_plugin_t t{};
  t.struct_size = sizeof(t);
  t.name = "bad";
  t.create = BadCreate;
  t.destroy = BadDestroy;
  t.slots = BadSlots;
  t.build_update = BadBuild;
  return t;
}();

// The message of Slots() when the plugin answers |count| slots at |slots|.
std::string SlotsError(const weft_slot_def_t* slots, size_t count) {
  g_misbehaviour = {slots, count};
  auto optimizer = train::Optimizer::Create(plugin::OptimizerPlugin{"bad", &kBadTable, {}}, config::OptionValues());
  EXPECT_TRUE(optimizer.ok()) << optimizer.status().ToString();
  if (!optimizer.ok()) return "";
  auto answer = (*optimizer)->Slots(DType::kF32, Shape{2});
  EXPECT_FALSE(answer.ok());
  if (answer.ok()) return "";
  EXPECT_EQ(answer.status().code(), Code::kInternal);
  return answer.status().message();
}

weft_slot_def_t SlotDef(const char* name) {
  weft_slot_def_t slot{};
  slot.struct_size = sizeof(slot);
  slot.name = name;
  return slot;
}

TEST(PluginAnswers, BadSlotListsAreRefused) {
  EXPECT_EQ(SlotsError(nullptr, 2), "optimizer 'bad' declared 2 slots but gave none");
  weft_slot_def_t small = SlotDef("m");
  small.struct_size = 8;
  EXPECT_EQ(SlotsError(&small, 1), StrCat("optimizer 'bad': weft_slot_def_t.struct_size is 8, smaller than the ",
                                          WEFT_SLOT_DEF_SIZE_V1_0, " bytes of ABI 1.0"));
  const weft_slot_def_t unnamed[] = {SlotDef("m"), SlotDef("")};
  EXPECT_EQ(SlotsError(unnamed, 2), "optimizer 'bad' declared a slot without a name");
  const weft_slot_def_t twice[] = {SlotDef("m"), SlotDef("v"), SlotDef("m")};
  EXPECT_EQ(SlotsError(twice, 3), "optimizer 'bad' declared slot 'm' twice");
}

TEST(PluginAnswers, SlotsOfANewerSdkAreReadByTheirSize) {
  // A plugin built against a later SDK whose weft_slot_def_t grew.
  struct Grown {
    weft_slot_def_t base;
    double added[3];
  };
  Grown grown[2] = {};
  grown[0].base = SlotDef("m");
  grown[1].base = SlotDef("v");
  grown[0].base.struct_size = grown[1].base.struct_size = sizeof(Grown);
  grown[1].base.initial_value = 0.5;
  g_misbehaviour = {&grown[0].base, 2};
  auto optimizer = train::Optimizer::Create(plugin::OptimizerPlugin{"bad", &kBadTable, {}}, config::OptionValues());
  ASSERT_TRUE(optimizer.ok());
  auto slots = (*optimizer)->Slots(DType::kF32, Shape{2});
  ASSERT_TRUE(slots.ok()) << slots.status().ToString();
  ASSERT_EQ(slots->size(), 2u);
  EXPECT_EQ((*slots)[1].name, "v");
  EXPECT_EQ((*slots)[1].initial_value, 0.5);
}

TEST(PluginAnswers, AnUpdateWithoutAResultIsRefused) {
  g_misbehaviour = {};
  auto optimizer = train::Optimizer::Create(plugin::OptimizerPlugin{"bad", &kBadTable, {}}, config::OptionValues());
  ASSERT_TRUE(optimizer.ok());
  GraphBuilder b;
  train::UpdateArgs args;
  args.variable_name = "v";
  args.variable = Var(b, DType::kF32, Shape{2}, "v");
  args.gradient = b.Const(Tensor::FromVector<float>({1, 2}));
  args.learning_rate = b.Scalar<float>(0.1f);
  args.step = b.Scalar<int64_t>(1);
  auto update = (*optimizer)->BuildUpdate(b, args, NoKernels);
  ASSERT_FALSE(update.ok());
  EXPECT_EQ(update.status().code(), Code::kInternal);
  EXPECT_EQ(update.status().message(), "optimizer 'bad' returned no update for variable 'v'");
}

}  // namespace
}  // namespace weft
