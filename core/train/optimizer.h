// An optimizer plugin bound to its hyper-parameters, emitting variable
// updates into a graph being built through the host's graph services
// (weft_graph_api_t, implemented here over GraphBuilder).
//
//   WEFT_ASSIGN_OR_RETURN(auto opt, Optimizer::Create(*plugin, config.optimizer ? &*config.optimizer : nullptr));
//   for (each trained variable v) {
//     WEFT_ASSIGN_OR_RETURN(auto slots, opt->Slots(v.dtype, v.shape));  // create one variable per slot
//     WEFT_ASSIGN_OR_RETURN(Output done, opt->BuildUpdate(b, args, has_kernel));
//   }
//
// The update of a variable is emitted under the name scope
// "<variable>/<optimizer>" and follows torch.optim's rule of the same name
// (see plugins/optimizers). The host owns the learning rate (a scalar
// tensor per step, see schedule.h), gradient clipping and the step counter.
//
// An Optimizer is not thread-safe: build updates from one thread at a time.
#ifndef WEFT_CORE_TRAIN_OPTIMIZER_H_
#define WEFT_CORE_TRAIN_OPTIMIZER_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/options.h"
#include "core/graph/builder.h"
#include "core/plugin/plugin_host.h"

namespace weft::train {

// A slot variable the optimizer keeps per trained variable: same dtype and
// shape as it, every element starting at |initial_value|.
struct SlotDef {
  std::string name;
  double initial_value = 0;
};

// What one variable's update needs. Every Output belongs to the builder
// passed to BuildUpdate.
struct UpdateArgs {
  std::string variable_name;
  DType dtype = DType::kF32;
  Output variable;  // the VarHandle's resource output
  // Dense: the variable's dtype and shape (after clipping). Sparse (when
  // |indices| is valid): the rows |indices| names, [n] + shape[1:].
  Output gradient;
  // Invalid for a dense gradient; else an i64 vector of distinct rows.
  Output indices;
  Output learning_rate;       // a scalar of dtype
  Output step;                // an i64 scalar, 1-based: the number of this update
  std::vector<Output> slots;  // resource handles, in Slots() order
};

// Whether the variable's device has a kernel for |op| with the given type
// attrs bound ({"T", kF32}). An empty function means "no fused kernels".
using HasKernelFn = std::function<bool(std::string_view op, const std::vector<std::pair<std::string, DType>>&)>;

class Optimizer {
 public:
  // Instantiates |plugin| with |hyperparameters| (already validated
  // against plugin.hyperparameters, defaults filled in). Fails with the
  // plugin's message, prefixed "optimizer '<name>': ", when it refuses a
  // combination of values (Adam's beta1 = 1, Nesterov without momentum).
  static Expected<std::unique_ptr<Optimizer>> Create(const plugin::OptimizerPlugin& plugin,
                                                     config::OptionValues hyperparameters);
  // Validates |section| (the hyper-parameters as the user wrote them, with
  // positions; NULL for all defaults) against the plugin's declaration,
  // then Create. Every unknown key, wrong type or value out of range is
  // reported, one per line, as "<file>:<line>:<col>: <section>.<key>: ...".
  // The section must hold hyper-parameters only: keys the caller owns
  // (the optimizer's name, the learning rate) are removed first.
  static Expected<std::unique_ptr<Optimizer>> Create(const plugin::OptimizerPlugin& plugin,
                                                     const config::Section* section);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }
  const config::OptionValues& hyperparameters() const { return hyperparameters_; }
  // The slots of a variable of |dtype| and |shape|, in the order
  // UpdateArgs::slots takes them.
  Expected<std::vector<SlotDef>> Slots(DType dtype, const Shape& shape) const;
  // Emits the update of one variable and returns the node that completes
  // it (usable only as a control dependency). |has_kernel| answers for the
  // variable's device: with a fused apply op the plugin emits it, otherwise
  // primitive ops. INVALID_ARGUMENT, naming the optimizer and the variable,
  // when an argument is missing or of the wrong dtype or shape, when
  // |args.slots| does not match Slots(), or when the plugin refuses the
  // variable (only f32 and f64 variables can be trained).
  //
  // With args.indices the gradient is sparse: the plugin's sparse rule
  // updates those rows only (see build_sparse_update in weft_optimizer.h);
  // a plugin without one, or declining these hyper-parameters, gets a dense
  // gradient made next to the variable (the rows added into zeros).
  Expected<Output> BuildUpdate(GraphBuilder& b, const UpdateArgs& args, const HasKernelFn& has_kernel) const;
  // Whether the plugin has a sparse rule (it may still decline some
  // hyper-parameters).
  bool has_sparse_update() const;

 private:
  Optimizer() = default;
  Status CheckArgs(const GraphBuilder& b, const UpdateArgs& args) const;

  std::string name_;
  const weft_optimizer_plugin_t* table_ = nullptr;
  config::OptionValues hyperparameters_;
  void* state_ = nullptr;
};

// Installs the graph services in the host table (idempotent). Optimizer
// calls it; tools that drive optimizer plugins directly call it first.
void EnableGraphServices();

}  // namespace weft::train

#endif  // WEFT_CORE_TRAIN_OPTIMIZER_H_
