// The model server's Prometheus text (docs/serving.md, "Metrics"); the
// expected text is written out by hand from the exposition format.
#include "core/serving/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace weft::serving {
namespace {

TEST(Metrics, RendersCountersGaugesAndHistograms) {
  MetricsRegistry registry;
  registry.GetCounter("weft_requests_total", "Requests.", {{"model", "m"}, {"code", "200"}})->Add(3);
  registry.GetCounter("weft_requests_total", "Requests.", {{"model", "m"}, {"code", "400"}})->Add();
  registry.GetGauge("weft_queue_depth", "Rows waiting.", {{"model", "m"}})->Set(2.5);
  Histogram* h = registry.GetHistogram("weft_batch_size", "Rows per run.", {{"model", "m"}}, {1, 4});
  h->Observe(1);
  h->Observe(3);
  h->Observe(9);
  EXPECT_EQ(registry.Render(),
            "# HELP weft_batch_size Rows per run.\n"
            "# TYPE weft_batch_size histogram\n"
            "weft_batch_size_bucket{model=\"m\",le=\"1\"} 1\n"
            "weft_batch_size_bucket{model=\"m\",le=\"4\"} 2\n"
            "weft_batch_size_bucket{model=\"m\",le=\"+Inf\"} 3\n"
            "weft_batch_size_sum{model=\"m\"} 13\n"
            "weft_batch_size_count{model=\"m\"} 3\n"
            "# HELP weft_queue_depth Rows waiting.\n"
            "# TYPE weft_queue_depth gauge\n"
            "weft_queue_depth{model=\"m\"} 2.5\n"
            "# HELP weft_requests_total Requests.\n"
            "# TYPE weft_requests_total counter\n"
            "weft_requests_total{model=\"m\",code=\"200\"} 3\n"
            "weft_requests_total{model=\"m\",code=\"400\"} 1\n");
}

TEST(Metrics, EscapesLabelValues) {
  EXPECT_EQ(RenderLabels({{"model", "a\"b\\c\nd"}}), "{model=\"a\\\"b\\\\c\\nd\"}");
  EXPECT_EQ(RenderLabels({}), "");
}

TEST(Metrics, SameLabelsSameSeries) {
  MetricsRegistry registry;
  Counter* a = registry.GetCounter("c", "h", {{"k", "v"}});
  Counter* b = registry.GetCounter("c", "h", {{"k", "v"}});
  EXPECT_EQ(a, b);
}

TEST(Metrics, ConcurrentUpdatesAreCounted) {
  MetricsRegistry registry;
  Counter* c = registry.GetCounter("c", "h", {});
  Histogram* h = registry.GetHistogram("h", "h", {}, LatencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c->Add();
        h->Observe(0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->value(), 40000);
  EXPECT_EQ(h->count(), 40000u);
  EXPECT_EQ(h->CumulativeCounts().back(), 40000u);
}

}  // namespace
}  // namespace weft::serving
