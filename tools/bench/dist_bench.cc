// Benchmarks of the distributed runtime, each against its peer in the same
// invocation:
//
//   tensor_send_64m  GB/s of a 64 MiB tensor sent from one process to
//                    another over loopback through each transport (the
//                    receiver answers with a 1-byte acknowledgement), vs a
//                    raw TCP socket pair doing the same with plain
//                    send/recv: the physical limit here
//   tensor_send_64m_tls  the same with TLS on the tcp transport
//                    ([transports.tcp] tls = true, a CA made for the run)
//   tensor_send_4k   microseconds per round trip of a 4 KiB tensor (sent,
//                    echoed back) through each transport vs the raw socket
//   null_step        the paper's null step: milliseconds per step of a
//                    client ("worker") whose step reads one scalar variable
//                    from each parameter server task (`weft serve`
//                    processes), for 1, 2, 4 and 8 concurrent workers and
//                    1 and 2 ps tasks. Its peer is one raw TCP round trip
//                    per ps task (a 8-byte request and answer), the least
//                    such a step could cost over the same network.
//   null_step_auth, null_step_tls  the same with a [cluster]
//                    secret_file (every connection authenticates once), or
//                    with TLS on every link
//   remote_loop      microseconds per iteration of a 1000-iteration while
//                    loop (s += i; i += 1 while i < n) whose "s += i" runs
//                    on /job:ps/task:0 and the rest on /job:worker/task:0
//                    (both `weft serve` processes), vs the same loop in one
//                    process (a local session): the per-iteration cost of
//                    keeping two tasks' frames in step (the loop predicate
//                    and the loop values cross the network every iteration)
//   ps_train_mlp     the sample MLP (configs/models/fashion_mlp.wgt, 2.7 MB
//                    of parameters) trained with Adam, batch 128, by
//                    `weft train` processes: milliseconds per step through
//                    1 ps + 1 worker (the parameters read from the ps and
//                    the gradients sent back every step) vs the same steps
//                    in one process; and examples per second of 1 ps + 2
//                    workers (asynchronous) vs one process
//   sparse_step      the sparse model (configs/models/debian_bow.wgt: a
//                    1,048,576 x 64 embedding split over 2 ps tasks, Debian
//                    package descriptions, batch 64, Adagrad) through 2 ps +
//                    1 worker: the bytes the worker moves per step vs the
//                    bytes of the distinct rows a batch reads, both ways
//                    (the mean over random batches of the data); ms per
//                    step vs one process; and the sparse bytes vs the same
//                    steps with sparse_updates = false
//   sync_train_mlp   the sample MLP trained synchronously (training.mode =
//                    "sync") by 2 worker processes of batch 64 and 1 ps,
//                    Adam: examples per second (of the averaged gradients)
//                    vs PyTorch DistributedDataParallel over gloo with 2
//                    processes on the same model, batch and data
//                    (tools/bench/torch_ddp_peer.py); one intra-op thread
//                    per process on both sides
//   sync_straggler   milliseconds per synchronous step of the sample MLP
//                    with one worker slowed 5x (WEFT_TEST_SLOW_FACTOR):
//                    without a backup (N = 2 of 2 workers) and with one
//                    (N = 2 of 3), each against the same layout with no
//                    straggler
//
// Each prints BENCH lines: BENCH <name> weft=<v> peer=<v> unit=<u> speedup=<x>
// (speedup > 1: Weft ahead). On a 2-core machine the processes share the
// cores: compare the ratios, not the absolute values, with other machines.
//
//   weft_dist_bench NAME [--repeats N]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/base/strings.h"
#include "core/config/config.h"
#include "core/dist/dist_session.h"
#include "core/dist/task_service.h"
#include "core/dist/transport.h"
#include "core/graph/builder.h"
#include "core/graph/control_flow.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/collectives.h"
#include "core/runtime/device_set.h"
#include "core/runtime/session.h"
#include "core/tensor/npy.h"

namespace weft::bench {
namespace {

using Clock = std::chrono::steady_clock;

int g_repeats = 0;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Bench(const std::string& name, double weft, double peer, const std::string& unit, bool higher_is_better) {
  const double speedup = higher_is_better ? weft / peer : peer / weft;
  std::printf("BENCH %s weft=%.4g peer=%.4g unit=%s speedup=%.3f\n", name.c_str(), weft, peer, unit.c_str(), speedup);
  std::fflush(stdout);
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "weft_dist_bench: %s\n", what.c_str());
  std::exit(2);
}

void Check(const Status& s) {
  if (!s.ok()) Die(std::string(s.message()));
}

// tensor_send_64m_tls, null_step_auth, null_step_tls: the same benchmarks
// with the cluster's security on (docs/distributed.md, "Security"): a
// [cluster] secret_file, or TLS on every tcp link, made in |g_secure_dir|.
enum class Security { kPlain, kAuth, kTls };
Security g_security = Security::kPlain;
std::string g_secure_dir;

const char* SecuritySuffix() {
  switch (g_security) {
    case Security::kAuth: return "_auth";
    case Security::kTls: return "_tls";
    default: return "";
  }
}

// The [transports.tcp] lines of TLS, or nothing.
std::string TlsLines() {
  if (g_security != Security::kTls) return {};
  return "[transports.tcp]\ntls = true\ntls_certificate = \"" + g_secure_dir + "/node.pem\"\ntls_private_key = \"" +
         g_secure_dir + "/node.key\"\ntls_ca = \"" + g_secure_dir + "/ca.pem\"\n";
}
std::string SecretFile() { return g_security == Security::kAuth ? g_secure_dir + "/secret" : std::string(); }

// A secret (owner-only) and a CA with one certificate, from the openssl
// command line.
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

int Listener(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  listen(fd, 8);
  return fd;
}

int ConnectTo(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Die("raw connect failed");
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void SendAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) Die("raw send failed");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void RecvAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k <= 0) Die("raw recv failed");
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// --- The peer process -------------------------------------------------------------------------

