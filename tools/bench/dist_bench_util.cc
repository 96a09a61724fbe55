#include "tools/bench/dist_bench_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>

#include "core/config/config.h"
#include "core/distributed/transport.h"
#include "tests/support/loopback.h"

namespace weft::bench {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "weft_dist_bench: %s\n", what.c_str());
  std::exit(2);
}

void Check(const Status& s) {
  if (!s.ok()) Die(std::string(s.message()));
}

Security g_security = Security::kPlain;
std::string g_secure_dir;

const char* SecuritySuffix() {
  switch (g_security) {
    case Security::kAuth: return "_auth";
    case Security::kTls: return "_tls";
    default: return "";
  }
}

std::string TlsLines() {
  if (g_security != Security::kTls) return {};
  return "[transports.tcp]\ntls = true\ntls_certificate = \"" + g_secure_dir + "/node.pem\"\ntls_private_key = \"" +
         g_secure_dir + "/node.key\"\ntls_ca = \"" + g_secure_dir + "/ca.pem\"\n";
}
std::string SecretFile() { return g_security == Security::kAuth ? g_secure_dir + "/secret" : std::string(); }

void MakeSecurityFiles() {
  g_secure_dir = (std::filesystem::temp_directory_path() / ("weft_bench_security_" + std::to_string(getpid())));
  std::filesystem::create_directories(g_secure_dir);
  const std::string script =
      "cd '" + g_secure_dir + "' && head -c 32 /dev/urandom | base64 > secret && chmod 600 secret && " +
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 " +
      "-subj /CN=bench-ca 2>/dev/null && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes " +
      "-keyout node.key -out node.csr -subj /CN=node 2>/dev/null && openssl x509 -req -in node.csr -CA ca.pem " +
      "-CAkey ca.key -CAcreateserial -out node.pem -days 2 2>/dev/null && chmod 600 node.key ca.key";
  if (std::system(script.c_str()) != 0) Die("could not make the secret and certificates (is openssl installed?)");
}

plugin::PluginHost& Plugins() {
  static plugin::PluginHost* host = [] {
    auto config =
        g_security == Security::kTls ? config::ParseConfig(TlsLines(), "bench.toml", "") : config::DefaultConfig();
    if (!config.ok()) Die("no config: " + std::string(config.status().message()));
    auto* h = new plugin::PluginHost(*config);
    Check(h->LoadAll());
    return h;
  }();
  return *host;
}

// --- Raw sockets ------------------------------------------------------------------------------

int Listener(int* port) { return testing::RawListener(8, port); }

int ConnectTo(int port) {
  const int fd = testing::RawConnect(port);
  if (fd < 0) Die("raw connect failed");
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void SendAll(int fd, const void* data, size_t n) {
  if (!testing::SendAll(fd, data, n)) Die("raw send failed");
}

void RecvAll(int fd, void* data, size_t n) {
  if (!testing::RecvAll(fd, data, n)) Die("raw recv failed");
}

int FreePort() { return testing::FreePort(); }

// --- The peer process -------------------------------------------------------------------------

namespace {

// Runs in a forked child: serves one connection, answering each message,
// until the connection ends. Reports its address through |pipe_fd|.
void PeerMain(const PeerSpec& spec, int pipe_fd) {
  if (spec.scheme.empty()) {
    int port = 0;
    const int listener = Listener(&port);
    (void)!write(pipe_fd, &port, sizeof port);
    const int fd = accept(listener, nullptr, nullptr);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<char> buffer(spec.size);
    for (;;) {
      char* p = buffer.data();
      size_t n = spec.size;
      while (n > 0) {
        const ssize_t k = recv(fd, p, n, 0);
        if (k <= 0) std::_Exit(0);
        p += k;
        n -= static_cast<size_t>(k);
      }
      if (spec.ack < 0) {
        SendAll(fd, buffer.data(), spec.size);
      } else {
        SendAll(fd, buffer.data(), static_cast<size_t>(spec.ack));
      }
    }
  }
  const plugin::TransportPlugin* transport = Plugins().transports().Find(spec.scheme);
  if (transport == nullptr) Die("no transport " + spec.scheme);
  std::mutex mutex;
  std::condition_variable cv;
  bool closed = false;
  std::shared_ptr<dist::Connection> accepted;
  const std::string ack(spec.ack > 0 ? static_cast<size_t>(spec.ack) : 0, 'a');
  dist::Endpoint::Handlers handlers;
  handlers.on_accept = [&](const std::shared_ptr<dist::Connection>& c) {
    std::lock_guard<std::mutex> lock(mutex);
    accepted = c;
  };
  handlers.on_message = [&](const std::shared_ptr<dist::Connection>& c, dist::ReceivedMessage m) {
    if (spec.ack < 0) {
      auto keep = std::make_shared<dist::ReceivedMessage>(m);
      Check(c->Send("", {{m.payload(), m.payload_size()}}, keep));
    } else {
      Check(c->Send(ack, {}, nullptr));
    }
  };
  handlers.on_closed = [&](const std::shared_ptr<dist::Connection>&, const Status&) {
    std::lock_guard<std::mutex> lock(mutex);
    closed = true;
    cv.notify_all();
  };
  auto endpoint = dist::Endpoint::Open(transport->table, spec.scheme + "://127.0.0.1:0", handlers);
  Check(endpoint.status());
  auto address = (*endpoint)->Address();
  Check(address.status());
  const uint32_t n = static_cast<uint32_t>(address->size());
  (void)!write(pipe_fd, &n, sizeof n);
  (void)!write(pipe_fd, address->data(), n);
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait_for(lock, std::chrono::minutes(10), [&] { return closed; });
  std::_Exit(0);
}

}  // namespace

Peer StartPeer(const PeerSpec& spec) {
  int fds[2];
  if (pipe(fds) != 0) Die("pipe");
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    PeerMain(spec, fds[1]);
  }
  close(fds[1]);
  Peer peer;
  peer.pid = pid;
  if (spec.scheme.empty()) {
    if (read(fds[0], &peer.port, sizeof peer.port) != sizeof peer.port) Die("peer did not start");
  } else {
    uint32_t n = 0;
    if (read(fds[0], &n, sizeof n) != sizeof n) Die("peer did not start");
    peer.address.resize(n);
    if (read(fds[0], peer.address.data(), n) != static_cast<ssize_t>(n)) Die("peer did not start");
  }
  close(fds[0]);
  return peer;
}

void StopPeer(const Peer& peer) {
  kill(peer.pid, SIGKILL);
  waitpid(peer.pid, nullptr, 0);
}

// --- Processes --------------------------------------------------------------------------------

std::string g_weft_cli;

std::string RunCommand(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) Check(InternalError("pipe"));
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::_Exit(127);
  }
  close(fds[1]);
  std::string out;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s %s failed:\n%s\n", args[0].c_str(), args.size() > 1 ? args[1].c_str() : "", out.c_str());
    std::exit(1);
  }
  return out;
}

std::string RunWeft(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {g_weft_cli};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

std::string SourcePath(const std::string& relative) {
  return (std::filesystem::path(g_weft_cli).parent_path() / ".." / ".." / relative).lexically_normal().string();
}

}  // namespace weft::bench
