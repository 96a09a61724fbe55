// What the optimizer plugins share: an update rule as a C++ class, turned
// into the SDK's optimizer table, and the pieces every rule uses (declaring
// and checking hyper-parameters, coupled weight decay, reading and saving
// slots, applying the step). Sees the SDK only.
//
// A plugin defines its rule and its hyper-parameters, then:
//
//   WEFT_OPTIMIZER_PLUGIN("adam", "Adam (Kingma & Ba), as torch.optim.Adam", AdamRule, kHyper)
//
// Every rule follows torch.optim's update of the same name. When the
// variable's device has the fused apply op (core/ops/training_ops.cc) the
// rule emits it; otherwise it composes the same arithmetic from primitive
// ops, reading each variable once and writing it once.
#ifndef WEFT_PLUGINS_OPTIMIZERS_RULE_H_
#define WEFT_PLUGINS_OPTIMIZERS_RULE_H_

#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "weft/sdk/graph.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/option_defs.h"
#include "weft/sdk/options.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/struct.h"

namespace weft::optimizers {

// Hyper-parameters are declared with the SDK's option builders: a FLOAT
// with a default and an inclusive range, a BOOL.
using sdk::BoolOption;
using sdk::FloatOption;

// The weight_decay hyper-parameter every rule declares; |doc| defaults to
// the coupled (L2) form most rules use.
inline weft_option_def_t WeightDecayOption(
    const char* default_value, const char* doc = "L2 penalty added to the gradient: grad + weight_decay * var.") {
  return FloatOption("weight_decay", default_value, doc, 0, 1e6);
}

inline weft_option_def_t EpsilonOption(const char* default_value) {
  return FloatOption("epsilon", default_value, "Added to the denominator for numerical stability.", 0, 1);
}

// |v| as a message shows it ("1", "0.25").
inline std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// Rejects a combination of hyper-parameters the declared ranges cannot
// express; the host prefixes the message with the optimizer's name.
inline void Require(bool ok, const std::string& message) {
  if (!ok) throw sdk::Error(WEFT_INVALID_ARGUMENT, message);
}

inline weft_slot_def_t Slot(const char* name, double initial_value) {
  auto s = sdk::Make<weft_slot_def_t>();
  s.name = name;
  s.initial_value = initial_value;
  return s;
}

// The values one update sees, with shorthands for what every rule emits.
struct Update {
  sdk::Graph& g;
  const weft_update_args_t& args;

  weft_dtype_t dtype() const { return args.dtype; }
  weft_value_t var() const { return args.variable; }
  weft_value_t lr() const { return args.learning_rate; }
  weft_value_t slot(std::size_t i) const { return args.slots[i]; }
  // A scalar constant of the variable's dtype.
  weft_value_t Scalar(double v) { return g.Scalar(args.dtype, v); }
  // The 1-based step as a scalar of the variable's dtype.
  weft_value_t StepAsFloat() { return g.Op("Cast", "t", {args.step}, {sdk::Attr::Type("DstT", args.dtype)}); }
  weft_value_t ReadSlot(std::size_t i, const char* name) { return g.Read(slot(i), args.dtype, name); }
  weft_value_t SaveSlot(std::size_t i, weft_value_t value, const char* name) {
    return g.Assign(slot(i), value, args.dtype, name);
  }
  // For a sparse update (build_sparse_update): the rows named by
  // args.indices of |variable| (the variable or a slot).
  weft_value_t Rows(weft_value_t variable, const char* name) {
    return g.Op("ResourceGather", name, {variable, args.indices}, {sdk::Attr::Type("dtype", args.dtype)});
  }
  // variable[indices] += delta, rows of the update's indices.
  weft_value_t AddRows(weft_value_t variable, weft_value_t delta, const char* name) {
    return g.Op("ResourceScatterAdd", name, {variable, args.indices, delta}, {sdk::Attr::Type("dtype", args.dtype)});
  }
  // var -= delta.
  weft_value_t Subtract(weft_value_t delta) {
    return g.Op("AssignSub", "apply", {args.variable, delta}, {sdk::Attr::Type("dtype", args.dtype)});
  }
  // One node that runs after every node of |done|: the update's result.
  weft_value_t Group(const std::vector<weft_value_t>& done) {
    const weft_graph_api_t* api = sdk::host()->graph;
    weft_node_builder_t* node = api->node_begin(g.get(), "NoOp", "done");
    for (weft_value_t d : done) api->node_add_control_input(node, d);
    weft_value_t out = nullptr;
    size_t count = 0;
    sdk::ThrowIfError(api->node_finish(node, &out, 1, &count));
    return out;
  }
};

// grad + weight_decay * var (PyTorch's coupled weight decay), or the
// gradient itself when weight_decay is 0.
inline weft_value_t WithWeightDecay(Update& u, double weight_decay) {
  if (weight_decay == 0) return u.args.gradient;
  weft_value_t var = u.g.Read(u.args.variable, u.dtype(), "decay_read");
  return u.g.Add(u.args.gradient, u.g.Mul(u.Scalar(weight_decay), var, "decay"), "decayed_grad");
}

// A rule: constructed from the validated hyper-parameters (throwing
// sdk::Error for a combination it cannot run), it lists its slots and
// emits one variable's update.
//
// A rule that can update only some rows of a variable (a sparse gradient,
// see build_sparse_update in weft_optimizer.h) also defines
//
//   weft_value_t BuildSparse(Update& u);  // nullptr: not with these hyper-parameters
//
// reading u.args.indices and the gradient's rows; the plugin table then
// offers build_sparse_update.
class Rule {
 public:
  explicit Rule(std::vector<weft_slot_def_t> slots = {}) : slots_(std::move(slots)) {}
  virtual ~Rule() = default;
  const std::vector<weft_slot_def_t>& Slots() const { return slots_; }
  // Returns the node that completes the update.
  virtual weft_value_t Build(Update& u) = 0;

