// A transport peer in its own process, for the conformance suite's tests of
// a peer that dies: it connects, says "ready", and then
//
//   flood  sends one huge message (its payload untouched zero pages, so
//          the process stays small) and waits to be killed;
//   sink   receives and drops everything until the connection ends.
//
//   transport_peer SCHEME ADDRESS flood|sink [PAYLOAD_BYTES]
//
// Everything is bounded: it exits by itself after 60 s.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/config/config.h"
#include "core/plugin/plugin_host.h"
#include "tests/integration/transport_harness.h"

int main(int argc, char** argv) {
  using namespace weft;
  if (argc < 4) {
    std::fprintf(stderr, "usage: transport_peer SCHEME ADDRESS flood|sink [PAYLOAD_BYTES]\n");
    return 2;
  }
  const std::string scheme = argv[1], address = argv[2], mode = argv[3];
  const uint64_t payload = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : (uint64_t{3} << 29);
  auto config = config::DefaultConfig();
  if (!config.ok()) return 2;
  plugin::PluginHost host(*config);
  if (!host.LoadAll().ok()) return 2;
  const plugin::TransportPlugin* transport = host.transports().Find(scheme);
  if (transport == nullptr) {
    std::fprintf(stderr, "transport_peer: no transport '%s'\n", scheme.c_str());
    return 2;
  }
  testing::EndpointHarness endpoint(transport->table, "");
  testing::CStatus status;
  weft_connection_t c = endpoint.Connect(address, 10000, &status);
  if (!status.ok()) {
    std::fprintf(stderr, "transport_peer: %s\n", status.message.c_str());
    return 1;
  }
  if (!endpoint.Send(c, "ready", {}).ok()) return 1;
  if (mode == "flood") {
    void* zeros = mmap(nullptr, payload, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (zeros == MAP_FAILED) return 1;
    if (!endpoint.Send(c, "flood", {{zeros, payload}}).ok()) return 1;
  }
  endpoint.WaitUntil([&] { return !endpoint.closed.empty(); }, std::chrono::seconds(60));
  std::_Exit(0);  // no orderly close: the point is a peer that vanishes
}