// What the peer does with each message: answer |ack| bytes (or echo the
// payload when |ack| < 0).
struct PeerSpec {
  std::string scheme;  // "" for the raw socket
  uint64_t size = 0;
  int64_t ack = 1;
};

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

struct Peer {
  pid_t pid = -1;
  int port = 0;         // raw
  std::string address;  // transport
};

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

// Seconds per exchange (send |size| bytes, wait for the answer), median of
// |repeats| rounds of |per_round| exchanges, through the raw socket.
double RawExchange(uint64_t size, int64_t ack, int repeats, int per_round) {
  Peer peer = StartPeer({"", size, ack});
  const int fd = ConnectTo(peer.port);
  std::vector<char> data(size, 'x'), back(ack < 0 ? size : static_cast<size_t>(ack));
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < per_round; ++i) {
      SendAll(fd, data.data(), size);
      RecvAll(fd, back.data(), back.size());
    }
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / per_round);
  }
  close(fd);
  StopPeer(peer);
  return Median(times);
}

// The same through a transport plugin (the core's Endpoint over its C table).
double TransportExchange(const std::string& scheme, uint64_t size, int64_t ack, int repeats, int per_round) {
  Peer peer = StartPeer({scheme, size, ack});
  const plugin::TransportPlugin* transport = Plugins().transports().Find(scheme);
  std::mutex mutex;
  std::condition_variable cv;
  int64_t answers = 0;
  dist::Endpoint::Handlers handlers;
  handlers.on_message = [&](const std::shared_ptr<dist::Connection>&, dist::ReceivedMessage) {
    std::lock_guard<std::mutex> lock(mutex);
    ++answers;
    cv.notify_all();
  };
  handlers.on_closed = [](const std::shared_ptr<dist::Connection>&, const Status& s) {
    if (!s.ok()) Die("connection closed: " + std::string(s.message()));
  };
  auto endpoint = dist::Endpoint::Open(transport->table, "", handlers);
  Check(endpoint.status());
  auto connection = (*endpoint)->Connect(peer.address, 10000);
  Check(connection.status());
  auto data = std::make_shared<std::vector<char>>(size, 'x');
  std::vector<double> times;
  int64_t expected = 0;
  for (int r = 0; r < repeats + 1; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < per_round; ++i) {
      Check((*connection)->Send("", {{data->data(), size}}, data));
      ++expected;
      std::unique_lock<std::mutex> lock(mutex);
      if (!cv.wait_for(lock, std::chrono::seconds(60), [&] { return answers >= expected; })) Die("no answer");
    }
    if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - start).count() / per_round);
  }
  (*connection)->Close();
  endpoint->reset();
  StopPeer(peer);
  return Median(times);
}

std::vector<std::string> Transports() {
  std::vector<std::string> out;
  for (const char* scheme : {"tcp", "zmq"}) {
    if (Plugins().transports().Find(scheme) != nullptr) out.push_back(scheme);
  }
  return out;
}

void TensorSend64M() {
  const uint64_t size = uint64_t{64} << 20;
  const int repeats = g_repeats > 0 ? g_repeats : 9;
  for (const std::string& scheme : Transports()) {
    if (g_security == Security::kTls && scheme != "tcp") continue;  // TLS is the tcp transport's
    // Alternate, so that both see the same machine.
    std::vector<double> weft, raw;
    for (int i = 0; i < 3; ++i) {
      weft.push_back(TransportExchange(scheme, size, 1, repeats, 4));
      raw.push_back(RawExchange(size, 1, repeats, 4));
    }
    const double gb = static_cast<double>(size) / 1e9;
    Bench("tensor_send_64m_" + scheme + SecuritySuffix(), gb / Median(weft), gb / Median(raw), "GB/s", true);
  }
}

void TensorSend4K() {
  const int repeats = g_repeats > 0 ? g_repeats : 9;
  for (const std::string& scheme : Transports()) {
    std::vector<double> weft, raw;
    for (int i = 0; i < 3; ++i) {
      weft.push_back(TransportExchange(scheme, 4096, -1, repeats, 2000));
      raw.push_back(RawExchange(4096, -1, repeats, 2000));
    }
    Bench("tensor_send_4k_" + scheme, Median(weft) * 1e6, Median(raw) * 1e6, "us", false);
  }
}

// --- null_step --------------------------------------------------------------------------------

std::string g_weft_cli;

int FreePort() {
  int port = 0;
  const int fd = Listener(&port);
  close(fd);
  return port;
}

struct Tasks {
  std::vector<pid_t> pids;
  std::string config;
  std::vector<dist::Peer> peers;
};

