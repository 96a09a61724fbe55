// A test helper that saves checkpoints in a loop, as a training run does,
// for checkpoint_fault_test to kill at chosen moments.
//
//   ckpt_writer DIR KEEP [SAVES]
//
// Resumes after the newest checkpoint of DIR (CheckpointManager::Latest),
// then saves WriterTensors(step) for step = resumed + 1, + 2, ... (SAVES
// times, or forever), printing "resumed <step>" once and "saved <step>"
// after each save returns. With WEFT_CKPT_WRITER_PAUSE=<stage>:<step> it
// prints "paused <stage> <step>" when the save of <step> reaches <stage>
// (a WriteStageName) for the first time, and then waits to be killed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/checkpoint/manager.h"
#include "tests/integration/ckpt_writer_data.h"

namespace {

int Fail(const weft::Status& status) {
  std::fprintf(stderr, "ckpt_writer: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: ckpt_writer DIR KEEP [SAVES]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int keep = std::atoi(argv[2]);
  const long saves = argc > 3 ? std::atol(argv[3]) : -1;
  std::string pause_stage;
  int64_t pause_step = -1;
  if (const char* pause = std::getenv("WEFT_CKPT_WRITER_PAUSE")) {
    const std::string spec = pause;
    const auto colon = spec.find(':');
    pause_stage = spec.substr(0, colon);
    pause_step = colon == std::string::npos ? -1 : std::atoll(spec.c_str() + colon + 1);
  }

  weft::checkpoint::CheckpointManager manager(dir, keep);
  auto latest = manager.Latest();
  if (!latest.ok()) return Fail(latest.status());
  int64_t step = 0;
  if (*latest) step = weft::checkpoint::CheckpointManager::StepOf(**latest).value_or(0);
  std::printf("resumed %lld\n", static_cast<long long>(step));
  std::fflush(stdout);

  int64_t saving = 0;
  weft::checkpoint::WriteOptions options;
  options.observer = [&](weft::checkpoint::WriteStage stage) {
    if (saving != pause_step || weft::checkpoint::WriteStageName(stage) != pause_stage) return;
    std::printf("paused %s %lld\n", pause_stage.c_str(), static_cast<long long>(saving));
    std::fflush(stdout);
    while (true) pause();
  };
  manager.set_write_options(options);
  for (long i = 0; saves < 0 || i < saves; ++i) {
    saving = ++step;
    auto prefix = manager.Save(step, weft::testing::WriterTensors(step), {{"writer", "ckpt_writer"}});
    if (!prefix.ok()) return Fail(prefix.status());
    std::printf("saved %lld\n", static_cast<long long>(step));
    std::fflush(stdout);
  }
  return 0;
}
