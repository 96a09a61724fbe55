// An optimizer plugin bound to its hyper-parameters, emitting variable
// updates into a graph being built through the host's graph services
// (weft_graph_api_t, implemented here over GraphBuilder).
//
//   WEFT_ASSIGN_OR_RETURN(Optimizer opt, Optimizer::Create(*plugin, hyper_values));
//   for (each trained variable v) {
//     auto slots = opt.Slots(v.dtype, v.shape);        // create one variable per slot
//     WEFT_ASSIGN_OR_RETURN(Output done, opt.BuildUpdate(b, args, has_kernel));
//   }
#ifndef WEFT_CORE_TRAIN_OPTIMIZER_H_
#define WEFT_CORE_TRAIN_OPTIMIZER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config/options.h"
#include "core/graph/builder.h"
#include "core/plugin/plugin_host.h"

namespace weft::train {

struct SlotDef {
  std::string name;
  double initial_value = 0;
};

// What one variable's update needs.
struct UpdateArgs {
  std::string variable_name;
  DType dtype = DType::kF32;
  Output variable;       // the VarHandle's resource output
  Output gradient;       // dense, the variable's dtype and shape
  Output learning_rate;  // a scalar of dtype
  Output step;           // an i64 scalar, 1-based
  std::vector<Output> slots;  // resource handles, in Slots() order
};

// Whether the variable's device has a kernel for |op| with the given type
// attrs bound.
using HasKernelFn = std::function<bool(std::string_view op, const std::vector<std::pair<std::string, DType>>&)>;

class Optimizer {
 public:
  // Instantiates |plugin| with |hyperparameters| (already validated
  // against plugin.hyperparameters).
  static Expected<std::unique_ptr<Optimizer>> Create(const plugin::OptimizerPlugin& plugin,
                                                     config::OptionValues hyperparameters);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }
  Expected<std::vector<SlotDef>> Slots(DType dtype, const Shape& shape) const;
  // Emits the update under the name scope "<variable>/<optimizer>" and
  // returns the node that completes it (a control dependency).
  Expected<Output> BuildUpdate(GraphBuilder& b, const UpdateArgs& args, const HasKernelFn& has_kernel) const;

 private:
  Optimizer() = default;
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