Tasks StartPs(int num_ps, const std::string& dir) {
  Tasks t;
  std::string list;
  for (int i = 0; i < num_ps; ++i) {
    const std::string address = "127.0.0.1:" + std::to_string(FreePort());
    list += (i ? ", \"" : "\"") + address + "\"";
    t.peers.push_back({StrCat("/job:ps/task:", i), "tcp://" + address});
  }
  t.config = dir + "/null_step.toml";
  std::ofstream(t.config) << TlsLines()
                          << "[runtime]\ninter_op_threads = 1\nintra_op_threads = 1\n[cluster]\ntransport = \"tcp\"\n"
                          << (SecretFile().empty() ? "" : "secret_file = \"" + SecretFile() + "\"\n")
                          << "[cluster.jobs]\nps = [" << list << "]\n";
  for (int i = 0; i < num_ps; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string task = std::to_string(i);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execl(g_weft_cli.c_str(), g_weft_cli.c_str(), "serve", "--config", t.config.c_str(), "--job", "ps", "--task",
            task.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    t.pids.push_back(pid);
  }
  return t;
}

void StopTasks(const Tasks& t) {
  for (pid_t pid : t.pids) kill(pid, SIGTERM);
  for (pid_t pid : t.pids) waitpid(pid, nullptr, 0);
}

Graph NullStepGraph(int num_ps) {
  GraphBuilder b;
  std::vector<Output> inits;
  for (int p = 0; p < num_ps; ++p) {
    auto on = b.DeviceScope(StrCat("/job:ps/task:", p));
    Output v =
        b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}}, StrCat("v", p));
    inits.push_back(b.Op("Assign", {v, b.Scalar<float>(1.0f)}, {}, StrCat("init", p)));
    b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, StrCat("read", p));
  }
  auto g = b.Build();
  Check(g.status());
  return std::move(*g);
}

// Runs in a forked worker: |steps| null steps; writes ms per step (median
// over rounds) to |fd|.
void NullStepWorker(const Tasks& tasks, int num_ps, int steps, int fd) {
  dist::DistSessionOptions o;
  o.tasks = tasks.peers;
  o.connect_timeout_ms = 30000;
  o.security.secret_file = SecretFile();
  auto session = dist::DistSession::Create(NullStepGraph(num_ps), o, Plugins());
  Check(session.status());
  std::vector<std::string> reads, inits;
  for (int p = 0; p < num_ps; ++p) {
    reads.push_back(StrCat("read", p));
    inits.push_back(StrCat("init", p));
  }
  Check((*session)->Run({}, {}, inits, nullptr));
  std::vector<Tensor> out;
  for (int i = 0; i < 50; ++i) Check((*session)->Run({}, reads, {}, &out));  // warm up
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) Check((*session)->Run({}, reads, {}, &out));
    rounds.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps);
  }
  const double ms = Median(rounds);
  (void)!write(fd, &ms, sizeof ms);
  std::_Exit(0);
}

// The peer: one raw round trip of 8 bytes to each of |num_ps| echo
// processes per step, from |workers| processes at once.
double RawNullStep(int num_ps, int workers, int steps) {
  // One echo peer serves one connection: one set per worker.
  std::vector<std::vector<Peer>> per_worker(static_cast<size_t>(workers));
  for (auto& set : per_worker) {
    for (int p = 0; p < num_ps; ++p) set.push_back(StartPeer({"", 8, -1}));
  }
  std::vector<int> fds(static_cast<size_t>(workers));
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) Die("pipe");
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<int> socks;
      for (const Peer& p : per_worker[static_cast<size_t>(w)]) socks.push_back(ConnectTo(p.port));
      char buffer[8] = {};
      std::vector<double> rounds;
      for (int r = 0; r < 5; ++r) {
        const auto start = Clock::now();
        for (int i = 0; i < steps; ++i) {
          for (int s : socks) SendAll(s, buffer, 8);
          for (int s : socks) RecvAll(s, buffer, 8);
        }
        rounds.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps);
      }
      const double ms = Median(rounds);
      (void)!write(pipe_fds[1], &ms, sizeof ms);
      std::_Exit(0);
    }
    close(pipe_fds[1]);
    fds[static_cast<size_t>(w)] = pipe_fds[0];
    pids.push_back(pid);
  }
  std::vector<double> per;
  for (int fd : fds) {
    double ms = 0;
    if (read(fd, &ms, sizeof ms) != sizeof ms) Die("a raw worker failed");
    per.push_back(ms);
    close(fd);
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (auto& set : per_worker) {
    for (const Peer& p : set) StopPeer(p);
  }
  return Median(per);
}

void NullStep() {
  const int steps = g_repeats > 0 ? g_repeats : 200;
  const std::string dir = std::filesystem::temp_directory_path() / ("weft_null_step_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int num_ps : {1, 2}) {
    for (int workers : {1, 2, 4, 8}) {
      Tasks tasks = StartPs(num_ps, dir);
      std::vector<int> fds;
      std::vector<pid_t> pids;
      for (int w = 0; w < workers; ++w) {
        int pipe_fds[2];
        if (pipe(pipe_fds) != 0) Die("pipe");
        const pid_t pid = fork();
        if (pid == 0) {
          close(pipe_fds[0]);
          NullStepWorker(tasks, num_ps, steps, pipe_fds[1]);
        }
        close(pipe_fds[1]);
        fds.push_back(pipe_fds[0]);
        pids.push_back(pid);
      }
      std::vector<double> per;
      for (int fd : fds) {
        double ms = 0;
        if (read(fd, &ms, sizeof ms) != sizeof ms) Die("a worker failed");
        per.push_back(ms);
        close(fd);
      }
      for (pid_t pid : pids) waitpid(pid, nullptr, 0);
      StopTasks(tasks);
      const double raw = RawNullStep(num_ps, workers, steps * 5);
      Bench(StrCat("null_step_ps", num_ps, "_w", workers, SecuritySuffix()), Median(per), raw, "ms", false);
    }
  }
  std::filesystem::remove_all(dir);
}

