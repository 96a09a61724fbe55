// Benchmarks of the distributed runtime, each against its peer in the same
// invocation; each family's file describes its benchmarks:
//
//   dist_bench_transfer.cc   tensor_send_64m, tensor_send_64m_tls, tensor_send_4k
//   dist_bench_step.cc       null_step, null_step_auth, null_step_tls, remote_loop
//   dist_bench_train.cc      ps_train_mlp, sparse_step, sync_train_mlp, sync_straggler
//   dist_bench_allreduce.cc  allreduce_busbw
//
// Each prints BENCH lines: BENCH <name> weft=<v> peer=<v> unit=<u> speedup=<x>
// (speedup > 1: Weft ahead). On a 2-core machine the processes share the
// cores: compare the ratios, not the absolute values, with other machines.
//
//   weft_dist_bench NAME [--repeats N]
//
// allreduce_busbw_p2_4k (or _p4_64m, ...) runs one of allreduce_busbw's
// sizes alone.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

#include "tools/bench/bench_util.h"
#include "tools/bench/dist_bench.h"
#include "tools/bench/dist_bench_util.h"

int main(int argc, char** argv) {
  using namespace weft::bench;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: weft_dist_bench tensor_send_64m|tensor_send_64m_tls|tensor_send_4k|null_step|null_step_auth|"
                 "null_step_tls|remote_loop|ps_train_mlp|sparse_step|"
                 "sync_train_mlp|sync_straggler|allreduce_busbw[_p2_4k|...] "
                 "[--repeats N]\n");
    return 2;
  }
  ParseRepeats(argc, argv);
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
    AllreduceBusbw("");
  } else if (name.starts_with("allreduce_busbw_")) {
    AllreduceBusbw(name.substr(std::string("allreduce_busbw_").size()));
  } else {
    std::fprintf(stderr, "weft_dist_bench: unknown benchmark '%s'\n", argv[1]);
    return 2;
  }
  if (!g_secure_dir.empty()) std::filesystem::remove_all(g_secure_dir);
  return 0;
}
