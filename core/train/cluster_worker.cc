#include "core/train/run.h"

namespace weft::train::internal {

Status Run::CheckClusterRole() {
  const dist::ClusterSpec* c = options_.cluster;
  if (c == nullptr || !c->distributed()) return Status();
  const dist::JobSpec* workers = c->FindJob("worker");
  const dist::JobSpec* ps = c->FindJob("ps");
  auto jobs = [&] {
    std::vector<std::string> names;
    for (const dist::JobSpec& j : c->jobs) names.push_back(StrCat(j.name, " (", j.tasks.size(), ")"));
    return StrJoin(names, ", ");
  };
  if (workers == nullptr || workers->tasks.empty()) {
    return InvalidArgumentError(config_.source,
                                ": weft train on a cluster runs on the tasks of a job named "
                                "\"worker\", and [cluster] has none (jobs: ",
                                jobs(), ")");
  }
  if (!c->self) {
    return InvalidArgumentError("weft train on a cluster runs one worker: give --job worker --task I (", config_.source,
                                " has ", workers->tasks.size(), " worker", workers->tasks.size() == 1 ? "" : "s",
                                "; worker 0 is the chief)");
  }
  if (c->self->job != "worker") {
    return InvalidArgumentError("weft train runs the worker tasks of a cluster, not ", c->self->ToString(),
                                ": start it with `weft serve --config ", config_.source, " --job ", c->self->job,
                                " --task ", c->self->task, "`, and each worker with `weft train MODEL --config ",
                                config_.source, " --job worker --task I`");
  }
  worker_ = c->self->task;
  num_workers_ = static_cast<int64_t>(workers->tasks.size());
  if (config_.training.mode == "allreduce") {
    // Every worker holds the whole model; a ps job, if any, is not used.
    allreduce_cluster_ = c;
    return Status();
  }
  if (ps == nullptr || ps->tasks.empty()) {
    return InvalidArgumentError(config_.source,
                                ": weft train on a cluster keeps the variables on the tasks of a job "
                                "named \"ps\", and [cluster] has none (jobs: ",
                                jobs(), ")");
  }
  cluster_ = c;
  WEFT_RETURN_IF_ERROR(CheckTrainingMode(config_, num_workers_, true));
  return Status();
}

Status Run::WaitForPeers(dist::TaskService& service, const std::vector<dist::Peer>& peers) {
  // The other tasks may not be up yet: wait for each (cluster.
  // connect_timeout_ms in all), saying what this worker waits for.
  const int64_t connect_ms = config_.cluster ? config_.cluster->connect_timeout_ms : 10000;
  const Clock::time_point start = Clock::now();
  Clock::time_point next_note = start + std::chrono::seconds(2);
  for (const dist::Peer& peer : peers) {
    if (peer.name == service.name()) continue;
    while (true) {
      Status answered = service.Ping(peer.name, 1000);
      if (answered.ok()) break;
      const Clock::time_point now = Clock::now();
      const double waited = Seconds(now - start);
      if (waited * 1000 >= static_cast<double>(connect_ms)) {
        return Status(Code::kUnavailable, StrCat("task ", peer.name, " (", peer.address, ") did not answer within ",
                                                 connect_ms, " ms (cluster.connect_timeout_ms): ", answered.message()));
      }
      if (now >= next_note) {
        reporter_.Note(StrCat("waiting for ", peer.name, " (", peer.address, ") to start: ", Fixed(waited, 0), " s of ",
                              Fixed(static_cast<double>(connect_ms) / 1000, 0), " (cluster.connect_timeout_ms)"));
        next_note = now + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  return Status();
}

Status Run::StartCluster() {
  const dist::ClusterSpec& c = *cluster_;
  const dist::JobSpec& ps = *c.FindJob("ps");
  dist::DistSessionOptions so = dist::SessionOptionsFor(c, config_);
  // This worker and the tasks of the other jobs, not the other workers: a
  // worker's steps involve only itself and the parameter servers, so one
  // worker that is late or gone does not hold up another. Itself first:
  // what is left unpinned (the model's compute, the gradients) runs here.
  const std::string me = c.self->ToString();
  std::erase_if(so.tasks, [&](const dist::Peer& p) { return p.name != me && p.name.rfind("/job:worker/", 0) == 0; });
  std::stable_partition(so.tasks.begin(), so.tasks.end(), [&](const dist::Peer& p) { return p.name == me; });
  for (placement::Pin& pin : ClusterPins()) so.placement.pins.push_back(std::move(pin));
  WEFT_ASSIGN_OR_RETURN(dist::TaskService::Options service_options, dist::ServiceOptionsFor(c, *c.self, config_));
  board_->SetRole(
      StrCat("worker ", worker_, " of ", num_workers_, chief() ? ", the chief" : "", sync() ? ", sync" : ", async"));
  board_->SetState("starting");
  service_options.board = board_;
  if (recovery_auto() && !chief()) {
    // A finished worker stays (its progress is safe in this process) until
    // the chief ends the run.
    service_options.on_shutdown = [stop = told_to_stop_](const std::string&, const std::string&) { stop->store(true); };
  }
  auto service = dist::TaskService::Start(service_options, host_, devices_);
  if (!service.ok()) return service.status().WithContext(StrCat("starting ", me));
  WEFT_RETURN_IF_ERROR(WaitForPeers(**service, so.tasks));
  // One incarnation for the process: its task and its session.
  so.incarnation = (*service)->incarnation();
  auto session = dist::DistSession::Create(tg_.graph, so, host_);
  if (!session.ok()) return session.status();
  session_ = std::make_unique<ClusterRunner>(
      std::move(*service), std::move(*session),
      StrCat("worker ", worker_, " of ", num_workers_, (chief() ? " (the chief)" : ""), ", variables on ",
             ps.tasks.size(), " ps task", ps.tasks.size() == 1 ? "" : "s"));
  return Status();
}

Status Run::WaitForChief() {
  const Clock::time_point start = Clock::now();
  int64_t timeout_s = config_.cluster ? config_.cluster->init_timeout_s : 300;
  if (recovery_auto()) timeout_s = std::max(timeout_s, recovery_timeout_s());
  const Clock::time_point deadline = start + std::chrono::seconds(timeout_s);
  Clock::time_point next_note = start + std::chrono::seconds(2);
  bool noted = false;
  const std::size_t n = tg_.state_ready.size();
  while (true) {
    std::vector<Tensor> ready;
    Status asked = session_->Run({}, tg_.state_ready, {}, &ready)
                       .WithContext("asking the ps tasks whether the variables have values");
    if (!asked.ok()) {
      // recovery = "auto": a ps task lost or restarting is waited out (up
      // to the deadline); the chief may end the run meanwhile.
      if (!recovery_auto() || !IsRecoverable(asked)) return asked;
      if (told_to_stop_->load()) return Status();
      if (Clock::now() >= deadline) {
        return Status(Code::kUnavailable, StrCat(asked.message(), "; waited ", timeout_s, " s (recovery_timeout_s)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    std::size_t count = 0;
    for (const Tensor& t : ready) count += *static_cast<const uint8_t*>(t.raw_data()) != 0 ? 1 : 0;
    if (count == n) {
      if (Clock::now() > start + std::chrono::seconds(2)) {
        reporter_.Note(StrCat("the chief initialised the variables after ", Fixed(Seconds(Clock::now() - start), 1),
                              " s; training"));
      }
      return Status();
    }
    const Clock::time_point now = Clock::now();
    auto note = [&] {
      reporter_.Note(StrCat("waiting for the chief (/job:worker/task:0) to initialise the variables: ", count, " of ",
                            n, " have a value (", Fixed(Seconds(now - start), 0), " s of ", timeout_s, ")"));
      noted = true;
    };
    if (now >= deadline) {
      if (!noted) note();  // said at least once, however slow the first asking was
      return Status(Code::kDeadlineExceeded,
                    StrCat("worker ", worker_, " waited ", timeout_s,
                           " s for the chief (/job:worker/task:0) to initialise the variables, and ", count, " of ", n,
                           " have a value: is the chief running? (the wait is cluster.init_timeout_s)"));
    }
    if (now >= next_note) {
      note();
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status Run::FinishCluster() {
  board_->SetState(chief() ? "finished; waiting for the other workers" : "finished");
  const std::string chief_task = dist::TaskPrefix("worker", 0);
  if (recovery_auto() && !chief()) {
    board_->SetState("finished; staying until the chief ends the run");
    reporter_.Note("finished; staying until the chief ends the run (recovery = \"auto\")");
    Clock::time_point last_seen = Clock::now();
    while (!told_to_stop_->load()) {
      runner().service().NotifyKvSet(chief_task, StrCat("recovery/done/", worker_), "1");
      if (runner().Ping(chief_task, 2000).ok()) {
        last_seen = Clock::now();
      } else if (Clock::now() - last_seen > std::chrono::seconds(recovery_timeout_s())) {
        reporter_.Note(
            StrCat("the chief has not answered for ", recovery_timeout_s(), " s (recovery_timeout_s); stopping"));
        break;
      }
      for (int i = 0; i < 10 && !told_to_stop_->load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Status();
  }
  if (recovery_auto()) {
    // The others say they finished in this task's store (again every
    // second, so a restart of this process loses nothing).
    auto store = runner().service().KvStoreOf(chief_task);
    if (!store.ok()) return store.status();
    std::vector<int64_t> awaited;
    for (int64_t w = 1; w < num_workers_; ++w) awaited.push_back(w);
    const Clock::time_point start = Clock::now();
    const int64_t timeout_s = std::max(config_.cluster->init_timeout_s, recovery_timeout_s());
    Clock::time_point next_note = start;
    Clock::time_point next_check = start;
    // A lost worker is given recovery_timeout_s to come back (its launcher
    // restarts it), from when it was lost.
    std::map<int64_t, Clock::time_point> lost_since;
    while (!awaited.empty()) {
      std::erase_if(awaited, [&](int64_t w) {
        if ((*store)->Get(StrCat("recovery/done/", w), 0).ok()) return true;
        const std::string why = LostWorker(w);
        if (why.empty()) {
          lost_since.erase(w);
          return false;
        }
        const Clock::time_point now = Clock::now();
        auto [since, first] = lost_since.emplace(w, now);
        if (first) {
          reporter_.Note(
              StrCat(why, "; waiting up to ", recovery_timeout_s(), " s for it to come back (recovery_timeout_s)"));
          return false;
        }
        if (now - since->second < std::chrono::seconds(recovery_timeout_s())) return false;
        reporter_.Note(StrCat(why, "; it did not come back within ", recovery_timeout_s(),
                              " s (recovery_timeout_s), so the run finishes without it"));
        return true;
      });
      if (awaited.empty()) break;
      const Clock::time_point now = Clock::now();
      if (now >= next_check) {
        // A ps task restarted while the others still train: they wait for
        // the variables, which only this task restores.
        auto incarnations = PsIncarnations(now + std::chrono::seconds(2));
        if (incarnations.ok() && *incarnations != state_incarnations_) {
          const int64_t finished_at = step_;
          WEFT_RETURN_IF_ERROR(Recover(UnavailableError("a ps task was restarted while the other workers finished")));
          step_ = finished_at;
        }
        next_check = Clock::now() + std::chrono::seconds(2);
      }
      if (now >= start + std::chrono::seconds(timeout_s)) {
        reporter_.Note(StrCat("note: ", AwaitedWorkers(awaited), " did not finish within ", timeout_s,
                              " s; ending the run without ", awaited.size() == 1 ? "it" : "them"));
        break;
      }
      if (now >= next_note) {
        reporter_.Note(StrCat("waiting for ", AwaitedWorkers(awaited), " to finish (",
                              num_workers_ - 1 - static_cast<int64_t>(awaited.size()), " of ", num_workers_ - 1,
                              " done); at most ", SecondsLeft(start, timeout_s, now), " s more"));
        next_note = now + std::chrono::seconds(10);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (num_workers_ > 1 && !sync()) {
      // The model as every worker left it, not as it was at the chief's
      // last step.
      auto e = Evaluate();
      if (e.ok() && e->examples > 0) {
        reporter_.Note("evaluating again now that every worker finished:");
        reporter_.Evaluation(step_, e->loss, e->accuracy, e->examples);
        final_evaluation_ = *e;
      }
    }
    std::vector<std::string> tasks;
    for (const dist::JobSpec& job : cluster_->jobs) {
      for (const dist::TaskSpec& t : job.tasks) {
        if (job.name != "worker" || t.index != 0) tasks.push_back(dist::TaskPrefix(job.name, t.index));
      }
    }
    std::vector<std::string> failed;
    for (const std::string& task : tasks) {
      Status stopped =
          runner().service().AskToStop(task, StrCat("the chief ended the training run at step ", step_), 10000);
      if (!stopped.ok()) failed.push_back(stopped.message());
    }
    reporter_.Note(failed.empty() ? StrCat("stopped ", StrJoin(tasks, ", "), ": the run is over")
                                  : StrCat("note: stopping the tasks: ", StrJoin(failed, "; ")));
    return Status();
  }
  if (!chief()) {
    // Who finished, for the chief's lines (the count on ps task 0 is what
    // it waits on).
    if (auto store = runner().service().KvStoreOf(chief_task); store.ok()) {
      (void)(*store)->Set(StrCat("cluster/done/", worker_), "1");
    }
    return session_->Run({}, {}, {"cluster/worker_done"}, nullptr)
        .WithContext("telling the chief this worker finished");
  }
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = config_.cluster ? config_.cluster->init_timeout_s : 300;
  Clock::time_point next_note = start;
  const int64_t others = num_workers_ - 1;
  auto own_store = runner().service().KvStoreOf(chief_task);
  if (!own_store.ok()) return own_store.status();
  // The workers still awaited; a worker the heartbeats declared lost is
  // not awaited (without recovery nothing brings it back).
  std::vector<int64_t> awaited;
  for (int64_t w = 1; w < num_workers_; ++w) awaited.push_back(w);
  int64_t lost = 0;
  while (others > 0) {
    std::vector<Tensor> done;
    WEFT_RETURN_IF_ERROR(session_->Run({}, {"cluster/workers_done/read"}, {}, &done)
                             .WithContext("asking ps task 0 how many workers finished"));
    const int64_t count = done[0].scalar<int64_t>();
    if (count + lost >= others) break;
    std::erase_if(awaited, [&](int64_t w) {
      if ((*own_store)->Get(StrCat("cluster/done/", w), 0).ok()) return true;
      const std::string why = LostWorker(w);
      if (why.empty()) return false;
      reporter_.Note(StrCat(why, "; it did not come back, so the run finishes without it"));
      ++lost;
      return true;
    });
    if (awaited.empty() || count + lost >= others) break;
    const Clock::time_point now = Clock::now();
    if (now >= start + std::chrono::seconds(timeout_s)) {
      reporter_.Note(StrCat("note: ", AwaitedWorkers(awaited), " did not finish within ", timeout_s,
                            " s (cluster.init_timeout_s); ending the run without ",
                            awaited.size() == 1 ? "it" : "them"));
      break;
    }
    if (now >= next_note) {
      reporter_.Note(StrCat("waiting for ", AwaitedWorkers(awaited), " to finish (", count, " of ", others,
                            " done); at most ", SecondsLeft(start, timeout_s, now),
                            " s more (cluster.init_timeout_s)"));
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::vector<std::string> servers;
  for (const dist::JobSpec& job : cluster_->jobs) {
    if (job.name == "worker") continue;
    for (const dist::TaskSpec& t : job.tasks) servers.push_back(dist::TaskPrefix(job.name, t.index));
  }
  auto* runner = static_cast<ClusterRunner*>(session_.get());
  Status stopped = runner->StopTasks(servers, StrCat("the chief ended the training run at step ", step_));
  if (stopped.ok()) {
    reporter_.Note(StrCat("stopped ", StrJoin(servers, ", "), ": the run is over"));
  } else {
    reporter_.Note(StrCat("note: ", stopped.message(), " (tasks started with `weft serve` keep serving)"));
  }
  return Status();
}

std::vector<std::string> Run::OtherTasks() const {
  std::vector<std::string> tasks;
  const std::string me = cluster_->self->ToString();
  for (const dist::JobSpec& job : cluster_->jobs) {
    for (const dist::TaskSpec& t : job.tasks) {
      if (dist::TaskPrefix(job.name, t.index) != me) tasks.push_back(dist::TaskPrefix(job.name, t.index));
    }
  }
  return tasks;
}

void Run::RecordProgress(int64_t step) {
  if (recovery_auto()) {
    // With every other task, so that it outlives any one of them.
    for (const std::string& task : OtherTasks()) {
      runner().service().NotifyKvSet(task, StrCat("recovery/progress/", worker_), std::to_string(step));
    }
    return;
  }
  if (chief()) return;
  const Clock::time_point now = Clock::now();
  if (now - progress_recorded_at_ < std::chrono::seconds(1) && step < total_steps_) return;
  progress_recorded_at_ = now;
  runner().service().NotifyKvSet(dist::TaskPrefix("worker", 0), StrCat("cluster/progress/", worker_),
                                 std::to_string(step));
}

int64_t Run::RecordedStep(int64_t w) {
  auto store = runner().service().KvStoreOf(dist::TaskPrefix("worker", 0));
  if (!store.ok()) return -1;
  auto value = (*store)->Get(StrCat(recovery_auto() ? "recovery/progress/" : "cluster/progress/", w), 0);
  return value.ok() ? RecordedStepValue(*value) : -1;
}

std::string Run::LostWorker(int64_t w) {
  const std::string name = dist::TaskPrefix("worker", w);
  auto state = runner().service().PeerStateOf(name);
  if (!state.has_value() || state->state != dist::HeartbeatMonitor::PeerState::State::kLost) return {};
  const int64_t step = RecordedStep(w);
  return StrCat(
      "worker ", name, " (", state->peer.address, ") was lost",
      step >= 0 ? StrCat(" at step ", step, " (the last it reported)") : std::string(" before it reported a step"),
      ": no heartbeat answer for ", dist::FormatSilence(state->silent_ms));
}

std::string Run::AwaitedWorkers(const std::vector<int64_t>& workers) {
  std::vector<std::string> named;
  for (int64_t w : workers) {
    const int64_t step = RecordedStep(w);
    named.push_back(StrCat(dist::TaskPrefix("worker", w), step >= 0 ? StrCat(" (at step ", step, ")") : std::string()));
  }
  return StrCat(workers.size() == 1 ? "worker " : "workers ", StrJoin(named, ", "));
}

Status Run::ChiefLost(int64_t step, const Status& why) const {
  const dist::TaskSpec* chief_task = cluster_->FindTask({"worker", 0});
  dist::LostTask lost{dist::TaskPrefix("worker", 0), chief_task != nullptr ? chief_task->Url() : "?",
                      StrCat("the chief did not answer at this worker's step ", step)};
  return dist::LostTaskError(lost,
                             "This worker stops. To go on: start the chief again with --resume, then the workers; or "
                             "run the cluster under `weft cluster launch` with [cluster] recovery = \"auto\", which "
                             "restarts lost tasks by itself.",
                             why.message());
}

void Run::ReportWire(const dist::WireCounters& wire_before, int64_t trained, TrainResult* result) {
  // What this worker moved per step: the parameters it read and the
  // gradients it sent, with the requests around them.
  const dist::WireCounters wire = dist::ReadWireCounters();
  const double steps = static_cast<double>(trained);
  const double sent = static_cast<double>(wire.sent_bytes - wire_before.sent_bytes) / steps;
  const double received = static_cast<double>(wire.received_bytes - wire_before.received_bytes) / steps;
  const double messages = static_cast<double>(wire.sent_messages - wire_before.sent_messages + wire.received_messages -
                                              wire_before.received_messages) /
                          steps;
  result->wire_bytes_per_step = sent + received;
  reporter_.Note(StrCat("on the wire: ", HumanBytes(static_cast<uint64_t>(sent + received)), " per step (sent ",
                        HumanBytes(static_cast<uint64_t>(sent)), ", received ",
                        HumanBytes(static_cast<uint64_t>(received)), ", ", Fixed(messages, 1), " messages)"));
}

}  // namespace weft::train::internal