// --- remote_loop ------------------------------------------------------------------------------

Graph LoopGraph(bool split) {
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI64, Shape{}, "n");
  auto r = WhileLoop(
      b,
      [&](const std::vector<Output>& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
        Output s;
        {
          std::optional<GraphBuilder::Scope> on_ps;
          if (split) on_ps.emplace(b.DeviceScope("/job:ps/task:0"));
          s = b.Op("Add", {v[1], v[0]}, {}, "s");
        }
        return std::vector<Output>{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}), s};
      },
      {b.Scalar<int64_t>(0), b.Scalar<int64_t>(0)});
  if (!r.ok()) Die(std::string(r.status().message()));
  b.Op("Identity", {(*r)[1]}, {}, "sum");
  auto g = b.Build();
  Check(g.status());
  return std::move(*g);
}

void RemoteLoop() {
  const int64_t n = 1000;
  const int repeats = g_repeats > 0 ? g_repeats : 9;
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_remote_loop_", getpid());
  std::filesystem::create_directories(dir);
  Tasks tasks;
  const std::string ps = StrCat("127.0.0.1:", FreePort()), worker = StrCat("127.0.0.1:", FreePort());
  tasks.config = dir + "/remote_loop.toml";
  std::ofstream(tasks.config) << "[cluster]\ntransport = \"tcp\"\n[cluster.jobs]\nps = [\"" << ps << "\"]\nworker = [\""
                              << worker << "\"]\n";
  tasks.peers = {{"/job:worker/task:0", "tcp://" + worker}, {"/job:ps/task:0", "tcp://" + ps}};
  for (const auto& [job, task] : {std::pair<const char*, const char*>{"ps", "0"}, {"worker", "0"}}) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execl(g_weft_cli.c_str(), g_weft_cli.c_str(), "serve", "--config", tasks.config.c_str(), "--job", job, "--task",
            task, static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    tasks.pids.push_back(pid);
  }
  dist::DistSessionOptions o;
  o.tasks = tasks.peers;
  o.connect_timeout_ms = 30000;
  auto remote = dist::DistSession::Create(LoopGraph(true), o, Plugins());
  Check(remote.status());
  auto devices = runtime::DeviceSet::Open(Plugins());
  Check(devices.status());
  auto local = runtime::Session::Create(LoopGraph(false), std::move(*devices));
  Check(local.status());
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"n", Tensor::Scalar<int64_t>(n)}};
  std::vector<Tensor> out;
  auto run_remote = [&] { Check((*remote)->Run(feeds, {"sum"}, {}, &out)); };
  auto run_local = [&] { Check((*local)->Run(feeds, {"sum"}, {}, &out)); };
  run_remote();
  if (out[0].scalar<int64_t>() != n * (n - 1) / 2) Die("remote_loop computed a wrong sum");
  run_local();
  std::vector<double> remote_times, local_times;
  for (int r = 0; r < repeats; ++r) {
    auto time = [](const std::function<void()>& fn) {
      const auto start = Clock::now();
      fn();
      return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    };
    remote_times.push_back(time(run_remote) / static_cast<double>(n));
    local_times.push_back(time(run_local) / static_cast<double>(n));
  }
  remote->reset();
  StopTasks(tasks);
  std::filesystem::remove_all(dir);
  Bench("remote_loop", Median(remote_times), Median(local_times), "us", false);
}

// --- ps_train_mlp ---------------------------------------------------------------------------

// Runs |argv| (argv[0] a path) to its end; its stdout. A failure ends the
// benchmark with the program's output.
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

