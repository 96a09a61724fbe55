// Transport and optimizer plugins for the plugin host's registry tests
// (WEFT_TEST_KIND 2 = transport, 3 = optimizer). Their tables are complete
// and valid; what they would do is not under test here, so every operation
// answers UNIMPLEMENTED.
#include "weft/sdk/plugin.h"

#ifndef WEFT_TEST_KIND
#error "WEFT_TEST_KIND must be defined"
#endif

namespace {

weft_status_t Unimplemented() { return weft::sdk::MakeStatus(WEFT_UNIMPLEMENTED, "test plugin: not implemented"); }

#if WEFT_TEST_KIND == 2
weft_status_t Open(const char*, const weft_transport_callbacks_t*, weft_endpoint_t*) { return Unimplemented(); }
void Close(weft_endpoint_t) {}
weft_status_t Address(weft_endpoint_t, char*, size_t) { return Unimplemented(); }
weft_status_t Connect(weft_endpoint_t, const char*, int64_t, weft_connection_t*) { return Unimplemented(); }
void ConnectionClose(weft_connection_t) {}
weft_status_t Send(weft_connection_t, const weft_message_t*, weft_done_fn, void*) { return Unimplemented(); }
const weft_transport_plugin_t kTransport = [] {
  auto t = weft::sdk::Make<weft_transport_plugin_t>();
  t.scheme = "null";
  t.endpoint_open = Open;
  t.endpoint_close = Close;
  t.endpoint_address = Address;
  t.connection_open = Connect;
  t.connection_close = ConnectionClose;
  t.send = Send;
  return t;
}();
#else
weft_status_t Create(const weft_options_t*, void** out) {
  *out = nullptr;
  return nullptr;
}
void Destroy(void*) {}
weft_status_t Slots(void*, weft_dtype_t, int32_t, const int64_t*, const weft_slot_def_t** out, size_t* count) {
  *out = nullptr;
  *count = 0;
  return nullptr;
}
weft_status_t Build(void*, weft_graph_builder_t*, const weft_update_args_t*, weft_value_t*) { return Unimplemented(); }
const weft_option_def_t kHyper[] = {
    {sizeof(weft_option_def_t), "momentum", WEFT_OPTION_FLOAT, "0.9", "Momentum.", 1, 0.0, 1, 1.0, nullptr, 0},
};
const weft_optimizer_plugin_t kOptimizer = [] {
  auto t = weft::sdk::Make<weft_optimizer_plugin_t>();
  t.name = "nullopt";
  t.hyperparameters = kHyper;
  t.num_hyperparameters = 1;
  t.create = Create;
  t.destroy = Destroy;
  t.slots = Slots;
  t.build_update = Build;
  return t;
}();
#endif

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    auto p = weft::sdk::Make<weft_plugin_t>();
    p.abi_major = WEFT_ABI_VERSION_MAJOR;
    p.abi_minor = WEFT_ABI_VERSION_MINOR;
    p.version = "0.0.1";
#if WEFT_TEST_KIND == 2
    p.name = "nulltransport";
    p.kind = WEFT_PLUGIN_TRANSPORT;
    p.transport = &kTransport;
#else
    p.name = "nullopt";
    p.kind = WEFT_PLUGIN_OPTIMIZER;
    p.optimizer = &kOptimizer;
#endif
    return p;
  }();
  return &plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
