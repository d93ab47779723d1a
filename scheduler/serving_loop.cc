#include "scheduler/serving_loop.h"

#include <utility>

#include "common/status_macros.h"

namespace paceline::scheduler {

absl::StatusOr<std::unique_ptr<ServingLoop>> ServingLoop::Create(
    std::unique_ptr<engine::Engine> engine, const engine::Tokenizer* tokenizer,
    const ServingLoopOptions& options) {
  if (engine == nullptr) return absl::InvalidArgumentError("no engine");
  Clock* clock = options.clock != nullptr ? options.clock : SystemClock::Get();
  std::unique_ptr<ServingLoop> loop(new ServingLoop(
      std::move(engine), options.engine_sampling, options.mask_threads, clock,
      options.metrics, options.scheduler));
  ASSIGN_OR_RETURN(loop->scheduler_,
                   Scheduler::Create(options.scheduler, *loop->engine_,
                                     tokenizer, clock, options.metrics));
  loop->PublishLoad();
  return loop;
}

ServingLoop::ServingLoop(std::unique_ptr<engine::Engine> engine,
                         EngineSampling engine_sampling, int mask_threads,
                         Clock* clock, SchedulerMetrics* metrics,
                         const SchedulerOptions& scheduler)
    : engine_(std::move(engine)),
      clock_(clock),
      metrics_(metrics),
      sampler_(*engine_, engine_sampling, mask_threads),
      intake_(scheduler.tenants) {}

ServingLoop::~ServingLoop() { Stop(StopMode::kCancel); }

void ServingLoop::Start() {
  thread_ = std::thread([this] { ThreadMain(); });
}

void ServingLoop::Stop(StopMode mode) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_mode_ = mode;
    } else if (mode == StopMode::kCancel) {
      stop_mode_ = mode;  // a cancel overrides a drain in progress
    }
    wake_.Signal();
  }
  if (thread_.joinable()) {
    thread_.join();
  } else {
    if (mode == StopMode::kDrain) RunUntilIdle();
    Shutdown();
  }
}

void ServingLoop::Shutdown() {
  // A loop whose Create failed has no scheduler and took no submission.
  if (scheduler_ == nullptr) return;
  // Submissions that never reached the scheduler are accepted, then
  // cancelled with the rest, so every sink hears how its request ended.
  {
    absl::MutexLock lock(&mu_);
    applying_.swap(inbox_);
    intake_.OnInboxTaken();
  }
  Apply(&applying_);
  scheduler_->CancelAll(CancelReason::kShutdown);
  PublishLoad();
}

absl::StatusOr<RequestId> ServingLoop::Submit(RequestSpec spec) {
  std::vector<RequestSpec> specs;
  specs.push_back(std::move(spec));
  ASSIGN_OR_RETURN(std::vector<RequestId> ids, SubmitGroup(std::move(specs)));
  return ids[0];
}

absl::StatusOr<std::vector<RequestId>> ServingLoop::SubmitGroup(
    std::vector<RequestSpec> specs) {
  absl::Status status = scheduler_->CheckGroup(specs);  // constants only
  absl::MutexLock lock(&mu_);
  if (status.ok() && stopping_) {
    status = absl::UnavailableError("the server is shutting down");
  }
  if (status.ok()) {
    status = intake_.Admit(specs[0].tenant, static_cast<int32_t>(specs.size()),
                           clock_->Now());
  }
  // Once stopping, nothing applies the inbox any more: a rejection then
  // goes unreported rather than piling up.
  if (!status.ok()) {
    for (RequestSpec& spec : specs) {
      if (stopping_) break;
      Command c;
      c.kind = Command::kRejected;
      c.tenant = std::move(spec.tenant);
      c.code = status.code();
      inbox_.push_back(std::move(c));
    }
    wake_.Signal();
    return status;
  }
  std::vector<RequestId> ids;
  Command c;
  c.id = next_id_;
  for (size_t i = 0; i < specs.size(); ++i) ids.push_back(next_id_++);
  c.specs = std::move(specs);
  inbox_.push_back(std::move(c));
  wake_.Signal();
  return ids;
}