// Runs `weft <args>` to its end; its stdout.
std::string RunWeft(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {g_weft_cli};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

// A file of the source tree (the binary is in build/bin).
std::string SourcePath(const std::string& relative) {
  return (std::filesystem::path(g_weft_cli).parent_path() / ".." / ".." / relative).lexically_normal().string();
}

// Seconds of training in "trained N steps in X s".
double TrainedSeconds(const std::string& out) {
  const std::size_t at = out.find("trained ");
  const std::size_t in = out.find(" steps in ", at);
  if (at == std::string::npos || in == std::string::npos) {
    std::fprintf(stderr, "no 'trained N steps in X s' line in:\n%s\n", out.c_str());
    std::exit(1);
  }
  return std::atof(out.c_str() + in + 10);
}

// A training config of the sample MLP on Fashion-MNIST: a [cluster] of
// |num_ps| ps tasks and |workers| workers on free ports (none when
// |workers| is 0) with |cluster_extra| keys, and |training| as the
// [training] section's keys.
std::string WriteTrainingConfig(const std::string& path, int num_ps, int workers, const std::string& cluster_extra,
                                const std::string& training) {
  std::ofstream out(path);
  auto ports = [&](int n) {
    std::string list;
    for (int i = 0; i < n; ++i) list += StrCat(i ? ", " : "", "\"127.0.0.1:", FreePort(), "\"");
    return StrCat("[", list, "]");
  };
  if (workers > 0) {
    out << "[cluster]\ntransport = \"tcp\"\nconnect_timeout_ms = 30000\n" << cluster_extra << "[cluster.jobs]\n";
    if (num_ps > 0) out << "ps = " << ports(num_ps) << "\n";
    out << "worker = " << ports(workers) << "\n";
  }
  const std::string fashion = "/usr/share/datasets/fashion-mnist/";
  out << "[model]\nloss = \"loss\"\nimages = \"images\"\nlabels = \"labels\"\naccuracy = \"accuracy\"\ninit = "
         "\"init\"\n"
      << "[data]\nformat = \"idx\"\ntrain_images = \"" << fashion << "train-images-idx3-ubyte.gz\"\ntrain_labels = \""
      << fashion << "train-labels-idx1-ubyte.gz\"\nscale = 0.00392156862745098\nshuffle = true\n"
      << "[training]\n"
      << training << "[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n";
  return path;
}

std::string TrainingConfig(const std::string& path, int workers, int steps) {
  return WriteTrainingConfig(path, 1, workers, "", StrCat("batch_size = 128\nlog_every = 1000\nsteps = ", steps, "\n"));
}

// One cluster run of |workers| workers (and one ps, also `weft train`);
// the seconds of training of each worker.
std::vector<double> ClusterTrain(const std::string& config, const std::string& model, int workers) {
  std::vector<std::future<std::string>> runs;
  runs.push_back(std::async(std::launch::async, [&] {
    return RunWeft({"train", model, "--config", config, "--job", "ps", "--task", "0"});
  }));
  for (int w = 0; w < workers; ++w) {
    runs.push_back(std::async(std::launch::async, [&, w] {
      return RunWeft({"train", model, "--config", config, "--job", "worker", "--task", std::to_string(w)});
    }));
  }
  std::vector<double> seconds;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string out = runs[i].get();
    if (i > 0) seconds.push_back(TrainedSeconds(out));
  }
  return seconds;
}

void PsTrainMlp() {
  const std::string model =
      (std::filesystem::path(g_weft_cli).parent_path() / ".." / ".." / "configs" / "models" / "fashion_mlp.wgt")
          .lexically_normal()
          .string();
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_ps_train_bench_", getpid());
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 300;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> local_ms, one_ms, local_eps, two_eps;
  for (int r = 0; r < repeats; ++r) {
    const double local =
        TrainedSeconds(RunWeft({"train", model, "--config", TrainingConfig(dir + "/local.toml", 0, kSteps)}));
    local_ms.push_back(1000 * local / kSteps);
    local_eps.push_back(kSteps * 128 / local);
    const std::vector<double> one = ClusterTrain(TrainingConfig(dir + "/one.toml", 1, kSteps), model, 1);
    one_ms.push_back(1000 * one[0] / kSteps);
    // Two workers run concurrently: the cluster's examples per second is
    // all the examples over the longer of the two.
    const std::vector<double> two = ClusterTrain(TrainingConfig(dir + "/two.toml", 2, kSteps), model, 2);
    two_eps.push_back(2.0 * kSteps * 128 / std::max(two[0], two[1]));
  }
  std::filesystem::remove_all(dir);
  Bench("ps_train_mlp_1ps_1worker", Median(one_ms), Median(local_ms), "ms/step", false);
  Bench("ps_train_mlp_1ps_2workers", Median(two_eps), Median(local_eps), "examples/s", true);
}

// --- sync_train_mlp, sync_straggler --------------------------------------------------------

// The value of "name=" in the final line of |out|.
double FinalField(const std::string& out, const std::string& name) {
  const std::size_t line = out.rfind("final: ");
  const std::size_t at = line == std::string::npos ? line : out.find(" " + name + "=", line);
  if (at == std::string::npos) Die(StrCat("no ", name, "= in the final line of:\n", out));
  return std::atof(out.c_str() + at + name.size() + 2);
}

std::string FashionMlp() {
  return (std::filesystem::path(g_weft_cli).parent_path() / ".." / ".." / "configs" / "models" / "fashion_mlp.wgt")
      .lexically_normal()
      .string();
}

std::string SyncConfig(const std::string& path, int workers, int backups, int steps) {
  return WriteTrainingConfig(
      path, 1, workers, "",
      StrCat("mode = \"sync\"\nbackup_workers = ", backups,
             "\nbatch_size = 64\nseed = 1\nlog_every = 1000\nsteps = ", steps, "\n[runtime]\nintra_op_threads = 1\n"));
}

// One synchronous run (1 ps + |workers| workers, all `weft train`, with
// |env| set for the workers); the chief's output.
std::string SyncTrain(const std::string& config, int workers, const std::string& slow_task = "") {
  std::vector<std::future<std::string>> runs;
  const std::string model = FashionMlp();
  runs.push_back(std::async(std::launch::async, [&] {
    return RunWeft({"train", model, "--config", config, "--job", "ps", "--task", "0"});
  }));
  if (!slow_task.empty()) {
    setenv("WEFT_TEST_SLOW_TASK", slow_task.c_str(), 1);
    setenv("WEFT_TEST_SLOW_FACTOR", "5", 1);
  }
  for (int w = 0; w < workers; ++w) {
    runs.push_back(std::async(std::launch::async, [&, w] {
      return RunWeft({"train", model, "--config", config, "--job", "worker", "--task", std::to_string(w)});
    }));
  }
  std::vector<std::string> outs;
  for (auto& r : runs) outs.push_back(r.get());
  unsetenv("WEFT_TEST_SLOW_TASK");
  unsetenv("WEFT_TEST_SLOW_FACTOR");
  return outs[1];
}

