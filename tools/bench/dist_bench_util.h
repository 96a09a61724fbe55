// The harness of the distributed runtime's benchmarks (weft_dist_bench,
// dist_bench_*.cc), beside what both benchmark binaries share
// (bench_util.h): errors, the cluster's security, the plugins, raw
// loopback sockets and the echo peer process, and running `weft`.
#ifndef WEFT_TOOLS_BENCH_DIST_BENCH_UTIL_H_
#define WEFT_TOOLS_BENCH_DIST_BENCH_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/plugin/plugin_host.h"

namespace weft::bench {

using Clock = std::chrono::steady_clock;

// Prints |what| and ends the process with status 2.
[[noreturn]] void Die(const std::string& what);
// Dies of |s| unless it is OK.
void Check(const Status& s);

// tensor_send_64m_tls, null_step_auth, null_step_tls: the same benchmarks
// with the cluster's security on (docs/distributed.md, "Security"): a
// [cluster] secret_file, or TLS on every tcp link, made in |g_secure_dir|.
enum class Security { kPlain, kAuth, kTls };
extern Security g_security;
extern std::string g_secure_dir;

// "_auth", "_tls" or "", after the name of a benchmark's BENCH line.
const char* SecuritySuffix();
// The [transports.tcp] lines of TLS, or nothing.
std::string TlsLines();
// The [cluster] secret_file under kAuth, or "".
std::string SecretFile();
// A secret (owner-only) and a CA with one certificate, from the openssl
// command line.
void MakeSecurityFiles();

// The plugins next to libweft, loaded once (with TLS on the tcp transport
// under kTls).
plugin::PluginHost& Plugins();

// --- Raw sockets ------------------------------------------------------------------------------

// A socket listening on a free loopback port, written to |port|.
int Listener(int* port);
// A socket connected to 127.0.0.1:|port|, with TCP_NODELAY.
int ConnectTo(int port);
// All |n| bytes of |data|, sent or received; dies if the connection fails.
void SendAll(int fd, const void* data, size_t n);
void RecvAll(int fd, void* data, size_t n);
// A loopback port nothing listens on right now.
int FreePort();

// --- The peer process -------------------------------------------------------------------------

// What the peer does with each message: answer |ack| bytes (or echo the
// payload when |ack| < 0).
struct PeerSpec {
  std::string scheme;  // "" for the raw socket
  uint64_t size = 0;
  int64_t ack = 1;
};

struct Peer {
  pid_t pid = -1;
  int port = 0;         // raw
  std::string address;  // transport
};

// A peer in a forked child, serving one connection as |spec| says.
Peer StartPeer(const PeerSpec& spec);
void StopPeer(const Peer& peer);

// --- Processes --------------------------------------------------------------------------------

// The weft CLI next to this binary (build/bin/weft).
extern std::string g_weft_cli;

// Runs |argv| (argv[0] a path) to its end; its stdout. A failure ends the
// benchmark with the program's output.
std::string RunCommand(const std::vector<std::string>& args);
// Runs `weft <args>` to its end; its stdout.
std::string RunWeft(const std::vector<std::string>& args);
// A file of the source tree (the binary is in build/bin).
std::string SourcePath(const std::string& relative);

}  // namespace weft::bench

#endif  // WEFT_TOOLS_BENCH_DIST_BENCH_UTIL_H_
