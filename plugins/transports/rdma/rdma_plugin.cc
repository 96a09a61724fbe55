// The rdma transport plugin: its description, options and table.
//
// At init the plugin asks libibverbs for devices. Where there is none (no
// RDMA NIC, no kernel verbs support, no provider library), init answers
// UNAVAILABLE with what verbs said, and the host lists the plugin as
// unavailable and goes on. Otherwise it offers the transport of
// rdma_transport.h, which has not been run on hardware (see there).
#include <string>

#include "rdma/rdma_transport.h"
#include "weft/sdk/plugin.h"

namespace weft::rdma {
namespace {

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    Options o;
    o.ring_slots = static_cast<uint32_t>(sdk::GetInt(options, "ring_slots"));
    o.slot_size = static_cast<uint32_t>(sdk::GetInt(options, "slot_kb") * 1024);
    o.limits.max_payload_size = static_cast<uint64_t>(sdk::GetInt(options, "max_payload_mb")) << 20;
    o.registration_cache_bytes = static_cast<uint64_t>(sdk::GetInt(options, "registration_cache_mb")) << 20;
    o.gid_index = static_cast<uint32_t>(sdk::GetInt(options, "gid_index"));
    o.handshake_timeout_ms = sdk::GetInt(options, "handshake_timeout_ms");
    SetOptions(o);
  });
}

const weft_option_def_t kOptions[] = {
    {sizeof(weft_option_def_t), "ring_slots", WEFT_OPTION_INT, "16",
     "Slots of each connection's receive ring (and send staging area); also the chunks a sender may have in flight.", 1,
     1, 1, 1024, nullptr, 0},
    {sizeof(weft_option_def_t), "slot_kb", WEFT_OPTION_INT, "1024",
     "Size of one ring slot in KiB: the largest chunk of a message written at once.", 1, 4, 1, 65536, nullptr, 0},
    {sizeof(weft_option_def_t), "max_payload_mb", WEFT_OPTION_INT, "1024",
     "The largest message payload accepted, in MiB; larger frames are refused.", 1, 1, 1, 1048576, nullptr, 0},
    {sizeof(weft_option_def_t), "registration_cache_mb", WEFT_OPTION_INT, "1024",
     "Bytes of payload memory kept registered with the NIC for reuse, in MiB (least recently used evicted).", 1, 1, 1,
     1048576, nullptr, 0},
    {sizeof(weft_option_def_t), "gid_index", WEFT_OPTION_INT, "0",
     "GID table index of the port (RoCE v2 usually needs the index of an IPv4-mapped GID).", 1, 0, 1, 255, nullptr, 0},
    {sizeof(weft_option_def_t), "handshake_timeout_ms", WEFT_OPTION_INT, "10000",
     "How long an accepted connection may take to finish its side-channel handshake.", 1, 1, 1, 600000, nullptr, 0},
};

const weft_transport_plugin_t& Table() {
  static const weft_transport_plugin_t table = [] {
    auto t = sdk::Make<weft_transport_plugin_t>();
    t.scheme = "rdma";
    t.endpoint_open = EndpointOpen;
    t.endpoint_close = EndpointClose;
    t.endpoint_address = EndpointAddress;
    t.connection_open = ConnectionOpen;
    t.connection_close = ConnectionClose;
    t.send = Send;
    t.memory_register = MemoryRegister;
    t.memory_unregister = MemoryUnregister;
    return t;
  }();
  return table;
}

const weft_plugin_t* Describe() {
  // Runs inside the SDK's guard: an UNAVAILABLE thrown here is init's
  // answer.
  ProbeDevices();
  static const weft_plugin_t plugin = [] {
    weft_plugin_t p = sdk::DescribePlugin(
        "rdma", WEFT_RDMA_PLUGIN_VERSION,
        "RDMA transport on libibverbs (reliable connected queue pairs; untested on hardware)", WEFT_PLUGIN_TRANSPORT);
    p.transport = &Table();
    sdk::WithOptions(p, kOptions, Configure);
    return p;
  }();
  return &plugin;
}

}  // namespace
}  // namespace weft::rdma

WEFT_SDK_DEFINE_PLUGIN(weft::rdma::Describe)
