#include "core/train/trainer.h"

#include "core/train/strategy.h"

namespace weft::train {
namespace internal {

// The skeleton of every mode: prepare (the graph, the session, the data),
// start (initialise, restore or wait for the variables), then the mode's
// strategy takes the steps and finishes (strategy.h).
Expected<TrainResult> Run::Go() {
  WEFT_RETURN_IF_ERROR(Prepare());
  reporter_.Note(StrCat("training ", options_.model_path, ": ", total_steps_, " steps (", steps_per_epoch_,
                        " per epoch) of batch ", config_.training.batch_size, ", ", optimizer_->name(), " at ",
                        optimizer_choice_.learning_rate, ", ", tg_.variables.size(), " variables, ",
                        session_->Describe()));
  bool restored = false;
  WEFT_ASSIGN_OR_RETURN(std::optional<TrainResult> ended_before, Start(&restored));
  if (ended_before.has_value()) return *ended_before;
  std::unique_ptr<Strategy> strategy = MakeStrategy();
  WEFT_LOG(DEBUG) << "training strategy: " << strategy->name();
  return strategy->Train(restored);
}

std::unique_ptr<Run::Strategy> Run::MakeStrategy() {
  if (sync()) return std::make_unique<SyncStrategy>(*this);
  if (allreduce()) return std::make_unique<AllReduceStrategy>(*this);
  if (distributed()) return std::make_unique<AsyncStrategy>(*this);
  return std::make_unique<LocalStrategy>(*this);
}

}  // namespace internal

Expected<TrainResult> Train(const config::Config& config, const plugin::PluginHost& host,
                            const TrainerOptions& options) {
  internal::Run run(config, host, options);
  return run.Go();
}

Expected<TrainingPlacementPlan> PlanTrainingPlacement(const config::Config& config, const plugin::PluginHost& host,
                                                      const TrainerOptions& options) {
  internal::Run run(config, host, options);
  return run.Plan();
}

}  // namespace weft::train
