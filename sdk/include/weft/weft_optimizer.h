/* Weft plugin ABI: optimizers.
 *
 * An optimizer plugin describes one update rule (SGD, Adam, ...): its
 * hyper-parameters, the slot variables it keeps per trained variable (m, v,
 * ...), and how to emit the update of one variable as ops. It never runs
 * anything itself and never knows which device the variable is on: the
 * host places the ops it emits next to the variable (on a parameter server
 * in a cluster), and tells it whether that device has a fused kernel so
 * it can choose between one fused apply op and primitive ops.
 *
 * The host owns the learning-rate schedule (it passes the current rate as
 * a tensor), gradient clipping and the step counter; the optimizer owns
 * the rule.
 */
#ifndef WEFT_OPTIMIZER_H_
#define WEFT_OPTIMIZER_H_

#include "weft/weft_abi.h"
#include "weft/weft_options.h"
#include "weft/weft_status.h"
#include "weft/weft_tensor.h"

WEFT_EXTERN_C_BEGIN

/* The graph being extended, a node under construction, and one output of
 * a node. All three are owned by the host and valid until build_update
 * returns. */
typedef struct weft_graph_builder_s weft_graph_builder_t;
typedef struct weft_node_builder_s weft_node_builder_t;
typedef struct weft_value_s* weft_value_t;

/* The host's graph-building services, reached as weft_host_t.graph. Every
 * member is provided by the host. */
typedef struct weft_graph_api_t {
  size_t struct_size;
  /* Starts a node of |op|. |name| is a hint that the host makes unique
   * under the variable's update scope ("dense1/kernel/adam/m_update"). */
  weft_node_builder_t* (*node_begin)(weft_graph_builder_t* graph, const char* op, const char* name);
  void (*node_add_input)(weft_node_builder_t* node, weft_value_t input);
  /* The node runs only after |after|'s node has run. */
  void (*node_add_control_input)(weft_node_builder_t* node, weft_value_t after);
  void (*node_set_attr_int)(weft_node_builder_t* node, const char* name, int64_t value);
  void (*node_set_attr_float)(weft_node_builder_t* node, const char* name, double value);
  void (*node_set_attr_bool)(weft_node_builder_t* node, const char* name, weft_bool_t value);
  void (*node_set_attr_dtype)(weft_node_builder_t* node, const char* name, weft_dtype_t value);
  void (*node_set_attr_string)(weft_node_builder_t* node, const char* name, const char* data, size_t size);
  /* Adds the node to the graph, running the op's shape and type function.
   * Writes up to |capacity| outputs to |out_outputs| and their number to
   * |*out_num_outputs|. A node without outputs (Assign, an apply op) gets
   * *out_num_outputs = 0 and, when |capacity| >= 1, out_outputs[0] set to
   * a value standing for the node itself: usable with
   * node_add_control_input and as build_update's result, not as a data
   * input. Frees |node| whether it succeeds or not; an error names the
   * node, the op and what is wrong with it. */
  weft_status_t (*node_finish)(weft_node_builder_t* node, weft_value_t* out_outputs, size_t capacity,
                               size_t* out_num_outputs);
  /* A scalar constant of |dtype| holding |value| (converted). */
  weft_status_t (*scalar)(weft_graph_builder_t* graph, weft_dtype_t dtype, double value, weft_value_t* out_value);
  /* Whether the device the variable lives on has a kernel for |op| with
   * each type attr attrs[i] bound to dtypes[i] (as in weft_kernel_def_t). */
  weft_bool_t (*has_kernel)(weft_graph_builder_t* graph, const char* op, const char* const* attrs,
                            const weft_dtype_t* dtypes, size_t num_attrs);
} weft_graph_api_t;

#define WEFT_GRAPH_API_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_graph_api_t, has_kernel)

/* A slot variable the optimizer keeps per trained variable, with the same
 * shape and dtype as it. */
typedef struct weft_slot_def_t {
  size_t struct_size;
  /* "m", "v", "accumulator"; unique within the optimizer. */
  const char* name;
  /* Every element starts at this value. */
  double initial_value;
} weft_slot_def_t;

#define WEFT_SLOT_DEF_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_slot_def_t, initial_value)

