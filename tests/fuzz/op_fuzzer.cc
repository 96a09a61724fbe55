// libFuzzer target: single ops. The input names an op (its name, then a NUL
// byte), and the bytes after it choose the op's attrs (dtypes from its
// allowed sets, ints and floats from small values and edge values: 2^31,
// 2^62, INT64_MIN, NaN, inf, -0, the smallest subnormal, ...) and small
// constant inputs (rank 0 to 4, dims 0 to 3, edge values). The one-node
// graph is built and run on the CPU plugin. An error status is a fine
// answer; a crash, a sanitizer report or a hang is a bug.
//
// The seed corpus (tests/fuzz/corpus/op) has an input per op of the
// conformance cases; tests/fuzz/make_op_corpus.py writes it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/graph/builder.h"
#include "core/ops/control_flow_ops.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/op_kernel.h"
#include "core/runtime/session.h"
#include "core/tensor/size.h"
#include "tests/fuzz/cpu_env.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

// Reads the fuzz input a byte at a time; past the end every byte is 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // Mostly small numbers, sometimes an edge value.
  int64_t Int() {
    static constexpr int64_t kEdges[] = {int64_t{1} << 31,
                                         int64_t{1} << 32,
                                         int64_t{1} << 62,
                                         INT64_MAX,
                                         INT64_MIN,
                                         INT32_MAX,
                                         INT32_MIN,
                                         -1,
                                         0,
                                         255,
                                         65536,
                                         -(int64_t{1} << 31)};
    const uint8_t b = Byte();
    if (b < 224) return static_cast<int64_t>(b % 12) - 3;
    return kEdges[b % (sizeof kEdges / sizeof kEdges[0])];
  }
  double Float() {
    static const double kEdges[] = {0.0,
                                    -0.0,
                                    1.0,
                                    -1.0,
                                    0.5,
                                    -2.5,
                                    3.0,
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<float>::denorm_min(),
                                    std::numeric_limits<float>::max(),
                                    std::numeric_limits<float>::lowest(),
                                    std::numeric_limits<double>::denorm_min(),
                                    std::numeric_limits<double>::max(),
                                    65504.0,
                                    1e-8};
    const uint8_t b = Byte();
    if (b < 128) return (static_cast<double>(b) - 64.0) / 8.0;
    return kEdges[b % (sizeof kEdges / sizeof kEdges[0])];
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Ops a one-node graph of constants cannot run, or that must not run here:
// variables and queues (resource handles), files, frames, feeds.
bool Skipped(const OpDef& op) {
  if (op.name.empty() || op.name[0] == '_' || ops::IsControlFlowOp(op.name)) return true;
  static const char* const kSkipped[] = {"Placeholder", "Const", "Save", "SaveShard", "Restore"};
  for (const char* name : kSkipped) {
    if (op.name == name) return true;
  }
  for (const auto* args : {&op.inputs, &op.outputs}) {
    for (const ArgDef& arg : *args) {
      if (arg.fixed_type == DType::kResource) return true;
    }
  }
  return false;
}

const std::vector<DType>& DataTypes() {
  static const std::vector<DType> types = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                                           DType::kI16, DType::kI32, DType::kI64, DType::kU8,   DType::kBool};
  return types;
}

Tensor MakeTensor(Reader& in, DType dtype) {
  const int rank = in.Byte() % 5;
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i) dims.push_back(in.Byte() % 4);
  const Shape shape(dims);
  if (dtype == DType::kString) {
    std::vector<std::string> values(static_cast<std::size_t>(shape.num_elements()));
    for (auto& v : values) v = std::string(in.Byte() % 3, 'a');
    return Tensor::Strings(values, shape);
  }
  auto t = Tensor::Allocate(dtype, shape);
  if (!t.ok()) return Tensor::Scalar<float>(0);
  for (int64_t i = 0; i < t->num_elements(); ++i) {
    const double f = in.Float();
    const int64_t n = in.Int();
    switch (dtype) {
      case DType::kF32: t->data<float>()[i] = static_cast<float>(f); break;
      case DType::kF64: t->data<double>()[i] = f; break;
      case DType::kF16: t->data<uint16_t>()[i] = sdk::DoubleToHalf(f); break;
      case DType::kBF16: t->data<uint16_t>()[i] = sdk::DoubleToBfloat16(f); break;
      case DType::kI8: t->data<int8_t>()[i] = static_cast<int8_t>(n); break;
      case DType::kI16: t->data<int16_t>()[i] = static_cast<int16_t>(n); break;
      case DType::kI32: t->data<int32_t>()[i] = static_cast<int32_t>(n); break;
      case DType::kI64: t->data<int64_t>()[i] = n; break;
      case DType::kU8: t->data<uint8_t>()[i] = static_cast<uint8_t>(n); break;
      case DType::kBool: t->data<bool>()[i] = (n & 1) != 0; break;
      default: break;
    }
  }
  return std::move(*t);
}

