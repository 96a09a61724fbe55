// The model server's metrics in Prometheus's text format (served at
// /metrics; docs/serving.md lists them): counters, gauges and histograms,
// each a family of series told apart by labels. Updates are lock-free on a
// series the caller holds; finding a series by its labels takes a mutex,
// so hot paths look a series up once and keep the pointer (series live as
// long as the registry: an unloaded model version's stay, at their last
// values).
//
//   Counter* ok = registry.GetCounter("weft_requests_total", "Requests answered.",
//                                     {{"model", "resnet"}, {"code", "200"}});
//   ok->Add(1);
//   std::string text = registry.Render();
#ifndef WEFT_CORE_SERVING_METRICS_H_
#define WEFT_CORE_SERVING_METRICS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace weft::serving {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(double v = 1);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts per bound, then +Inf; the sum; the count.
  std::vector<uint64_t> CumulativeCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

// Bucket bounds: seconds from 100 µs to 30 s; batch sizes 1 to 1024.
std::vector<double> LatencyBuckets();
std::vector<double> BatchSizeBuckets();

class MetricsRegistry {
 public:
  Counter* GetCounter(const std::string& name, const std::string& help, const Labels& labels);
  Gauge* GetGauge(const std::string& name, const std::string& help, const Labels& labels);
  Histogram* GetHistogram(const std::string& name, const std::string& help, const Labels& labels,
                          const std::vector<double>& bounds);
  // Every family, in name order, in the text exposition format 0.0.4.
  std::string Render() const;

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Kind kind = Kind::kCounter;
    std::string help;
    std::map<std::string, std::unique_ptr<Series>> series;  // by rendered labels
  };
  Series* Find(const std::string& name, const std::string& help, Kind kind, const Labels& labels,
               const std::vector<double>* bounds);

  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

// {a="x",b="y"} with Prometheus's escaping of \, " and newlines; "" for no
// labels.
std::string RenderLabels(const Labels& labels);

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_METRICS_H_
