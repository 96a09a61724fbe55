// What a training run prints and records: progress lines (rewritten in
// place on a terminal), notes, evaluations, the final summary, and the
// JSON lines of training.metrics (docs/training.md). Internal to core/train.
#pragma once

#include <fstream>
#include <functional>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>

#include "core/base/json.h"
#include "core/base/logging.h"
#include "core/train/run_support.h"
#include "core/train/trainer.h"

namespace weft::train::internal {

inline std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  std::ostringstream out;
  if (s >= 3600)
    out << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60;
  else
    out << s / 60;
  out << ":" << std::setw(2) << std::setfill('0') << s % 60;
  return out.str();
}

inline std::string Fixed(double v, int digits) {
  if (std::isnan(v)) return "nan";
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << v;
  return out.str();
}

class Reporter {
 public:
  Reporter(std::ostream* out, bool interactive, const std::string& metrics_path,
           std::function<void(const Json&)> on_record = {})
      : out_(out), interactive_(interactive), on_record_(std::move(on_record)) {
    if (!metrics_path.empty()) {
      std::error_code ec;
      fs::create_directories(fs::path(metrics_path).parent_path(), ec);
      metrics_.open(metrics_path, std::ios::app);
      metrics_ok_ = metrics_.good();
    }
  }
  Status status(const std::string& metrics_path) const {
    if (!metrics_path.empty() && !metrics_ok_) {
      return UnavailableError("training.metrics: cannot open ", metrics_path, " for appending");
    }
    return Status();
  }

  // |extra| (text before the ETA, and fields of the JSON record) adds
  // what a mode reports besides: synchronous training's gradient counts.
  void Progress(int64_t step, int64_t total, double loss, double accuracy, double lr, double examples_per_sec,
                double eta_seconds, const std::string& extra = "", const Json& extra_json = Json::object()) {
    std::ostringstream line;
    line << "step " << step << "/" << total << "  loss " << Fixed(loss, 4);
    if (!std::isnan(accuracy)) line << "  accuracy " << Fixed(accuracy, 4);
    line << "  lr " << std::setprecision(3) << lr << "  " << static_cast<int64_t>(examples_per_sec + 0.5)
         << " examples/s";
    if (!extra.empty()) line << "  " << extra;
    line << "  ETA " << FormatEta(eta_seconds);
    Line(line.str(), /*transient=*/true);
    // The wall clock (seconds since the Unix epoch), so that a reader can
    // check the rate against it, and plot against time.
    const double wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    Json record = {{"step", step},
                   {"loss", loss},
                   {"accuracy", accuracy},
                   {"learning_rate", lr},
                   {"examples_per_sec", examples_per_sec},
                   {"wall_time", wall_time}};
    for (auto it = extra_json.begin(); it != extra_json.end(); ++it) record[it.key()] = it.value();
    Metric(record);
  }

  // Synchronous training, on the chief: one record per global step.
  void SyncStep(int64_t step, int64_t aggregated, int64_t stale, int64_t late) {
    Metric({{"step", step},
            {"aggregated", aggregated},
            {"stale_dropped", stale + late},
            {"late", late},
            {"stale", stale}});
  }

  void Evaluation(int64_t step, double loss, double accuracy, int64_t examples) {
    std::ostringstream line;
    line << "eval at step " << step << ": test_loss " << Fixed(loss, 4);
    if (!std::isnan(accuracy)) line << "  test_accuracy " << Fixed(accuracy, 4);
    line << "  (" << examples << " examples)";
    Line(line.str(), false);
    Metric({{"step", step}, {"test_loss", loss}, {"test_accuracy", accuracy}});
  }

  void Note(const std::string& text) {
    Line(text, false);
    if (on_record_) on_record_(Json{{"note", text}});
  }

  void Final(const TrainResult& r) {
    std::string sync;
    if (r.aggregated >= 0) sync += StrCat(" aggregated=", r.aggregated, " stale_dropped=", r.stale_dropped);
    if (r.late_gradients >= 0) sync += StrCat(" late_gradients=", r.late_gradients);
    // A worker other than the chief does not evaluate: no test figures.
    Line(
        StrCat("final: step=", r.step, " loss=", Fixed(r.loss, 4),
               std::isnan(r.test_accuracy) ? std::string() : StrCat(" test_accuracy=", Fixed(r.test_accuracy, 4)),
               " examples_per_sec=", Fixed(r.examples_per_sec, 1),
               r.wire_bytes_per_step > 0 ? StrCat(" wire_bytes_per_step=", Fixed(r.wire_bytes_per_step, 0)) : "", sync),
        false);
    Json final = {{"final", true},
                  {"step", r.step},
                  {"loss", r.loss},
                  {"test_loss", r.test_loss},
                  {"test_accuracy", r.test_accuracy},
                  {"examples_per_sec", r.examples_per_sec},
                  {"input_wait_fraction", r.input_wait_fraction}};
    if (r.wire_bytes_per_step > 0) final["wire_bytes_per_step"] = r.wire_bytes_per_step;
    if (r.aggregated >= 0) {
      final["aggregated"] = r.aggregated;
      final["stale_dropped"] = r.stale_dropped;
    }
    if (r.late_gradients >= 0) final["late_gradients"] = r.late_gradients;
    Metric(final);
  }

 private:
  // A transient line is redrawn in place on a terminal; anything else
  // first finishes the transient one.
  void Line(const std::string& text, bool transient) {
    if (out_ == nullptr) return;
    if (interactive_) {
      *out_ << "\r\033[K" << text;
      if (!transient) *out_ << "\n";
      pending_ = transient;
    } else {
      *out_ << text << "\n";
    }
    out_->flush();
  }
  // One JSON object per line (NaN and infinities as null).
  void Metric(const Json& json) {
    if (on_record_) on_record_(json);
    if (!metrics_ok_) return;
    metrics_ << DumpJson(json) << "\n";
    metrics_.flush();
  }

 public:
  ~Reporter() {
    if (interactive_ && pending_ && out_ != nullptr) *out_ << "\n";
  }

 private:
  std::ostream* out_;
  bool interactive_;
  bool pending_ = false;
  std::function<void(const Json&)> on_record_;
  std::ofstream metrics_;
  bool metrics_ok_ = false;
};

}  // namespace weft::train::internal
