// What Weft's two benchmark binaries share (weft_bench, bench_main.cc, and
// weft_dist_bench, dist_bench_*.cc): the --repeats flag, timing and
// medians, and the line each benchmark prints,
//
//   BENCH <name> weft=<v> peer=<v> unit=<u> speedup=<x>
//
// with speedup > 1 when Weft is ahead (for times, peer / weft; for rates,
// weft / peer).
#ifndef WEFT_TOOLS_BENCH_BENCH_UTIL_H_
#define WEFT_TOOLS_BENCH_BENCH_UTIL_H_

#include <functional>
#include <string>
#include <vector>

namespace weft::bench {

// The N of `--repeats N`; 0: each benchmark's default.
extern int g_repeats;

// Sets |g_repeats| from `NAME [--repeats N]` (argv[1] is the name).
void ParseRepeats(int argc, char** argv);

// Wall seconds of one call of |fn|.
double Seconds(const std::function<void()>& fn);

// The median of |v| (the upper one of an even count).
double Median(std::vector<double> v);

// The median of |repeats| timings of |fn| after |warmup| untimed calls.
double Median(int repeats, int warmup, const std::function<void()>& fn);

// Prints and flushes the BENCH line of |name|: Weft's |weft| against its
// peer's |peer|, in |unit|.
void Bench(const std::string& name, double weft, double peer, const std::string& unit, bool higher_is_better);

// The same; with no peer (|peer| <= 0), the line is BENCH <name> weft=<v>
// unit=<u>.
void Print(const std::string& name, double weft, double peer, const std::string& unit, bool higher_is_better);

}  // namespace weft::bench

#endif  // WEFT_TOOLS_BENCH_BENCH_UTIL_H_
