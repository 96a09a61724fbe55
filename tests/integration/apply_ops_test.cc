// The fused optimizer updates (core/ops/training_ops.cc, kernels in
// plugins/devices/cpu/kernels/training.cc) on the CPU device: for each of
// the seven ResourceApply* ops in f32 and f64, the variable and its slots
// after three steps (on every device with the kernel), and the errors of shapes, dtypes, scalars, steps and
// uninitialised slots (which leave every variable untouched).
//
// The expected values come from tests/integration/apply_ops_reference.py, a
// NumPy implementation of torch.optim's update rules as the ops document
// them; its output is pasted below as kCases. Regenerate with
//   /usr/bin/python3 tests/integration/apply_ops_reference.py
// The f32 column is the f64 computation from inputs rounded to f32, so the
// f32 tolerance covers only the kernel's own f32 arithmetic (the script
// checks that a pure-f32 run stays well inside it).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/support/runtime_env.h"

namespace weft {
namespace {

using testing::RuntimeEnv;

struct ApplyCase {
  const char* name;
  const char* op;
  std::vector<std::string> inputs;  // the op's inputs, in order
  bool use_nesterov;
  std::vector<std::pair<std::string, double>> hyper;  // the scalar inputs but 'step'
  std::vector<int64_t> steps;                         // 'step' per run (empty: the op has none)
  std::vector<std::vector<double>> initial;           // the variable, then its slots, in input order
  std::vector<std::vector<double>> f64;               // after three steps, computed in f64
  std::vector<std::vector<double>> f32;               // the same from inputs rounded to f32
};

const Shape kShape{2, 3};

// clang-format off
// From apply_ops_reference.py:
// Grads: {0.5, -1.5, 0.25, -0.125, 2.0, -0.03}, {0.3, -1.1, 0.4, -0.2, 1.7, -0.05}, {0.7, -0.9, 0.1, -0.15, 2.2, -0.02}
const std::vector<std::vector<double>> kGrads = {{0.5, -1.5, 0.25, -0.125, 2.0, -0.03}, {0.3, -1.1, 0.4, -0.2, 1.7, -0.05}, {0.7, -0.9, 0.1, -0.15, 2.2, -0.02}};

const ApplyCase kCases[] = {
    {"GradientDescent", "ResourceApplyGradientDescent", {"var", "lr", "grad"}, false,
     {{"lr", 0.1}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}},
     /*f64=*/{{0.85, -1.65, 0.42499999999999993, 3.0475000000000003, -2.09, 0.76}},
     /*f32=*/{{0.8499999977648258, -1.6499999947845936, 0.42499999813735484, 3.0475000016018745, -2.0900000183284284, 0.7600000001117586}}},
    {"Momentum", "ResourceApplyMomentum", {"var", "accum", "lr", "grad", "momentum"}, false,
     {{"lr", 0.1}, {"momentum", 0.9}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.7375, -1.2945, 0.34624999999999995, 3.086875, -2.585, 0.76963}, {1.375, -3.105, 0.6625, -0.43125, 5.35, -0.0893}},
     /*f32=*/{{0.7374999990686775, -1.2944999999776483, 0.346249999050051, 3.086875001145527, -2.585000012591481, 0.7696299998881667}, {1.3749999701976776, -3.1049999070167544, 0.6624999865889549, -0.4312499985098839, 5.349999964237213, -0.0892999972008169}}},
    {"MomentumFromNonZeroAccum", "ResourceApplyMomentum", {"var", "accum", "lr", "grad", "momentum"}, false,
     {{"lr", 0.05}, {"momentum", 0.5}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.2, -0.3, 0.1, -0.5, 0.4, -0.1}},
     /*f64=*/{{0.8899999999999999, -1.728125, 0.43875, 3.0553125, -1.93, 0.7617499999999999}, {1.0, -1.8625, 0.375, -0.34375, 3.6, -0.065}},
     /*f32=*/{{0.8899999979324639, -1.7281249948311599, 0.43874999850057067, 3.055312501345761, -1.9300000126287342, 0.7617500002151355}, {0.9999999944120646, -1.8624999895691872, 0.3750000046566129, -0.3437500074505806, 3.600000072270632, -0.06499999994412065}}},
    {"Nesterov", "ResourceApplyMomentum", {"var", "accum", "lr", "grad", "momentum"}, true,
     {{"lr", 0.1}, {"momentum", 0.9}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.61375, -1.0150499999999998, 0.286625, 3.1256875, -3.0664999999999996, 0.777667}, {1.375, -3.105, 0.6625, -0.43125, 5.35, -0.0893}},
     /*f32=*/{{0.6137500031851233, -1.0150500115849077, 0.2866250009480864, 3.125687500561588, -3.0665000037923456, 0.7776669995430932}, {1.3749999701976776, -3.1049999070167544, 0.6624999865889549, -0.4312499985098839, 5.349999964237213, -0.0892999972008169}}},
    {"Adam", "ResourceApplyAdam", {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"}, false,
     {{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-08}},
     {1, 2, 3},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.9707803227089767, -1.9705902464851859, 0.4713563897835132, 3.029721844157488, -1.5299086032748421, 0.7790872415127231}, {0.13749999999999996, -0.31049999999999994, 0.06624999999999999, -0.04312499999999999, 0.5349999999999999, -0.008929999999999999}, {0.0008294102500000006, 0.0042642922500000045, 0.00023221506250000024, 7.805376562500008e-05, 0.011719114000000013, 3.795700900000004e-06}},
     /*f32=*/{{0.9707803232552351, -1.9705902472336694, 0.4713563904617415, 3.0297218435513544, -1.5299086026343358, 0.7790872407879443}, {0.13750002980232168, -0.31050006473064207, 0.06625001445412604, -0.043125010132789576, 0.5350001239776603, -0.008930001849159534}, {0.0008293995697177904, 0.004264237431868322, 0.00023221208155236342, 7.805276460963693e-05, 0.011718963632922266, 3.7956521035906703e-06}}},
    {"AdamLaterSteps", "ResourceApplyAdam", {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"}, false,
     {{"lr", 0.05}, {"beta1", 0.8}, {"beta2", 0.99}, {"epsilon", 0.01}},
     {7, 8, 9},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.1, -0.2, 0.05, -0.1, 0.3, -0.01}, {0.04, 0.3, 0.01, 0.02, 0.5, 0.001}},
     /*f64=*/{{0.9460038720274954, -1.9505514833373472, 0.44193271668384265, 3.0414728545558996, -1.5578152572218094, 0.7772350342325504}, {0.3031999999999999, -0.6504, 0.14159999999999998, -0.1292, 1.1216, -0.02096}, {0.047053210000000005, 0.33322095, 0.011999552500000002, 0.020180120625000002, 0.6013645000000001, 0.0010078699}},
     /*f32=*/{{0.9460038926581786, -1.9505515043058461, 0.44193273747571105, 3.041472838244537, -1.5578152353410841, 0.7772350224033032}, {0.30319999017715454, -0.650399980831146, 0.14159999777078616, -0.1292000010251998, 1.1215999841213216, -0.02095999934792517}, {0.04705320235435935, 0.33322093043001877, 0.011999550450605002, 0.020180120050230434, 0.6013644079232172, 0.0010078699388700462}}},
    {"AdamW", "ResourceApplyAdamW", {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "weight_decay", "step", "grad"}, false,
     {{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-08}, {"weight_decay", 0.1}},
     {1, 2, 3},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.9678128866101061, -1.9646260389090024, 0.4698877404607049, 3.0207009899813912, -1.525383186619231, 0.7768096728531754}, {0.13749999999999996, -0.31049999999999994, 0.06624999999999999, -0.04312499999999999, 0.5349999999999999, -0.008929999999999999}, {0.0008294102500000006, 0.0042642922500000045, 0.00023221506250000024, 7.805376562500008e-05, 0.011719114000000013, 3.795700900000004e-06}},
     /*f32=*/{{0.9678128871777953, -1.9646260397012039, 0.46988774114922915, 3.020700989443037, -1.5253831860130742, 0.776809672146}, {0.13750002980232168, -0.31050006473064207, 0.06625001445412604, -0.043125010132789576, 0.5350001239776603, -0.008930001849159534}, {0.0008293995697177904, 0.004264237431868322, 0.00023221208155236342, 7.805276460963693e-05, 0.011718963632922266, 3.7956521035906703e-06}}},
    {"RMSProp", "ResourceApplyRMSProp", {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, false,
     {{"lr", 0.01}, {"rho", 0.9}, {"momentum", 0.5}, {"epsilon", 1e-06}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.8941369853713527, -1.9008972875413919, 0.3968692433902317, 3.1139210864154836, -1.6082800379120303, 0.857435072460634}, {0.07734999999999997, 0.37215, 0.020462499999999998, 0.007115624999999999, 1.0680999999999998, 0.0003378999999999999}, {4.152615986721255, -3.232872284407681, 2.8496560632771772, -3.9287675383044194, 3.974383065717562, -3.252493202564596}},
     /*f32=*/{{0.8941369994502033, -1.9008973010870842, 0.39686925755393015, 3.1139210711397403, -1.608280023655503, 0.8574350576506002}, {0.07735001612901635, 0.3721500766158076, 0.02046250468790526, 0.007115626820176872, 1.0681002661705048, 0.00033790007239728985}, {4.152615518440518, -3.232871905081967, 2.849655747206994, -3.928767135129095, 3.9743826507665534, -3.2524928206672437}}},
    {"RMSPropWithoutMomentum", "ResourceApplyRMSProp", {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, false,
     {{"lr", 0.01}, {"rho", 0.99}, {"momentum", 0.0}, {"epsilon", 1e-08}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.7712518942267204, -1.7968233783915701, 0.29421383877983376, 3.238830536698378, -1.7294880980203806, 0.9684915085717525}, {0.008241250000000006, 0.04213125000000004, 0.002296562500000002, 0.0007741406250000006, 0.11621500000000011, 3.757090000000004e-05}, {7.71083567127308, -4.384704357833069, 2.086703645883145, -5.3911469965152445, 6.45344443105581, -3.2628979258244355}},
     /*f32=*/{{0.7712517900662471, -1.796823286892162, 0.29421374505416537, 3.2388306463553254, -1.7294882032761663, 0.9684916076265067}, {0.008241242100238843, 0.042131210450887094, 0.0022965603870748743, 0.0007741399231701747, 0.11621489390277417, 3.7570864742429025e-05}, {7.710839235623206, -4.384706299666821, 2.086704636901419, -5.391149654526888, 6.453447516733556, -3.262899383888361}}},
    {"CenteredRMSProp", "ResourceApplyCenteredRMSProp", {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, false,
     {{"lr", 0.01}, {"rho", 0.9}, {"momentum", 0.5}, {"epsilon", 1e-06}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
     /*f64=*/{{0.8847368427244808, -1.8923825420459583, 0.38870533826727066, 3.1240961327789245, -1.6183565429450548, 0.8662707244146312}, {0.13749999999999996, -0.31049999999999994, 0.06624999999999999, -0.04312499999999999, 0.5349999999999999, -0.008929999999999999}, {0.07734999999999997, 0.37215, 0.020462499999999998, 0.007115624999999999, 1.0680999999999998, 0.0003378999999999999}, {4.661351038313223, -3.618757096766636, 3.124562508135649, -4.404798851202438, 4.492787536671991, -3.594499176318446}},
     /*f32=*/{{0.8847368555029967, -1.8923825545090567, 0.3887053514327236, 3.1240961188500807, -1.6183565300816511, 0.8662707106316422}, {0.13750002980232168, -0.31050006473064207, 0.06625001445412604, -0.043125010132789576, 0.5350001239776603, -0.008930001849159534}, {0.07735001612901635, 0.3721500766158076, 0.02046250468790526, 0.007115626820176872, 1.0681002661705048, 0.00033790007239728985}, {4.661350652086819, -3.6187567735243835, 3.1245622324240285, -4.404798527746548, 4.49278720814309, -3.5944988394082413}}},
    {"Adagrad", "ResourceApplyAdagrad", {"var", "accum", "lr", "epsilon", "grad"}, false,
     {{"lr", 0.1}, {"epsilon", 1e-10}},
     {},
     {{1.0, -2.0, 0.5, 3.0, -1.5, 0.75}, {0.1, 0.1, 0.1, 0.1, 0.1, 0.1}},
     /*f64=*/{{0.7976712542379849, -1.8007980670620216, 0.3502043608396587, 3.1229996037801113, -1.727036083495183, 0.7812013971322929}, {0.9299999999999999, 4.370000000000001, 0.3325, 0.178125, 11.83, 0.1038}},
     /*f32=*/{{0.7976712509721191, -1.8007980644976056, 0.35020435843831044, 3.122999606660928, -1.727036088288207, 0.7812013972515571}, {0.9299999919533732, 4.37000001102686, 0.33250000655651096, 0.1781250044703484, 11.830000373423104, 0.1038000015065074}}},
};

// clang-format on

template <class T>
Tensor Values(const std::vector<double>& values, const Shape& shape = kShape) {
  std::vector<T> v;
  for (double x : values) v.push_back(static_cast<T>(x));
  return Tensor::FromVector<T>(v, shape);
}

template <class T>
std::vector<double> AsDoubles(const Tensor& t) {
  return std::vector<double>(t.data<T>(), t.data<T>() + t.num_elements());
}

const OpDef& Def(const std::string& op) {
  const OpDef* def = OpRegistry::Global().Find(op);
  EXPECT_NE(def, nullptr) << op;
  return *def;
}

bool IsResource(const OpDef& def, const std::string& input) {
  for (const ArgDef& arg : def.inputs) {
    if (arg.name == input) return arg.fixed_type == DType::kResource;
  }
  return false;
}

// One apply node over fresh variables named after the op's inputs, with
// Assign nodes "init_<name>" and ReadVariable nodes "read_<name>"; 'grad'
// and 'step' are placeholders, the other scalars constants.
struct ApplyGraph {
  GraphBuilder b;
  std::vector<std::string> resources;
};

template <class T>
void BuildApply(ApplyGraph& g, const ApplyCase& c) {
  const DType dtype = DTypeOf<T>();
  const OpDef& def = Def(c.op);
  std::vector<Output> inputs;
  std::size_t hyper = 0;
  for (const std::string& input : c.inputs) {
    if (IsResource(def, input)) {
      Output v = g.b.Op("VarHandle", {}, {{"dtype", AttrValue(dtype)}, {"shape", AttrValue(kShape)}}, input);
      g.b.Op("Assign", {v, g.b.Const(Values<T>(c.initial[g.resources.size()]))}, {}, "init_" + input);
      g.b.Op("ReadVariable", {v}, {{"dtype", AttrValue(dtype)}}, "read_" + input);
      g.resources.push_back(input);
      inputs.push_back(v);
    } else if (input == "grad") {
      inputs.push_back(g.b.Placeholder(dtype, kShape, "grad"));
    } else if (input == "step") {
      inputs.push_back(g.b.Placeholder(DType::kI64, Shape{}, "step"));
    } else {
      EXPECT_EQ(c.hyper[hyper].first, input);
      inputs.push_back(g.b.Scalar<T>(static_cast<T>(c.hyper[hyper++].second), input));
    }
  }
  AttrMap attrs = {{"T", AttrValue(dtype)}};
  if (std::string(c.op) == "ResourceApplyMomentum") attrs["use_nesterov"] = AttrValue(c.use_nesterov);
  g.b.AddNode(c.op, inputs, attrs, "apply");
}

template <class T>
void ExpectThreeSteps(const ApplyCase& c, double rtol, const std::string& device) {
  SCOPED_TRACE(StrCat(c.name, " in ", DTypeName(DTypeOf<T>()), " on ", device));
  RuntimeEnv env;
  ApplyGraph g;
  {
    auto scope = g.b.DeviceScope(device);
    BuildApply<T>(g, c);
  }
  auto session = env.Session(g.b);
  std::vector<std::string> inits;
  for (const std::string& r : g.resources) inits.push_back("init_" + r);
  ASSERT_TRUE(session->Run({}, {}, inits, nullptr).ok());
  for (std::size_t step = 0; step < kGrads.size(); ++step) {
    std::vector<std::pair<std::string, Tensor>> feeds = {{"grad", Values<T>(kGrads[step])}};
    if (!c.steps.empty()) feeds.emplace_back("step", Tensor::Scalar<int64_t>(c.steps[step]));
    Status s = session->Run(feeds, {}, {"apply"}, nullptr);
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s.ToString();
  }
  const std::vector<std::vector<double>>& want = std::is_same_v<T, float> ? c.f32 : c.f64;
  for (std::size_t k = 0; k < g.resources.size(); ++k) {
    std::vector<Tensor> out;
    Status s = session->Run({}, {"read_" + g.resources[k]}, {}, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const std::vector<double> got = AsDoubles<T>(out[0]);
    ASSERT_EQ(got.size(), want[k].size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[k][i], rtol * std::fabs(want[k][i])) << g.resources[k] << "[" << i << "]";
    }
  }
}

// Every device with a kernel for the op: the CPU, and OpenCL where its
// plugin is built.
std::vector<std::string> DevicesWith(const std::string& op) {
  RuntimeEnv env;
  std::vector<std::string> names;
  for (const auto& d : env.devices()->devices()) {
    if (!d->kernels().ForOp(op).empty()) names.push_back(d->name());
  }
  return names;
}

TEST(ApplyOps, ThreeStepsMatchTheReferenceInF64) {
  for (const ApplyCase& c : kCases) {
    for (const std::string& device : DevicesWith(c.op)) ExpectThreeSteps<double>(c, 1e-13, device);
  }
}

TEST(ApplyOps, ThreeStepsMatchTheReferenceInF32) {
  for (const ApplyCase& c : kCases) {
    for (const std::string& device : DevicesWith(c.op)) ExpectThreeSteps<float>(c, 1e-6, device);
  }
}

TEST(ApplyOps, EveryOpIsCovered) {
  std::vector<std::string> ops;
  for (const OpDef* op : OpRegistry::Global().All()) {
    if (op->name.starts_with("ResourceApply")) ops.push_back(op->name);
  }
  EXPECT_EQ(ops.size(), 7u);
  for (const std::string& op : ops) {
    bool found = false;
    for (const ApplyCase& c : kCases) found = found || op == c.op;
    EXPECT_TRUE(found) << op << " has no case";
  }
}

// --- Errors --------------------------------------------------------------------------

const char* const kPrefix = "node 'apply' (ResourceApplyAdam) on /device:CPU:0: ";

// An Adam step over variables var, m and v of |shapes| (declared of
// unknown rank, so only the kernel sees a mismatch) and |dtypes|, with a
// fed grad, lr and step. |init| says which variables are assigned.
class AdamGraph {
 public:
  AdamGraph(const std::vector<Shape>& shapes, const std::vector<DType>& dtypes, std::vector<bool> init = {})
      : init_(init.empty() ? std::vector<bool>(3, true) : std::move(init)) {
    std::vector<Output> vars;
    for (std::size_t k = 0; k < 3; ++k) {
      const DType d = dtypes[k];
      Output h =
          b_.Op("VarHandle", {}, {{"dtype", AttrValue(d)}, {"shape", AttrValue(Shape::UnknownRank())}}, kNames[k]);
      std::vector<double> values(static_cast<std::size_t>(shapes[k].num_elements()), Initial(k));
      const Tensor t = d == DType::kF64 ? Values<double>(values, shapes[k]) : Values<float>(values, shapes[k]);
      b_.Op("Assign", {h, b_.Const(t)}, {}, StrCat("init_", kNames[k]));
      b_.Op("ReadVariable", {h}, {{"dtype", AttrValue(d)}}, StrCat("read_", kNames[k]));
      vars.push_back(h);
    }
    b_.AddNode(
        "ResourceApplyAdam",
        {vars[0], vars[1], vars[2], b_.Placeholder(DType::kF32, Shape::UnknownRank(), "lr"), b_.Scalar<float>(0.9f),
         b_.Scalar<float>(0.999f), b_.Scalar<float>(1e-8f), b_.Placeholder(DType::kI64, Shape::UnknownRank(), "step"),
         b_.Placeholder(DType::kF32, Shape::UnknownRank(), "grad")},
        {{"T", AttrValue(DType::kF32)}}, "apply");
    session_ = env_.Session(b_);
    for (std::size_t k = 0; k < 3; ++k) {
      if (init_[k]) {
        EXPECT_TRUE(session_->Run({}, {}, {StrCat("init_", kNames[k])}, nullptr).ok());
      }
    }
  }

  Status Step(const Tensor& grad, const Tensor& lr = Tensor::Scalar<float>(0.1f),
              const Tensor& step = Tensor::Scalar<int64_t>(1)) {
    return session_->Run({{"grad", grad}, {"lr", lr}, {"step", step}}, {}, {"apply"}, nullptr);
  }

  // |s| is the error |code| with |message| (after the node's prefix), and
  // every assigned variable still holds its initial value.
  void ExpectFailedUntouched(const Status& s, Code code, std::string_view message) {
    EXPECT_EQ(s.code(), code);
    EXPECT_EQ(s.message(), StrCat(kPrefix, message));
    for (std::size_t k = 0; k < 3; ++k) {
      if (!init_[k]) continue;
      std::vector<Tensor> out;
      Status read = session_->Run({}, {StrCat("read_", kNames[k])}, {}, &out);
      ASSERT_TRUE(read.ok()) << read.ToString();
      const Tensor& t = out[0];
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const double got = t.dtype() == DType::kF64 ? t.data<double>()[i] : t.data<float>()[i];
        EXPECT_EQ(got, Initial(k)) << kNames[k] << "[" << i << "]";
      }
    }
  }

 private:
  static constexpr const char* kNames[] = {"var", "m", "v"};
  static double Initial(std::size_t k) { return 1.0 + static_cast<double>(k); }
  std::vector<bool> init_;
  RuntimeEnv env_;
  GraphBuilder b_;
  std::unique_ptr<runtime::Session> session_;
};