void ServingLoop::Cancel(RequestId id) {
  absl::MutexLock lock(&mu_);
  Command c;
  c.kind = Command::kCancel;
  c.id = id;
  inbox_.push_back(std::move(c));
  wake_.Signal();
}

void ServingLoop::StopAtString(RequestId id, std::string stop_string,
                               int32_t tokens) {
  absl::MutexLock lock(&mu_);
  Command c;
  c.kind = Command::kStopString;
  c.id = id;
  c.stop_string = std::move(stop_string);
  c.tokens = tokens;
  inbox_.push_back(std::move(c));
  wake_.Signal();
}

void ServingLoop::Apply(std::vector<Command>* commands) {
  for (Command& c : *commands) {
    if (c.kind == Command::kCancel) {
      scheduler_->Cancel(c.id).IgnoreError();  // NotFound: it finished
      continue;
    }
    if (c.kind == Command::kStopString) {
      scheduler_->StopAtString(c.id, std::move(c.stop_string), c.tokens)
          .IgnoreError();  // NotFound: it finished
      continue;
    }
    if (c.kind == Command::kRejected) {
      scheduler_->ReportRejected(c.tenant, c.code);
      continue;
    }
    std::vector<RequestId> ids;
    std::vector<std::shared_ptr<TokenSink>> sinks;
    for (const RequestSpec& spec : c.specs) {
      ids.push_back(c.id + ids.size());
      sinks.push_back(spec.sink);
    }
    absl::Status status = scheduler_->SubmitGroup(ids, std::move(c.specs));
    if (!status.ok()) {
      FinishInfo info;
      info.reason = FinishReason::kError;
      info.status = std::move(status);
      info.timings.arrival = info.timings.finished = clock_->Now();
      for (const std::shared_ptr<TokenSink>& sink : sinks) {
        sink->OnFinished(info);
      }
    }
  }
  commands->clear();
}

bool ServingLoop::RunOnce() {
  {
    absl::MutexLock lock(&mu_);
    applying_.swap(inbox_);
    intake_.OnInboxTaken();
  }
  Apply(&applying_);
  const bool ran = scheduler_->HasRunnable() && Step();
  PublishLoad();
  return ran;
}

int64_t ServingLoop::RunUntilIdle() {
  int64_t steps = 0;
  while (RunOnce()) ++steps;
  return steps;
}

void ServingLoop::ThreadMain() {
  while (WaitForWork(&applying_)) {
    Apply(&applying_);
    if (scheduler_->HasRunnable()) Step();
    PublishLoad();
  }
  Shutdown();
}

bool ServingLoop::WaitForWork(std::vector<Command>* commands) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_ && stop_mode_ == StopMode::kCancel) return false;
    if (!inbox_.empty()) break;
    if (scheduler_->HasRunnable()) break;
    if (stopping_ &&
        scheduler_->num_running() + scheduler_->num_waiting() == 0) {
      return false;  // drained
    }
    // Idle: wait for a command, or for a token bucket to let a request in.
    const absl::Time next = scheduler_->NextAdmissibleTime();
    idle_ = true;
    if (next == absl::InfiniteFuture()) {
      wake_.Wait(&mu_);
    } else {
      wake_.WaitWithTimeout(&mu_, next - clock_->Now());
    }
    idle_ = false;
  }
  commands->swap(inbox_);
  intake_.OnInboxTaken();
  return true;
}

bool ServingLoop::AwaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&idle_), timeout);
}

bool ServingLoop::Step() {
  const absl::Time t0 = clock_->Now();
  const StepPlan& plan = scheduler_->Schedule();
  const absl::Time t1 = clock_->Now();
  PublishIntake();  // this step's admissions, before its forward pass
  const absl::StatusOr<EngineOutput> output = Forward(plan);
  const absl::Time t2 = clock_->Now();
  const StepTokens& tokens = sampler_.Sample(plan, output);
  scheduler_->Update(tokens);
  const absl::Time t3 = clock_->Now();
  if (plan.empty()) return false;
  ReportStep(plan, t0, t1, t2, t3);
  return true;
}