 protected:
  std::vector<weft_slot_def_t> slots_;
};

template <class R>
weft_status_t Create(const weft_options_t* options, void** out_state) {
  return sdk::Guard([&] { *out_state = new R(options); });
}

template <class R>
void Destroy(void* state) {
  delete static_cast<R*>(state);
}

inline weft_status_t SlotsOf(void* state, weft_dtype_t, int32_t, const int64_t*, const weft_slot_def_t** out_slots,
                             size_t* out_count) {
  return sdk::Guard([&] {
    const auto& slots = static_cast<Rule*>(state)->Slots();
    *out_slots = slots.empty() ? nullptr : slots.data();
    *out_count = slots.size();
  });
}

// The checks every update makes of what the host passed: the struct's
// version (|sparse|: ABI 1.1 with indices), the dtype, the slot count.
inline void CheckUpdateArgs(const weft_update_args_t* args, const Rule& rule, bool sparse) {
  if (args->struct_size < WEFT_UPDATE_ARGS_SIZE_V1_0) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "weft_update_args_t.struct_size is " + std::to_string(args->struct_size) +
                                                ", smaller than ABI 1.0's");
  }
  if (sparse && (args->struct_size < WEFT_UPDATE_ARGS_SIZE_V1_1 || args->indices == nullptr)) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "a sparse update needs weft_update_args_t.indices (ABI 1.1)");
  }
  if (args->dtype != WEFT_DTYPE_F32 && args->dtype != WEFT_DTYPE_F64) {
    const char* name = weft_dtype_name(args->dtype);
    throw sdk::Error(WEFT_INVALID_ARGUMENT, std::string("cannot train a variable of dtype ") +
                                                (name != nullptr ? name : "(unknown)") +
                                                "; the update rules take f32 or f64");
  }
  // The rules index args->slots by position: a short list would be read
  // past its end.
  if (args->num_slots != rule.Slots().size()) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "expected " + std::to_string(rule.Slots().size()) +
                                                " slot variables, got " + std::to_string(args->num_slots));
  }
}

inline weft_status_t BuildUpdate(void* state, weft_graph_builder_t* graph, const weft_update_args_t* args,
                                 weft_value_t* out_update) {
  return sdk::Guard([&] {
    Rule* rule = static_cast<Rule*>(state);
    CheckUpdateArgs(args, *rule, false);
    sdk::Graph g(graph);
    Update u{g, *args};
    *out_update = rule->Build(u);
  });
}

// Whether rule |R| has a sparse form.
template <class R>
constexpr bool kHasSparse = requires(R& r, Update& u) {
  r.BuildSparse(u);
};

template <class R>
weft_status_t BuildSparseUpdate(void* state, weft_graph_builder_t* graph, const weft_update_args_t* args,
                                weft_value_t* out_update) {
  return sdk::Guard([&] {
    R* rule = static_cast<R*>(state);
    CheckUpdateArgs(args, *rule, true);
    sdk::Graph g(graph);
    Update u{g, *args};
    *out_update = rule->BuildSparse(u);
  });
}

}  // namespace weft::optimizers

// Defines the plugin entry point for rule |R| named |NAME|, with the
// hyper-parameters |HYPER| (a C array or a std::array of weft_option_def_t).
#define WEFT_OPTIMIZER_PLUGIN(NAME, DESCRIPTION, R, HYPER)                                              \
  namespace {                                                                                           \
  const weft_plugin_t* Describe() {                                                                     \
    static const weft_optimizer_plugin_t table = [] {                                                   \
      auto t = ::weft::sdk::Make<weft_optimizer_plugin_t>();                                            \
      t.name = NAME;                                                                                    \
      t.hyperparameters = std::data(HYPER);                                                             \
      t.num_hyperparameters = std::size(HYPER);                                                         \
      t.create = ::weft::optimizers::Create<R>;                                                         \
      t.destroy = ::weft::optimizers::Destroy<R>;                                                       \
      t.slots = ::weft::optimizers::SlotsOf;                                                            \
      t.build_update = ::weft::optimizers::BuildUpdate;                                                 \
      if constexpr (::weft::optimizers::kHasSparse<R>) {                                                \
        t.build_sparse_update = ::weft::optimizers::BuildSparseUpdate<R>;                               \
      }                                                                                                 \
      return t;                                                                                         \
    }();                                                                                                \
    static const weft_plugin_t plugin = [] {                                                            \
      weft_plugin_t p = ::weft::sdk::DescribePlugin(NAME, "0.1.0", DESCRIPTION, WEFT_PLUGIN_OPTIMIZER); \
      p.optimizer = &table;                                                                             \
      return p;                                                                                         \
    }();                                                                                                \
    return &plugin;                                                                                     \
  }                                                                                                     \
  }                                                                                                     \
  WEFT_SDK_DEFINE_PLUGIN(Describe)

#endif  // WEFT_PLUGINS_OPTIMIZERS_RULE_H_