const std::vector<DType> kF32s = {DType::kF32, DType::kF32, DType::kF32};
Tensor Grad() { return Values<float>({1, 2, 3, 4, 5, 6}); }

TEST(ApplyOps, GradShapeMismatchIsAnErrorAndChangesNothing) {
  AdamGraph g({kShape, kShape, kShape}, kF32s);
  g.ExpectFailedUntouched(g.Step(Values<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2})), Code::kInvalidArgument,
                          "'grad' has shape [3,2] but variable 'var' (input 'var') has shape [2,3]");
}

TEST(ApplyOps, SlotShapeMismatchIsAnError) {
  AdamGraph g({kShape, kShape, Shape{6}}, kF32s);
  g.ExpectFailedUntouched(g.Step(Grad()), Code::kInvalidArgument,
                          "variable 'v' (input 'v') has shape [6] but variable 'var' (input 'var') has shape [2,3]");
}

TEST(ApplyOps, UninitialisedSlotIsAnError) {
  AdamGraph g({kShape, kShape, kShape}, kF32s, {true, false, true});
  g.ExpectFailedUntouched(g.Step(Grad()), Code::kFailedPrecondition,
                          "variable \"m\" (f32<unknown>) is read before it was assigned a value; run its initializer "
                          "first");
}

TEST(ApplyOps, VariableOfAnotherDtypeIsAnError) {
  AdamGraph g({kShape, kShape, kShape}, {DType::kF32, DType::kF64, DType::kF32});
  g.ExpectFailedUntouched(g.Step(Grad()), Code::kInvalidArgument, "variable 'm' (input 'm') holds f64, not f32");
}