absl::StatusOr<EngineOutput> ServingLoop::Forward(const StepPlan& plan) {
  if (plan.empty()) return EngineOutput{};
  if (!plan.copies.empty()) RETURN_IF_ERROR(engine_->CopyBlocks(plan.copies));
  if (!plan.state_copies.empty()) {
    RETURN_IF_ERROR(engine_->CopyStates(plan.state_copies));
  }
  const size_t n = static_cast<size_t>(plan.num_logit_rows) *
                   static_cast<size_t>(scheduler_->vocab_size());
  if (logits_.size() < n) logits_.resize(n);
  const absl::Span<float> logits(logits_.data(), n);
  const absl::Span<const engine::RowSampling> rows = sampler_.EngineRows(plan);
  if (rows.empty()) {
    RETURN_IF_ERROR(engine_->Forward(plan.batch, logits));
    return EngineOutput{logits, {}};
  }
  tokens_.assign(rows.size(), -1);
  RETURN_IF_ERROR(engine_->ForwardAndSample(plan.batch, rows,
                                            absl::MakeSpan(tokens_), logits,
                                            [this] { sampler_.AwaitMasks(); }));
  return EngineOutput{logits, tokens_};
}

void ServingLoop::ReportStep(const StepPlan& plan, absl::Time t0, absl::Time t1,
                             absl::Time t2, absl::Time t3) {
  if (metrics_ == nullptr) return;
  StepStats stats;
  stats.schedule_time = t1 - t0;
  stats.forward_time = t2 - t1;
  stats.update_time = t3 - t2;
  stats.num_tokens = plan.batch.num_tokens();
  stats.num_sequences = static_cast<int32_t>(plan.batch.sequences.size());
  stats.num_sampled = plan.num_logit_rows;
  stats.num_preempted = plan.num_preempted;
  stats.num_running = scheduler_->num_running();
  stats.num_waiting = scheduler_->num_waiting();
  metrics_->OnStep(stats);
  const TenantQueues& queues = scheduler_->queues();
  for (int32_t t = 0; t < queues.num_tenants(); ++t) {
    const TenantStats s = queues.stats(t);
    metrics_->OnTenantLoad(queues.config(t).name, s.running, s.waiting);
  }
}

LoadSnapshot ServingLoop::Load() const {
  absl::MutexLock lock(&load_mu_);
  return load_;
}

void ServingLoop::PublishLoad() {
  const TenantQueues& queues = scheduler_->queues();
  {
    absl::MutexLock lock(&load_mu_);
    load_.tenants.resize(queues.num_tenants());
    for (int32_t t = 0; t < queues.num_tenants(); ++t) {
      const TenantStats s = queues.stats(t);
      LoadSnapshot::Tenant& out = load_.tenants[t];
      if (out.name.empty()) out.name = queues.config(t).name;
      out.running = s.running;
      out.waiting = s.waiting;
    }
    load_.kv = scheduler_->pager().Stats();
    load_.running = scheduler_->num_running();
    load_.waiting = scheduler_->num_waiting();
    load_.steps = scheduler_->counters().steps;
  }
  PublishIntake();
}

void ServingLoop::PublishIntake() {
  const TenantQueues& queues = scheduler_->queues();
  const absl::Time now = clock_->Now();
  intake_published_.resize(queues.num_tenants());
  for (int32_t t = 0; t < queues.num_tenants(); ++t) {
    intake_published_[t].waiting = queues.stats(t).waiting;
    intake_published_[t].retry_at =
        now + scheduler_->QueueFullRetryHint(t, now);
  }
  absl::MutexLock lock(&mu_);
  intake_.OnPublished(intake_published_);
}

}  // namespace paceline::scheduler
