// libFuzzer target: the cluster's connection handshake (core/distributed/auth.h),
// the first thing a task reads from anyone who connects. The input is a
// series of frames, each a length byte and that many bytes (cut at the
// end), fed to a server; the first is also given to a client as the
// server's challenge. Nothing may crash, and nothing but a genuine proof,
// which a fuzzer cannot forge, may authenticate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/distributed/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string secret = "fuzzing secret, sixteen bytes or more";
  weft::dist::AuthServer server(secret);
  weft::dist::AuthClient client(secret);
  (void)client.Start();
  size_t at = 0;
  bool first = true;
  while (at < input.size()) {
    const size_t n = static_cast<unsigned char>(input[at++]);
    const std::string_view frame = input.substr(at, n);
    at += frame.size();
    if (first) {
      (void)client.Answer(frame);
      first = false;
    }
    auto reply = server.OnFrame(frame);
    if (server.authenticated()) std::abort();  // a forged proof got in
    if (!reply.ok()) break;
  }
  return 0;
}