// Milliseconds per step of the chief's "trained N synchronous steps in X s".
double SyncMsPerStep(const std::string& out, int steps) { return 1000 * TrainedSeconds(out) / steps; }

void SyncStraggler() {
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_sync_straggler_bench_", getpid());
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 100;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> b0, b0_plain, b1, b1_plain;
  for (int r = 0; r < repeats; ++r) {
    b0_plain.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/a.toml", 2, 0, kSteps), 2), kSteps));
    b0.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/b.toml", 2, 0, kSteps), 2, "/job:worker/task:1"), kSteps));
    b1_plain.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/c.toml", 3, 1, kSteps), 3), kSteps));
    b1.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/d.toml", 3, 1, kSteps), 3, "/job:worker/task:2"), kSteps));
  }
  std::filesystem::remove_all(dir);
  Bench("sync_straggler_5x_b0", Median(b0), Median(b0_plain), "ms/step", false);
  Bench("sync_straggler_5x_b1", Median(b1), Median(b1_plain), "ms/step", false);
}

// Allreduce mode (no ps): |workers| `weft train` processes; the chief's
// output.
std::string AllreduceConfig(const std::string& path, int workers, int steps) {
  return WriteTrainingConfig(path, 0, workers, "collectives = \"gloo\"\n",
                             StrCat("mode = \"allreduce\"\nbatch_size = 64\nseed = 1\nlog_every = 1000\nsteps = ",
                                    steps, "\n[runtime]\nintra_op_threads = 1\n"));
}

std::string AllreduceTrain(const std::string& config, int workers) {
  std::vector<std::future<std::string>> runs;
  const std::string model = FashionMlp();
  for (int w = 0; w < workers; ++w) {
    runs.push_back(std::async(std::launch::async, [&, w] {
      return RunWeft({"train", model, "--config", config, "--job", "worker", "--task", std::to_string(w)});
    }));
  }
  std::vector<std::string> outs;
  for (auto& r : runs) outs.push_back(r.get());
  return outs[0];
}

void SyncTrainMlp() {
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_sync_train_bench_", getpid());
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 300;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> ps, allreduce, torch;
  for (int r = 0; r < repeats; ++r) {
    const std::string out = SyncTrain(SyncConfig(dir + "/sync.toml", 2, 0, kSteps), 2);
    ps.push_back(FinalField(out, "examples_per_sec"));
    // A worker's examples/s is its own batch's; the global batch is 2 x 64.
    const std::string ar = AllreduceTrain(AllreduceConfig(dir + "/allreduce.toml", 2, kSteps), 2);
    allreduce.push_back(2.0 * 64 * kSteps / TrainedSeconds(ar));
    const std::string peer = RunCommand(
        {"/usr/bin/python3", SourcePath("tools/bench/torch_ddp_peer.py"), "2", "64", std::to_string(kSteps), "1"});
    const std::size_t at = peer.find("examples_per_sec=");
    if (at == std::string::npos) Die("torch_ddp_peer.py printed no examples_per_sec=: " + peer);
    torch.push_back(std::atof(peer.c_str() + at + 17));
  }
  std::filesystem::remove_all(dir);
  Bench("sync_train_mlp_allreduce_2workers", Median(allreduce), Median(torch), "examples/s", true);
  Bench("sync_train_mlp_ps_2workers", Median(ps), Median(torch), "examples/s", true);
}

// --- allreduce_busbw --------------------------------------------------------------------

