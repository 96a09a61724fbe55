#include "core/serving/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace weft::serving {
namespace {

void AtomicAdd(std::atomic<double>& a, double v) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

// A sample value as Prometheus writes it: integers without a fraction,
// +Inf/-Inf/NaN spelled out.
std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

void EscapeInto(std::string& out, const std::string& value, bool quote_too) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote_too) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

std::string WithLabel(const Labels& labels, const std::string& key, const std::string& value) {
  Labels all = labels;
  all.emplace_back(key, value);
  return RenderLabels(all);
}

}  // namespace

void Counter::Add(double v) { AtomicAdd(value_, v); }
void Gauge::Add(double v) { AtomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  buckets_[static_cast<std::size_t>(at - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

std::vector<double> BatchSizeBuckets() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first;
    out += "=\"";
    EscapeInto(out, labels[i].second, true);
    out += '"';
  }
  return out + "}";
}

MetricsRegistry::Series* MetricsRegistry::Find(const std::string& name, const std::string& help, Kind kind,
                                               const Labels& labels, const std::vector<double>* bounds) {
  std::lock_guard<std::mutex> lock(mutex_);
  Family& family = families_[name];
  if (family.series.empty() && family.help.empty()) {
    family.kind = kind;
    family.help = help;
  }
  std::unique_ptr<Series>& series = family.series[RenderLabels(labels)];
  if (series == nullptr) {
    series = std::make_unique<Series>();
    series->labels = labels;
    if (kind == Kind::kCounter) series->counter = std::make_unique<Counter>();
    if (kind == Kind::kGauge) series->gauge = std::make_unique<Gauge>();
    if (kind == Kind::kHistogram) series->histogram = std::make_unique<Histogram>(*bounds);
  }
  return series.get();
}

Counter* MetricsRegistry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  return Find(name, help, Kind::kCounter, labels, nullptr)->counter.get();
}

Gauge* MetricsRegistry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  return Find(name, help, Kind::kGauge, labels, nullptr)->gauge.get();
}

Histogram* MetricsRegistry::GetHistogram(const std::string& name, const std::string& help, const Labels& labels,
                                         const std::vector<double>& bounds) {
  return Find(name, help, Kind::kHistogram, labels, &bounds)->histogram.get();
}

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " ";
    EscapeInto(out, family.help, false);
    out += "\n# TYPE " + name + " ";
    out += family.kind == Kind::kCounter ? "counter" : family.kind == Kind::kGauge ? "gauge" : "histogram";
    out += '\n';
    for (const auto& [labels, series] : family.series) {
      if (series->counter != nullptr) out += name + labels + " " + Number(series->counter->value()) + "\n";
      if (series->gauge != nullptr) out += name + labels + " " + Number(series->gauge->value()) + "\n";
      if (series->histogram == nullptr) continue;
      const Histogram& h = *series->histogram;
      const std::vector<uint64_t> counts = h.CumulativeCounts();
      for (std::size_t i = 0; i < h.bounds().size(); ++i) {
        out += name + "_bucket" + WithLabel(series->labels, "le", Number(h.bounds()[i])) + " " +
               std::to_string(counts[i]) + "\n";
      }
      out += name + "_bucket" + WithLabel(series->labels, "le", "+Inf") + " " + std::to_string(counts.back()) + "\n";
      out += name + "_sum" + labels + " " + Number(h.sum()) + "\n";
      out += name + "_count" + labels + " " + std::to_string(counts.back()) + "\n";
    }
  }
  return out;
}

}  // namespace weft::serving
