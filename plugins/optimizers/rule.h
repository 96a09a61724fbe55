// What the optimizer plugins share: an update rule as a C++ class, turned
// into the SDK's optimizer table, and the pieces every rule uses (reading
// hyper-parameters, coupled weight decay, slot handles). Sees the SDK only.
//
// A plugin defines its rule and its hyper-parameters, then:
//
//   WEFT_OPTIMIZER_PLUGIN("adam", "Adam (Kingma & Ba), as torch.optim.Adam", AdamRule, kHyper)
#ifndef WEFT_PLUGINS_OPTIMIZERS_RULE_H_
#define WEFT_PLUGINS_OPTIMIZERS_RULE_H_

#include <memory>
#include <string>
#include <vector>

#include "weft/sdk/graph.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/options.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/struct.h"

namespace weft::optimizers {

// A FLOAT hyper-parameter with a default and an inclusive range.
inline weft_option_def_t FloatOption(const char* key, const char* default_value, const char* doc, double min,
                                     double max) {
  auto d = sdk::Make<weft_option_def_t>();
  d.key = key;
  d.type = WEFT_OPTION_FLOAT;
  d.default_value = default_value;
  d.doc = doc;
  d.has_min = 1;
  d.min_value = min;
  d.has_max = 1;
  d.max_value = max;
  return d;
}

inline weft_option_def_t BoolOption(const char* key, const char* default_value, const char* doc) {
  auto d = sdk::Make<weft_option_def_t>();
  d.key = key;
  d.type = WEFT_OPTION_BOOL;
  d.default_value = default_value;
  d.doc = doc;
  return d;
}

// The weight_decay hyper-parameter every rule declares.
inline weft_option_def_t WeightDecayOption(const char* default_value, const char* doc) {
  return FloatOption("weight_decay", default_value, doc, 0, 1e6);
}

// The values one update sees, with names for the node hints.
struct Update {
  sdk::Graph& g;
  const weft_update_args_t& args;
  weft_dtype_t dtype() const { return args.dtype; }
  weft_value_t slot(std::size_t i) const { return args.slots[i]; }
  weft_value_t Scalar(double v) { return g.Scalar(args.dtype, v); }
};

// grad + weight_decay * var (PyTorch's coupled weight decay), or grad
// itself when weight_decay is 0.
inline weft_value_t WithWeightDecay(Update& u, double weight_decay) {
  if (weight_decay == 0) return u.args.gradient;
  weft_value_t var = u.g.Read(u.args.variable, u.dtype(), "decay_read");
  return u.g.Add(u.args.gradient, u.g.Mul(u.Scalar(weight_decay), var, "decay"), "decayed_grad");
}

// A rule: constructed from the validated hyper-parameters, it lists its
// slots and emits one variable's update.
class Rule {
 public:
  virtual ~Rule() = default;
  virtual const std::vector<weft_slot_def_t>& Slots() const = 0;
  // Returns the node that completes the update.
  virtual weft_value_t Build(Update& u) = 0;
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

inline weft_status_t BuildUpdate(void* state, weft_graph_builder_t* graph, const weft_update_args_t* args,
                                 weft_value_t* out_update) {
  return sdk::Guard([&] {
    if (args->dtype != WEFT_DTYPE_F32 && args->dtype != WEFT_DTYPE_F64) {
      throw sdk::Error(WEFT_INVALID_ARGUMENT, std::string("variable '") + args->variable_name +
                                                  "': only f32 and f64 variables can be trained");
    }
    sdk::Graph g(graph);
    Update u{g, *args};
    *out_update = static_cast<Rule*>(state)->Build(u);
  });
}

inline weft_slot_def_t Slot(const char* name, double initial_value) {
  auto s = sdk::Make<weft_slot_def_t>();
  s.name = name;
  s.initial_value = initial_value;
  return s;
}

}  // namespace weft::optimizers

// Defines the plugin entry point for rule |R| named |NAME|.
#define WEFT_OPTIMIZER_PLUGIN(NAME, DESCRIPTION, R, HYPER)                                 \
  namespace {                                                                              \
  const weft_plugin_t* Describe() {                                                        \
    static const weft_optimizer_plugin_t table = [] {                                      \
      auto t = ::weft::sdk::Make<weft_optimizer_plugin_t>();                               \
      t.name = NAME;                                                                       \
      t.hyperparameters = HYPER;                                                           \
      t.num_hyperparameters = sizeof(HYPER) / sizeof(HYPER[0]);                            \
      t.create = ::weft::optimizers::Create<R>;                                            \
      t.destroy = ::weft::optimizers::Destroy<R>;                                          \
      t.slots = ::weft::optimizers::SlotsOf;                                               \
      t.build_update = ::weft::optimizers::BuildUpdate;                                    \
      return t;                                                                            \
    }();                                                                                   \
    static const weft_plugin_t plugin = [] {                                               \
      auto p = ::weft::sdk::Make<weft_plugin_t>();                                         \
      p.abi_major = WEFT_ABI_VERSION_MAJOR;                                                \
      p.abi_minor = WEFT_ABI_VERSION_MINOR;                                                \
      p.name = NAME;                                                                       \
      p.version = "0.1.0";                                                                 \
      p.description = DESCRIPTION;                                                         \
      p.kind = WEFT_PLUGIN_OPTIMIZER;                                                      \
      p.optimizer = &table;                                                                \
      return p;                                                                            \
    }();                                                                                   \
    return &plugin;                                                                        \
  }                                                                                        \
  }                                                                                        \
  WEFT_SDK_DEFINE_PLUGIN(Describe)

#endif  // WEFT_PLUGINS_OPTIMIZERS_RULE_H_