// One rank of the Weft side, in its own process: a task service (rank 0's
// serves the rendezvous store), a collective group over the gloo plugin,
// and |iters| in-place allreduces of |bytes| of f32 timed in 5 blocks after
// a warm-up and a barrier. Rank 0 writes the median block's microseconds
// per allreduce to |fd|.
void AllreduceRank(int rank, const std::vector<int>& ports, uint64_t bytes, int iters, int fd) {
  const int size = static_cast<int>(ports.size());
  std::map<std::string, std::string> peers;
  for (int r = 0; r < size; ++r) peers[StrCat("/job:worker/task:", r)] = StrCat("tcp://127.0.0.1:", ports[r]);
  dist::TaskService::Options o;
  o.name = StrCat("/job:worker/task:", rank);
  o.listen_address = peers[o.name];
  o.peers = peers;
  o.cluster_fingerprint = 0xb0b;
  o.inter_op_threads = 1;
  auto devices = runtime::DeviceSet::Open(Plugins());
  Check(devices.status());
  auto service = dist::TaskService::Start(o, Plugins(), std::move(*devices));
  Check(service.status());
  for (int r = 0; r < size; ++r) {
    const std::string name = StrCat("/job:worker/task:", r);
    for (int tries = 0; (*service)->Ping(name, 1000).ok() == false; ++tries) {
      if (tries > 300) Die(StrCat(name, " did not start"));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  auto store = (*service)->KvStoreOf("/job:worker/task:0");
  Check(store.status());
  runtime::CollectiveGroupOptions go;
  go.name = "bench";
  go.rank = rank;
  go.size = size;
  for (int r = 0; r < size; ++r) {
    go.rank_names.push_back(StrCat("/job:worker/task:", r));
    go.rank_hosts.push_back("127.0.0.1");
  }
  go.store = *store;
  go.key_prefix = "bench";
  go.backend = "gloo";
  auto group = runtime::CollectiveGroup::Create(Plugins(), go);
  Check(group.status());
  std::vector<float> data(bytes / 4, 1.0f);
  weft_comm_buffer_t b{sizeof(weft_comm_buffer_t), WEFT_DTYPE_F32, data.size(), data.data()};
  float one = 1;
  weft_comm_buffer_t barrier{sizeof(weft_comm_buffer_t), WEFT_DTYPE_F32, 1, &one};
  for (int i = 0; i < std::max(2, iters / 10); ++i) Check((*group)->AllReduce(b, WEFT_REDUCE_SUM));
  std::vector<double> blocks;
  for (int block = 0; block < 5; ++block) {
    Check((*group)->AllReduce(barrier, WEFT_REDUCE_SUM));
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < iters; ++i) Check((*group)->AllReduce(b, WEFT_REDUCE_SUM));
    blocks.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
  }
  // Everyone finishes before rank 0's store goes away.
  Check((*group)->AllReduce(barrier, WEFT_REDUCE_SUM));
  if (rank == 0) {
    const double us = Median(blocks);
    if (write(fd, &us, sizeof us) != sizeof us) Die("pipe");
  }
  group->reset();
}

double WeftAllreduceUs(int procs, uint64_t bytes, int iters) {
  std::vector<int> ports;
  for (int r = 0; r < procs; ++r) ports.push_back(FreePort());
  int fds[2];
  if (pipe(fds) != 0) Die("pipe");
  std::vector<pid_t> pids;
  for (int r = 0; r < procs; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      AllreduceRank(r, ports, bytes, iters, fds[1]);
      _exit(0);
    }
    pids.push_back(pid);
  }
  close(fds[1]);
  double us = 0;
  if (read(fds[0], &us, sizeof us) != sizeof us) Die("a rank of the allreduce benchmark failed");
  close(fds[0]);
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
  }
  return us;
}

double TorchAllreduceUs(int procs, uint64_t bytes, int iters) {
  const std::string out = RunCommand({"/usr/bin/python3", SourcePath("tools/bench/torch_allreduce_peer.py"),
                                      std::to_string(procs), std::to_string(bytes), std::to_string(iters)});
  const std::size_t at = out.find("us_per_op=");
  if (at == std::string::npos) Die("torch_allreduce_peer.py printed no us_per_op=: " + out);
  return std::atof(out.c_str() + at + 10);
}

void AllreduceBusbw() {
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  struct Size {
    const char* name;
    uint64_t bytes;
    int iters;
  };
  for (int procs : {2, 4}) {
    for (const Size& size : {Size{"4k", 4096, 2000}, Size{"1m", 1 << 20, 200}, Size{"64m", uint64_t{64} << 20, 10}}) {
      std::vector<double> weft, torch;
      for (int r = 0; r < repeats; ++r) {
        weft.push_back(WeftAllreduceUs(procs, size.bytes, size.iters));
        torch.push_back(TorchAllreduceUs(procs, size.bytes, size.iters));
      }
      // Bus bandwidth (nccl-tests): bytes x 2(P-1)/P per op, in GB/s.
      const double factor = static_cast<double>(size.bytes) * 2.0 * (procs - 1) / procs / 1e3;
      Bench(StrCat("allreduce_busbw_p", procs, "_", size.name), factor / Median(weft), factor / Median(torch), "GB/s",
            true);
    }
  }
}

// --- sparse_step -----------------------------------------------------------------------

std::string BowConfig(const std::string& path, const std::string& data, int num_ps, int steps, bool sparse) {
  std::ofstream out(path);
  if (num_ps > 0) {
    out << "[cluster]\ntransport = \"tcp\"\nconnect_timeout_ms = 30000\nrpc_timeout_ms = 120000\npartition_mb = 64\n"
        << "[cluster.jobs]\nps = [";
    for (int k = 0; k < num_ps; ++k) out << (k ? ", " : "") << "\"127.0.0.1:" << FreePort() << "\"";
    out << "]\nworker = [\"127.0.0.1:" << FreePort() << "\"]\n";
  }
  out << "[model]\nloss = \"loss\"\nimages = \"images\"\nlabels = \"labels\"\naccuracy = \"accuracy\"\ninit = "
         "\"init\"\n"
      << "[data]\nformat = \"npy\"\ntrain_images = \"" << data << "/train_ids.npy\"\ntrain_labels = \"" << data
      << "/train_labels.npy\"\nshuffle = true\n"
      << "[training]\nbatch_size = 64\nseed = 1\nlog_every = 1000\nsteps = " << steps
      << "\nsparse_updates = " << (sparse ? "true" : "false") << "\n"
      << "[optimizer]\nname = \"adagrad\"\nlearning_rate = 0.3\n";
  return path;
}