TEST(ApplyOps, NonScalarHyperParameterIsAnError) {
  AdamGraph g({kShape, kShape, kShape}, kF32s);
  g.ExpectFailedUntouched(g.Step(Grad(), Tensor::FromVector<float>({0.1f, 0.2f})), Code::kInvalidArgument,
                          "'lr' must be a scalar, got shape [2]");
  g.ExpectFailedUntouched(g.Step(Grad(), Tensor::Scalar<float>(0.1f), Tensor::FromVector<int64_t>({1})),
                          Code::kInvalidArgument, "'step' must be a scalar, got shape [1]");
}

TEST(ApplyOps, StepBelowOneIsAnError) {
  AdamGraph g({kShape, kShape, kShape}, kF32s);
  g.ExpectFailedUntouched(g.Step(Grad(), Tensor::Scalar<float>(0.1f), Tensor::Scalar<int64_t>(0)),
                          Code::kInvalidArgument, "'step' must be at least 1 (updates are counted from 1), got 0");
}

TEST(ApplyOps, OneVariableAsTwoInputsIsAnError) {
  // Momentum with the variable as its own accumulator: the kernel would
  // lock it twice (and alias the two updates).
  RuntimeEnv env;
  GraphBuilder b;
  Output var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(kShape)}}, "var");
  b.Op("Assign", {var, b.Const(Values<double>(kGrads[0]))}, {}, "init");
  b.Op("ReadVariable", {var}, {{"dtype", AttrValue(DType::kF64)}}, "read");
  b.AddNode("ResourceApplyMomentum",
            {var, var, b.Scalar<double>(0.1), b.Const(Values<double>(kGrads[1])), b.Scalar<double>(0.9)},
            {{"T", AttrValue(DType::kF64)}}, "apply");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  Status s = session->Run({}, {}, {"apply"}, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'apply' (ResourceApplyMomentum) on /device:CPU:0: variable \"var\" is locked twice in one compute");
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"read"}, {}, &out).ok());
  EXPECT_EQ(AsDoubles<double>(out[0]), kGrads[0]);
}

