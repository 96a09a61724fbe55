// One loaded version of a served model: its graph in a Session, the
// signature clients see, and what running a batch of each size costs here
// (measured at warm-up, then refined by every run; the batcher decides
// from it). docs/serving.md describes how a signature is found.
#ifndef WEFT_CORE_SERVING_SERVABLE_H_
#define WEFT_CORE_SERVING_SERVABLE_H_

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/config/serving_config.h"
#include "core/runtime/device_set.h"
#include "core/runtime/session.h"
#include "core/serving/request.h"

namespace weft::serving {

class Servable {
 public:
  // Loads |path| (.wg, .wgt or .onnx) as version |version| of |model|.
  // With |narrow_threads| > 0 a second session runs the same graph with
  // that many threads per kernel, for batches that run while others do
  // (the batcher's choice, docs/serving.md "Batching").
  static Expected<std::unique_ptr<Servable>> Load(const std::string& model, int64_t version, const std::string& path,
                                                  const config::ModelServingConfig& config,
                                                  std::shared_ptr<runtime::DeviceSet> devices,
                                                  const runtime::SessionOptions& options, int narrow_threads = 0);

  const std::string& model() const { return model_; }
  int64_t version() const { return version_; }
  const std::string& path() const { return path_; }
  const Signature& signature() const { return signature_; }

  // Runs one batch: |inputs| in signature order; |outputs| gets the
  // signature's outputs in order; |narrow|: on the narrow session, when
  // there is one. Safe to call concurrently.
  Status Run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs, bool narrow = false);
  bool has_narrow() const { return narrow_ != nullptr; }

  // Runs zeros of batch size 1, 2, 4, ... up to |max_batch| (or 1 when not
  // batched) so that the first request finds its executor built, and
  // records each size's cost: the fastest of three timed runs, the one
  // least disturbed by whatever else the machine is doing. Unless
  // |all_sizes|, it stops after two sizes in a row that cost no less per
  // row than a smaller one (EfficientBatchSize would not pick them, and a
  // large model takes seconds per size). An input with an unknown
  // dimension other than the batch cannot be made up: then nothing runs
  // (and OK).
  Status WarmUp(int64_t max_batch, bool all_sizes = true);
  bool warmed_up() const { return warmed_up_; }

  // The measured cost of a batch of |rows|, in seconds (interpolated
  // between the sizes measured; 0 before any).
  double CostOf(int64_t rows) const;
  // Records a run of |rows| that took |seconds|.
  void RecordCost(int64_t rows, double seconds);
  // The batch size past which a bigger batch saves less than 10% per row,
  // from the measurements (at most |cap|).
  int64_t EfficientBatchSize(int64_t cap) const;

 private:
  Servable() = default;

  std::string model_;
  int64_t version_ = 0;
  std::string path_;
  Signature signature_;
  std::unique_ptr<runtime::Session> session_;
  std::unique_ptr<runtime::Session> narrow_;
  std::vector<std::string> feed_names_;
  std::vector<std::string> fetch_names_;
  bool warmed_up_ = false;
  // Costs by power-of-two batch size (index log2), exponentially averaged.
  static constexpr int kSizes = 11;  // 1 .. 1024
  mutable std::mutex cost_mutex_;
  std::array<double, kSizes> cost_{};
};

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_SERVABLE_H_