/* What the host hands build_update for one variable. */
typedef struct weft_update_args_t {
  size_t struct_size;
  /* The variable's name, for node names and messages. */
  const char* variable_name;
  weft_dtype_t dtype;
  /* The variable's resource handle. */
  weft_value_t variable;
  /* The gradient, of the variable's dtype and shape, after clipping. */
  weft_value_t gradient;
  /* The learning rate for this step, a scalar of |dtype|. */
  weft_value_t learning_rate;
  /* The 1-based number of this update, an i64 scalar. */
  weft_value_t step;
  /* Resource handles of the slot variables, in the order `slots` gave;
   * NULL when num_slots is 0. */
  const weft_value_t* slots;
  size_t num_slots;
  /* ABI 1.1. NULL for build_update. For build_sparse_update: the rows to
   * update, an i64 vector of distinct row numbers (dimension 0 of the
   * variable, in no particular order); |gradient| then holds the gradient
   * of those rows only, shaped [len(indices)] + the variable's shape[1:]. */
  weft_value_t indices;
} weft_update_args_t;

#define WEFT_UPDATE_ARGS_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_update_args_t, num_slots)
#define WEFT_UPDATE_ARGS_SIZE_V1_1 WEFT_STRUCT_SIZE_THROUGH(weft_update_args_t, indices)

/* The table an optimizer plugin provides (weft_plugin_t.optimizer). */
typedef struct weft_optimizer_plugin_t {
  size_t struct_size;
  /* The name used in TOML ([training.optimizer] name = "adam"). Required;
   * unique among loaded optimizers. */
  const char* name;
  /* Its hyper-parameters (beta1, epsilon, nesterov, ...), validated by the
   * host like any option. The learning rate is not among them: the host's
   * schedule provides it. NULL when num_hyperparameters is 0. */
  const weft_option_def_t* hyperparameters;
  size_t num_hyperparameters;
  /* Makes an instance for the validated |hyperparameters| (read them with
   * weft_host_t.option_get_*; the handle is valid only during this call).
   * Required. */
  weft_status_t (*create)(const weft_options_t* hyperparameters, void** out_state);
  /* Required. */
  void (*destroy)(void* state);
  /* The slots a variable of |dtype| and shape |dims| (|rank| entries)
   * gets, lent for the life of |state|; NULL when there are none.
   * Required. */
  weft_status_t (*slots)(void* state, weft_dtype_t dtype, int32_t rank, const int64_t* dims,
                         const weft_slot_def_t** out_slots, size_t* out_count);
  /* Emits the update of one variable through |graph| (the host's
   * weft_host_t.graph services) and returns in |*out_update| a value of
   * the node that completes it (the host runs the step's updates as
   * control dependencies of its train op). The emitted ops must read the
   * variable and the gradient only through |args|, and leave the variable
   * and slots updated once the returned node has run. Required. */
  weft_status_t (*build_update)(void* state, weft_graph_builder_t* graph, const weft_update_args_t* args,
                                weft_value_t* out_update);
  /* ABI 1.1, optional. The update of only the rows args->indices names, for
   * a variable the model reads through gathers only (an embedding), whose
   * gradient is sparse: the host sends those rows to the variable's device
   * instead of a gradient of the variable's whole shape. Rows not named
   * must be left as they are, slots included (a "lazy" rule, as
   * torch.optim.SparseAdam); otherwise the contract of build_update. NULL:
   * the host scatters the rows into a dense gradient next to the variable
   * and calls build_update, which gives the dense rule's result at the
   * cost of reading and writing the whole variable each step. */
  weft_status_t (*build_sparse_update)(void* state, weft_graph_builder_t* graph, const weft_update_args_t* args,
                                       weft_value_t* out_update);
} weft_optimizer_plugin_t;

#define WEFT_OPTIMIZER_PLUGIN_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_optimizer_plugin_t, build_update)
#define WEFT_OPTIMIZER_PLUGIN_SIZE_V1_1 WEFT_STRUCT_SIZE_THROUGH(weft_optimizer_plugin_t, build_sparse_update)

WEFT_EXTERN_C_END

#endif /* WEFT_OPTIMIZER_H_ */