// The attrs of |op| from the input; nullopt when one cannot be made.
std::optional<AttrMap> MakeAttrs(Reader& in, const OpDef& op) {
  AttrMap attrs;
  for (const AttrDef& attr : op.attrs) {
    bool is_count = false;
    for (const ArgDef& arg : op.inputs) is_count |= arg.number_attr == attr.name;
    for (const ArgDef& arg : op.outputs) is_count |= arg.number_attr == attr.name;
    switch (attr.type) {
      case AttrType::kType: {
        const std::vector<DType>& pool = attr.allowed_types.empty() ? DataTypes() : attr.allowed_types;
        attrs[attr.name] = AttrValue(pool[in.Byte() % pool.size()]);
        break;
      }
      case AttrType::kTypeList: {
        std::vector<DType> types(in.Byte() % 4);
        for (DType& t : types) t = DataTypes()[in.Byte() % DataTypes().size()];
        attrs[attr.name] = AttrValue(types);
        break;
      }
      case AttrType::kInt: attrs[attr.name] = AttrValue(is_count ? int64_t{1} + in.Byte() % 3 : in.Int()); break;
      case AttrType::kFloat: attrs[attr.name] = AttrValue(in.Float()); break;
      case AttrType::kBool: attrs[attr.name] = AttrValue((in.Byte() & 1) != 0); break;
      case AttrType::kString:
        if (!attr.allowed_strings.empty()) {
          attrs[attr.name] = AttrValue(attr.allowed_strings[in.Byte() % attr.allowed_strings.size()]);
        } else {
          attrs[attr.name] = AttrValue(std::string(in.Byte() % 3, 'x'));
        }
        break;
      case AttrType::kIntList: {
        std::vector<int64_t> values(in.Byte() % 6);
        for (int64_t& v : values) v = in.Int();
        attrs[attr.name] = AttrValue(values);
        break;
      }
      case AttrType::kFloatList: {
        std::vector<double> values(in.Byte() % 4);
        for (double& v : values) v = in.Float();
        attrs[attr.name] = AttrValue(values);
        break;
      }
      case AttrType::kShape: {
        std::vector<int64_t> dims(in.Byte() % 4);
        for (int64_t& d : dims) d = in.Int();
        attrs[attr.name] = AttrValue(Shape(dims));
        break;
      }
      default:
        if (!attr.default_value) return std::nullopt;  // a tensor or function attr: not fuzzed
        break;
    }
  }
  return attrs;
}

fuzz::CpuEnv* g_env = nullptr;

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::g_env = weft::fuzz::LoadCpuEnv("op_fuzzer");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  const void* nul = std::memchr(data, 0, size);
  if (nul == nullptr) return 0;
  const std::string name(reinterpret_cast<const char*>(data), static_cast<const uint8_t*>(nul) - data);
  const OpDef* op = OpRegistry::Global().Find(name);
  if (op == nullptr || Skipped(*op)) return 0;
  const std::size_t used = name.size() + 1;
  Reader in(data + used, size - used);
  std::optional<AttrMap> attrs = MakeAttrs(in, *op);
  if (!attrs) return 0;
  GraphBuilder b;
  std::vector<Output> inputs;
  for (const ArgDef& arg : op->inputs) {
    std::vector<DType> types;
    if (!arg.type_list_attr.empty()) {
      auto it = attrs->find(arg.type_list_attr);
      if (it != attrs->end()) types = it->second.get<std::vector<DType>>();
    } else {
      DType t = arg.fixed_type;
      if (t == DType::kInvalid) {
        auto it = attrs->find(arg.type_attr);
        if (it == attrs->end()) return 0;
        t = it->second.get<DType>();
      }
      int64_t count = 1;
      if (!arg.number_attr.empty()) count = (*attrs)[arg.number_attr].get<int64_t>();
      types.assign(static_cast<std::size_t>(count), t);
    }
    for (DType t : types) inputs.push_back(b.Const(MakeTensor(in, t)));
  }
  b.AddNode(op->name, inputs, *attrs, "op");
  auto graph = b.Build();
  if (!graph.ok()) return 0;
  // The op's own kernel, not a constant folded on the host (the optimizer
  // has a fuzz target of its own).
  runtime::SessionOptions options;
  options.optimizer.level = 0;
  auto session = runtime::Session::Create(std::move(*graph), g_env->devices, options);
  if (!session.ok()) return 0;
  const Graph::Node* node = (*session)->graph().Find("op");
  std::vector<std::string> fetches;
  for (int i = 0; i < node->num_outputs(); ++i) fetches.push_back(InputRefString("op", i));
  std::vector<Tensor> out;
  (*session)
      ->Run({}, fetches, fetches.empty() ? std::vector<std::string>{"op"} : std::vector<std::string>{}, &out)
      .IgnoreError();
  return 0;
}