// The mean number of distinct ids (rows of the embedding) in a batch of
// 64 of |ids| (f32 [n, 64]), over random batches as the shuffled input
// makes them.
double MeanDistinctRows(const std::string& ids_path) {
  auto ids = ReadNpy(ids_path);
  if (!ids.ok()) Die(ids.status().ToString());
  const int64_t n = ids->dim(0), width = ids->dim(1);
  const float* p = ids->data<float>();
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 rng(1);
  double total = 0;
  int batches = 0;
  for (int round = 0; round < 20; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t b = 0; b + 64 <= n; b += 64, ++batches) {
      std::set<float> distinct;
      for (int64_t e = b; e < b + 64; ++e) {
        const float* row = p + order[static_cast<std::size_t>(e)] * width;
        distinct.insert(row, row + width);
      }
      total += static_cast<double>(distinct.size());
    }
  }
  return total / batches;
}

// One run of |num_ps| ps tasks and one worker; the worker's output.
std::string BowCluster(const std::string& config, const std::string& model, int num_ps) {
  std::vector<std::future<std::string>> ps;
  for (int k = 0; k < num_ps; ++k) {
    ps.push_back(std::async(std::launch::async, [&, k] {
      return RunWeft({"train", model, "--config", config, "--job", "ps", "--task", std::to_string(k)});
    }));
  }
  const std::string out = RunWeft({"train", model, "--config", config, "--job", "worker", "--task", "0"});
  for (auto& p : ps) p.get();
  return out;
}

void SparseStep() {
  // Absolute: the config's relative paths would be taken from its own folder.
  const std::filesystem::path repo =
      std::filesystem::absolute(std::filesystem::path(g_weft_cli).parent_path() / ".." / "..").lexically_normal();
  const std::string model = (repo / "configs" / "models" / "debian_bow.wgt").string();
  const std::string data = (repo / "build" / "data" / "debian_sections").string();
  if (!std::filesystem::exists(data + "/train_ids.npy")) {
    const std::string make =
        StrCat("/usr/bin/python3 ", (repo / "tools" / "data" / "debian_sections.py").string(), " -o ", data, " >&2");
    if (std::system(make.c_str()) != 0) Die("cannot make the data: " + make);
  }
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_sparse_step_bench_", getpid());
  std::filesystem::create_directories(dir);
  const double rows = MeanDistinctRows(data + "/train_ids.npy");
  // The rows a step reads, to the worker, and their gradients, back.
  const double rows_bytes = 2 * rows * 64 * 4;
  constexpr int kSteps = 300, kDenseSteps = 10;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> wire, cluster_ms, local_ms, dense_wire;
  for (int r = 0; r < repeats; ++r) {
    const std::string out = BowCluster(BowConfig(dir + "/two.toml", data, 2, kSteps, true), model, 2);
    wire.push_back(FinalField(out, "wire_bytes_per_step"));
    cluster_ms.push_back(1000 * TrainedSeconds(out) / kSteps);
    const std::string local =
        RunWeft({"train", model, "--config", BowConfig(dir + "/one.toml", data, 0, kSteps, true)});
    local_ms.push_back(1000 * TrainedSeconds(local) / kSteps);
  }
  // What the same steps move with a dense gradient (sparse_updates = false).
  dense_wire.push_back(FinalField(BowCluster(BowConfig(dir + "/dense.toml", data, 2, kDenseSteps, false), model, 2),
                                  "wire_bytes_per_step"));
  std::filesystem::remove_all(dir);
  std::fprintf(stderr, "sparse_step: %.1f distinct rows per batch of 64 (%.0f bytes each way)\n", rows, rows_bytes / 2);
  Bench("sparse_step_bytes", Median(wire), rows_bytes, "bytes/step", false);
  Bench("sparse_step_ms_2ps", Median(cluster_ms), Median(local_ms), "ms/step", false);
  Bench("sparse_step_dense_bytes", Median(wire), Median(dense_wire), "bytes/step", false);
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  using namespace weft::bench;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: weft_dist_bench tensor_send_64m|tensor_send_64m_tls|tensor_send_4k|null_step|null_step_auth|"
                 "null_step_tls|remote_loop|ps_train_mlp|sparse_step|"
                 "sync_train_mlp|sync_straggler|allreduce_busbw "
                 "[--repeats N]\n");
    return 2;
  }
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") g_repeats = std::atoi(argv[i + 1]);
  }
  g_weft_cli = (std::filesystem::path(argv[0]).parent_path() / "weft").string();
  std::string name = argv[1];
  for (const auto& [suffix, mode] :
       {std::pair<std::string, Security>{"_auth", Security::kAuth}, {"_tls", Security::kTls}}) {
    if (name.ends_with(suffix) && (name.starts_with("null_step") || name == "tensor_send_64m_tls")) {
      g_security = mode;
      name.resize(name.size() - suffix.size());
      MakeSecurityFiles();
    }
  }
  if (name == "tensor_send_64m") {
    TensorSend64M();
  } else if (name == "tensor_send_4k") {
    TensorSend4K();
  } else if (name == "null_step") {
    NullStep();
  } else if (name == "remote_loop") {
    RemoteLoop();
  } else if (name == "ps_train_mlp") {
    PsTrainMlp();
  } else if (name == "sparse_step") {
    SparseStep();
  } else if (name == "sync_train_mlp") {
    SyncTrainMlp();
  } else if (name == "sync_straggler") {
    SyncStraggler();
  } else if (name == "allreduce_busbw") {
    AllreduceBusbw();
  } else {
    std::fprintf(stderr, "weft_dist_bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
  }
  if (!g_secure_dir.empty()) std::filesystem::remove_all(g_secure_dir);
  return 0;
}