TEST(ApplyOps, ShapeInferenceRejectsWhatItCanSee) {
  // Declared shapes and constant inputs: the graph does not build.
  {
    GraphBuilder b;
    Output var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(kShape)}}, "var");
    b.AddNode("ResourceApplyGradientDescent", {var, b.Scalar<float>(0.1f), b.Const(Values<float>({1, 2, 3}, Shape{3}))},
              {{"T", AttrValue(DType::kF32)}}, "apply");
    EXPECT_NE(b.status().message().find("'grad' has shape [3] but 'var' has shape [2,3]; the variable, its slots and "
                                        "the gradient must have one shape"),
              std::string::npos)
        << b.status().ToString();
  }
  {
    GraphBuilder b;
    Output var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(kShape)}}, "var");
    Output accum =
        b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(Shape{3, 2})}}, "accum");
    b.AddNode("ResourceApplyAdagrad",
              {var, accum, b.Scalar<double>(0.1), b.Scalar<double>(1e-10), b.Const(Values<double>(kGrads[0]))},
              {{"T", AttrValue(DType::kF64)}}, "apply");
    EXPECT_NE(b.status().message().find("'accum' has shape [3,2] but 'var' has shape [2,3]"), std::string::npos)
        << b.status().ToString();
  }
  {
    GraphBuilder b;
    Output var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(kShape)}}, "var");
    b.AddNode("ResourceApplyGradientDescent",
              {var, b.Const(Tensor::FromVector<float>({0.1f})), b.Const(Values<float>(kGrads[0]))},
              {{"T", AttrValue(DType::kF32)}}, "apply");
    EXPECT_NE(b.status().message().find("'lr' must be a scalar, got shape [1]"), std::string::npos)
        << b.status().ToString();
  }
}

}  // namespace
}  // namespace weft
