// The collectives' benchmark (weft_dist_bench):
//
//   allreduce_busbw  bus bandwidth (GB/s, the nccl-tests convention) of
//                    in-place f32 allreduces of 4 KiB, 1 MiB and 64 MiB
//                    among 2 and 4 processes on loopback, each rank a task
//                    service with a collective group over the gloo plugin,
//                    vs torch.distributed.all_reduce over gloo
//                    (tools/bench/torch_allreduce_peer.py)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/base/strings.h"
#include "core/distributed/task_service.h"
#include "core/runtime/collectives.h"
#include "core/runtime/device_set.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/dist_bench.h"
#include "tools/bench/dist_bench_util.h"

namespace weft::bench {
namespace {

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

}  // namespace

void AllreduceBusbw(const std::string& only) {
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  struct Size {
    const char* name;
    uint64_t bytes;
    int iters;
  };
  for (int procs : {2, 4}) {
    for (const Size& size : {Size{"4k", 4096, 2000}, Size{"1m", 1 << 20, 200}, Size{"64m", uint64_t{64} << 20, 10}}) {
      if (!only.empty() && only != StrCat("p", procs, "_", size.name)) continue;
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

}  // namespace weft::bench
