// Collectives plugins for the plugin host's refusal tests, one per
// WEFT_TEST_CASE:
//   0  valid ("nullcoll"; every operation answers UNIMPLEMENTED)
//   1  a table smaller than ABI 1.2
//   2  all_reduce is NULL
//   3  a plugin description from before ABI 1.2 (no collectives member)
//   4  a dtype that is not a number (string)
#include "weft/sdk/plugin.h"

#ifndef WEFT_TEST_CASE
#error "WEFT_TEST_CASE must be defined"
#endif

namespace {

weft_status_t Unimplemented() { return weft::sdk::MakeStatus(WEFT_UNIMPLEMENTED, "test plugin: not implemented"); }

weft_status_t Create(const weft_comm_args_t*, weft_communicator_t*) { return Unimplemented(); }
void Destroy(weft_communicator_t) {}
[[maybe_unused]] weft_status_t AllReduce(weft_communicator_t, const weft_comm_op_t*, const weft_comm_buffer_t*,
                                         const weft_comm_buffer_t*, weft_reduction_t, weft_done_fn, void*) {
  return Unimplemented();
}
weft_status_t AllGather(weft_communicator_t, const weft_comm_op_t*, const weft_comm_buffer_t*,
                        const weft_comm_buffer_t*, weft_done_fn, void*) {
  return Unimplemented();
}
weft_status_t Broadcast(weft_communicator_t, const weft_comm_op_t*, const weft_comm_buffer_t*, int32_t, weft_done_fn,
                        void*) {
  return Unimplemented();
}

const char* const kTypes[] = {"CPU"};
#if WEFT_TEST_CASE == 4
const weft_dtype_t kDtypes[] = {WEFT_DTYPE_F32, WEFT_DTYPE_STRING};
#else
const weft_dtype_t kDtypes[] = {WEFT_DTYPE_F32};
#endif

const weft_collectives_plugin_t kTable = [] {
  auto t = weft::sdk::Make<weft_collectives_plugin_t>();
#if WEFT_TEST_CASE == 1
  t.struct_size = 16;
#endif
  t.backend = "nullcoll";
  t.device_types = kTypes;
  t.num_device_types = 1;
  t.dtypes = kDtypes;
  t.num_dtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);
  t.comm_create = Create;
  t.comm_destroy = Destroy;
#if WEFT_TEST_CASE != 2
  t.all_reduce = AllReduce;
#endif
  t.all_gather = AllGather;
  t.broadcast = Broadcast;
  return t;
}();

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    auto p = weft::sdk::Make<weft_plugin_t>();
#if WEFT_TEST_CASE == 3
    p.struct_size = WEFT_PLUGIN_SIZE_V1_0;
#endif
    p.abi_major = WEFT_ABI_VERSION_MAJOR;
    p.abi_minor = WEFT_ABI_VERSION_MINOR;
    p.name = "nullcoll";
    p.version = "0.0.1";
    p.kind = WEFT_PLUGIN_COLLECTIVES;
    p.collectives = &kTable;
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
