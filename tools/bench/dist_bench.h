// The distributed runtime's benchmarks, one function per name given to
// weft_dist_bench (dist_bench_main.cc); each family's file describes its
// benchmarks and their peers.
#ifndef WEFT_TOOLS_BENCH_DIST_BENCH_H_
#define WEFT_TOOLS_BENCH_DIST_BENCH_H_

#include <string>

namespace weft::bench {

// dist_bench_transfer.cc: tensor_send_64m (and _tls), tensor_send_4k.
void TensorSend64M();
void TensorSend4K();

// dist_bench_step.cc: null_step (and _auth, _tls), remote_loop.
void NullStep();
void RemoteLoop();

// dist_bench_train.cc: ps_train_mlp, sync_straggler, sync_train_mlp,
// sparse_step.
void PsTrainMlp();
void SyncStraggler();
void SyncTrainMlp();
void SparseStep();

// dist_bench_allreduce.cc: allreduce_busbw.
// |only|: "" for every size, or one as "p2_4k" (processes, size).
void AllreduceBusbw(const std::string& only);

}  // namespace weft::bench

#endif  // WEFT_TOOLS_BENCH_DIST_BENCH_H_
