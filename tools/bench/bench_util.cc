#include "tools/bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace weft::bench {

int g_repeats = 0;

void ParseRepeats(int argc, char** argv) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") g_repeats = std::atoi(argv[i + 1]);
  }
}

double Seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Median(int repeats, int warmup, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < (g_repeats > 0 ? g_repeats : repeats); ++i) times.push_back(Seconds(fn));
  return Median(std::move(times));
}

void Bench(const std::string& name, double weft, double peer, const std::string& unit, bool higher_is_better) {
  const double speedup = higher_is_better ? weft / peer : peer / weft;
  std::printf("BENCH %s weft=%.4g peer=%.4g unit=%s speedup=%.3f\n", name.c_str(), weft, peer, unit.c_str(), speedup);
  std::fflush(stdout);
}

void Print(const std::string& name, double weft, double peer, const std::string& unit, bool higher_is_better) {
  if (peer > 0) {
    Bench(name, weft, peer, unit, higher_is_better);
  } else {
    std::printf("BENCH %s weft=%.4g unit=%s\n", name.c_str(), weft, unit.c_str());
    std::fflush(stdout);
  }
}

}  // namespace weft::bench
