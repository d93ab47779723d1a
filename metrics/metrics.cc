#include "metrics/metrics.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "metrics/build_info.h"
#include "metrics/metrics_impl.h"
#include "prometheus/text_serializer.h"

namespace paceline::metrics {
namespace {

using prometheus::Histogram;

// Bucket upper bounds, in the family's unit.
const Histogram::BucketBoundaries kTtftBuckets = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
    0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 60.0};
const Histogram::BucketBoundaries kItlBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15,
    0.2,   0.3,    0.4,   0.5,  0.75,  1.0,  2.5,   5.0};
const Histogram::BucketBoundaries kRequestBuckets = {
    0.01, 0.05, 0.1,  0.25, 0.5,   1.0,   2.5,   5.0,  10.0,
    15.0, 20.0, 30.0, 60.0, 120.0, 240.0, 480.0, 960.0};
const Histogram::BucketBoundaries kQueueBuckets = {
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1,  0.25,  0.5,
    1.0,   2.5,   5.0,  10.0,  30.0, 60.0, 120.0, 300.0};
const Histogram::BucketBoundaries kStepBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};
const Histogram::BucketBoundaries kStepTokenBuckets = {
    1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};

double Seconds(absl::Duration d) {
  return std::max(0.0, absl::ToDoubleSeconds(d));
}

// A TenantSeries::requests slot per label value: one per FinishReason, then
// "eos" (kStop by an end-of-sequence token).
int FinishLabelIndex(FinishReason reason, bool end_of_sequence) {
  if (reason == FinishReason::kStop && end_of_sequence) {
    return kNumFinishReasons;
  }
  return static_cast<int>(reason);
}

}  // namespace

absl::string_view FinishReasonLabel(FinishReason reason, bool end_of_sequence) {
  if (reason == FinishReason::kStop && end_of_sequence) return "eos";
  return FinishReasonName(reason);
}

std::string RejectionReason(absl::StatusCode code) {
  std::string name = absl::StatusCodeToString(code);
  if (name.empty()) name = "unknown";
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return name;
}

Metrics::Impl::Impl(MetricsOptions opts)
    : options(std::move(opts)),
      start(options.now ? options.now() : absl::Now()),
      registry(std::make_shared<prometheus::Registry>()) {
  const prometheus::Labels model = {{"model", options.model}};
  auto counter = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildCounter()
                .Name(name)
                .Help(help)
                .Labels(model)
                .Register(*registry);
  };
  auto gauge = [&](const std::string& name, const std::string& help) {
    return &prometheus::BuildGauge()
                .Name(name)
                .Help(help)
                .Labels(model)
                .Register(*registry);
  };
  auto histogram = [&](const std::string& name, const std::string& help,
                       const Histogram::BucketBoundaries& buckets) {
    return &prometheus::BuildHistogram()
                .Name(name)
                .Help(help)
                .Labels(model)
                .Register(*registry)
                .Add({}, buckets);
  };

  // --- Requests, per tenant ---------------------------------------------
  auto* requests = counter(
      "paceline_requests_total",
      "Requests finished, by finish reason (eos, stop, length, cancelled, "
      "error) and tenant.");
  auto* prompt = counter("paceline_prompt_tokens_total",
                         "Prompt tokens of finished requests that were "
                         "admitted (prefilled), by tenant.");
  auto* generation =
      counter("paceline_generation_tokens_total",
              "Tokens sampled (including the EOS or stop token that ended a "
              "request), by tenant.");
  auto* running = gauge("paceline_requests_running",
                        "Requests in the running batch, by tenant.");
  auto* waiting = gauge("paceline_requests_waiting",
                        "Requests queued (or preempted) waiting to run, by "
                        "tenant.");
  auto* intake_cpu =
      counter("paceline_intake_cpu_seconds_total",
              "CPU time spent parsing, rendering and tokenizing requests "
              "(and Tokenize / Detokenize) on the intake pool, by tenant.");
  auto make_series = [&](const std::string& tenant) {
    TenantSeries s;
    auto add_request_series = [&](FinishReason reason, bool eos) {
      s.requests[FinishLabelIndex(reason, eos)] = &requests->Add(
          {{"finish_reason", std::string(FinishReasonLabel(reason, eos))},
           {"tenant", tenant}});
    };
    for (int r = 0; r < kNumFinishReasons; ++r) {
      add_request_series(static_cast<FinishReason>(r), false);
    }
    add_request_series(FinishReason::kStop, true);
    s.prompt_tokens = &prompt->Add({{"tenant", tenant}});
    s.generation_tokens = &generation->Add({{"tenant", tenant}});
    s.running = &running->Add({{"tenant", tenant}});
    s.waiting = &waiting->Add({{"tenant", tenant}});
    s.intake_cpu = &intake_cpu->Add({{"tenant", tenant}});
    return s;
  };
  for (const std::string& t : options.tenants) {
    if (t != other && !tenants.contains(t)) tenants.emplace(t, make_series(t));
  }
  other_series = make_series(other);
  rejections = counter(
      "paceline_rejections_total",
      "Generation requests refused before running, by reason (the "
      "lower-case gRPC code) and tenant (\"other\" when unauthenticated).");

  // --- Requests, latencies ------------------------------------------------
  e2e_latency = histogram("paceline_e2e_request_latency_seconds",
                          "From queued to generation finished, any finish "
                          "reason.",
                          kRequestBuckets);
  queue_time =
      histogram("paceline_request_queue_time_seconds",
                "From queued to first admitted into the batch.", kQueueBuckets);
  intake_wait = histogram(
      "paceline_intake_wait_seconds",
      "From a request's arrival to the intake pool starting its work.",
      kQueueBuckets);
  ttft = histogram("paceline_time_to_first_token_seconds",
                   "From queued to the first token sampled.", kTtftBuckets);
  itl = histogram("paceline_inter_token_latency_seconds",
                  "Between consecutive tokens sampled for a request.",
                  kItlBuckets);
  ttft_delivered = histogram(
      "paceline_time_to_first_token_delivered_seconds",
      "Generate streams: from queued to the first token written to the "
      "client.",
      kTtftBuckets);
  itl_delivered = histogram(
      "paceline_inter_token_latency_delivered_seconds",
      "Generate streams: between consecutive tokens written to the client "
      "(0 for tokens after the first of one message).",
      kItlBuckets);
  preemptions = &counter("paceline_preemptions_total",
                         "Requests preempted (KV dropped, recomputed later).")
                     ->Add({});
  spec_draft_tokens =
      &counter("paceline_spec_decode_draft_tokens_total",
               "Speculative decoding: n-gram draft tokens run by the engine "
               "(of finished requests).")
           ->Add({});
  spec_accepted_tokens =
      &counter("paceline_spec_decode_accepted_tokens_total",
               "Speculative decoding: draft tokens accepted as the "
               "request's own (of finished requests).")
           ->Add({});
  forced_tokens =
      &counter("paceline_forced_tokens_total",
               "Structured output's fast-forward: tokens the constraint "
               "forced, appended without sampling (of finished requests).")
           ->Add({});

  // --- Load -----------------------------------------------------------------
  num_running = &gauge("paceline_num_requests_running",
                       "Requests in the running batch (all tenants).")
                     ->Add({});
  num_waiting = &gauge("paceline_num_requests_waiting",
                       "Requests waiting to run (all tenants).")
                     ->Add({});
  kv_usage = &gauge("paceline_kv_cache_usage_ratio",
                    "KV cache blocks in use by live requests / all blocks "
                    "(0..1).")
                  ->Add({});
  auto* blocks = gauge("paceline_kv_cache_blocks",
                       "KV cache blocks by state: used (by live requests), "
                       "cached (prefix cache, evictable), free.");
  kv_used = &blocks->Add({{"state", "used"}});
  kv_cached = &blocks->Add({{"state", "cached"}});
  kv_free = &blocks->Add({{"state", "free"}});
  auto* slots = gauge(
      "paceline_state_slots",
      "Recurrent-state slots of a hybrid model (0 for others) by state: "
      "running (a live request's, speculation snapshots included), snapshot "
      "(a cached prefix's state), free.");
  state_running = &slots->Add({{"state", "running"}});
  state_snapshot = &slots->Add({{"state", "snapshot"}});
  state_free = &slots->Add({{"state", "free"}});
  kv_capacity = &gauge("paceline_kv_cache_capacity_blocks",
                       "KV cache blocks in the pool.")
                     ->Add({});
  prefix_queried = &counter("paceline_prefix_cache_queried_tokens_total",
                            "Prompt tokens looked up in the prefix cache at "
                            "admission.")
                        ->Add({});
  prefix_hits = &counter("paceline_prefix_cache_hit_tokens_total",
                         "Prompt tokens found in the prefix cache at "
                         "admission.")
                     ->Add({});
  pacer_buffered = &gauge("paceline_pacer_buffered_tokens",
                          "Tokens generated but not yet released to clients "
                          "(all streams).")
                        ->Add({});
  pacer_streams =
      &gauge("paceline_pacer_streams", "Generate streams open for delivery.")
           ->Add({});

  // --- Engine
  // -----------------------------------------------------------------
  step_duration =
      histogram("paceline_engine_step_duration_seconds",
                "One engine step: schedule, forward, update.", kStepBuckets);
  step_tokens = histogram("paceline_engine_step_tokens",
                          "Tokens in one engine step's forward batch.",
                          kStepTokenBuckets);
  busy_seconds = &counter("paceline_engine_busy_seconds_total",
                          "Time spent in engine steps.")
                      ->Add({});
  busy_ratio = &gauge("paceline_engine_busy_ratio",
                      "Fraction of the last 10 s spent in engine steps.")
                    ->Add({});
  gauge("paceline_build_info", "Always 1; the build's version and commit.")
      ->Add({{"version", BuildVersion()}, {"commit", BuildCommit()}})
      .Set(1);
  if (options.kv_block_size > 0 && options.kv_num_blocks > 0) {
    gauge("paceline_cache_config_info",
          "Always 1; the KV cache's tokens per block and blocks in the pool.")
        ->Add({{"block_size", std::to_string(options.kv_block_size)},
               {"num_blocks", std::to_string(options.kv_num_blocks)}})
        .Set(1);
  }

  collectable =
      std::make_shared<HookedCollectable>(registry, [this] { Refresh(); });
}

const TenantSeries& Metrics::Impl::Tenant(absl::string_view tenant) const {
  auto it = tenants.find(tenant);
  return it != tenants.end() ? it->second : other_series;
}

void Metrics::Impl::UpdateBusyRatioLocked(absl::Time now) const {
  const int64_t now_second = absl::ToUnixSeconds(now);
  double busy = 0;
  for (int i = 0; i < kBusySlots; ++i) {
    if (busy_second[i] > now_second - kBusySlots &&
        busy_second[i] <= now_second) {
      busy += busy_in_second[i];
    }
  }
  // Nine whole seconds and the current one so far; less just after start.
  double window =
      (kBusySlots - 1) +
      absl::ToDoubleSeconds(now - absl::FromUnixSeconds(now_second));
  window = std::min(window, absl::ToDoubleSeconds(now - start));
  busy_ratio->Set(window > 0 ? std::clamp(busy / window, 0.0, 1.0) : 0.0);
}

void Metrics::Impl::Refresh() const {
  {
    absl::MutexLock lock(&hook_mu);
    if (hook) hook();
  }
  absl::MutexLock lock(&busy_mu);
  UpdateBusyRatioLocked(options.now ? options.now() : absl::Now());
}

Metrics::Metrics(MetricsOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

Metrics::~Metrics() = default;

const std::string& Metrics::TenantLabel(absl::string_view tenant) const {
  auto it = impl_->tenants.find(tenant);
  return it != impl_->tenants.end() ? it->first : impl_->other;
}

void Metrics::RequestFinished(absl::string_view tenant, FinishReason reason,
                              bool end_of_sequence,
                              absl::Duration e2e_latency) {
  impl_->Tenant(tenant)
      .requests[FinishLabelIndex(reason, end_of_sequence)]
      ->Increment();
  impl_->e2e_latency->Observe(Seconds(e2e_latency));
}

void Metrics::PromptTokens(absl::string_view tenant, int64_t tokens) {
  if (tokens > 0) {
    impl_->Tenant(tenant).prompt_tokens->Increment(static_cast<double>(tokens));
  }
}

void Metrics::IntakeJob(absl::string_view tenant, absl::Duration waited,
                        absl::Duration cpu) {
  impl_->Tenant(tenant).intake_cpu->Increment(Seconds(cpu));
  impl_->intake_wait->Observe(Seconds(waited));
}

void Metrics::RequestQueued(absl::Duration queue_time) {
  impl_->queue_time->Observe(Seconds(queue_time));
}

void Metrics::FirstToken(absl::string_view tenant, absl::Duration ttft) {
  impl_->Tenant(tenant).generation_tokens->Increment();
  impl_->ttft->Observe(Seconds(ttft));
}

void Metrics::NextToken(absl::string_view tenant,
                        absl::Duration since_previous) {
  impl_->Tenant(tenant).generation_tokens->Increment();
  impl_->itl->Observe(Seconds(since_previous));
}

void Metrics::Preempted() { impl_->preemptions->Increment(); }

void Metrics::SpeculativeTokens(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  impl_->spec_draft_tokens->Increment(static_cast<double>(drafted));
  impl_->spec_accepted_tokens->Increment(static_cast<double>(accepted));
}

void Metrics::ForcedTokens(absl::string_view tenant, int64_t forced) {
  if (forced <= 0) return;
  impl_->Tenant(tenant).generation_tokens->Increment(
      static_cast<double>(forced));
  impl_->forced_tokens->Increment(static_cast<double>(forced));
}

void Metrics::Rejected(absl::string_view tenant, absl::StatusCode code) {
  impl_->rejections
      ->Add(
          {{"reason", RejectionReason(code)}, {"tenant", TenantLabel(tenant)}})
      .Increment();
}

void Metrics::FirstDelivered(absl::Duration since_queued, int64_t tokens) {
  impl_->ttft_delivered->Observe(Seconds(since_queued));
  for (int64_t i = 1; i < tokens; ++i) impl_->itl_delivered->Observe(0);
}

void Metrics::NextDelivered(absl::Duration gap, int64_t tokens) {
  if (tokens <= 0) return;
  impl_->itl_delivered->Observe(Seconds(gap));
  for (int64_t i = 1; i < tokens; ++i) impl_->itl_delivered->Observe(0);
}

void Metrics::SetPacerBufferedTokens(int64_t tokens) {
  impl_->pacer_buffered->Set(static_cast<double>(tokens));
}

void Metrics::StreamOpened() { impl_->pacer_streams->Increment(); }

void Metrics::StreamClosed() { impl_->pacer_streams->Decrement(); }

void Metrics::SetTenantLoad(absl::string_view tenant, int64_t running,
                            int64_t waiting) {
  const TenantSeries& s = impl_->Tenant(tenant);
  s.running->Set(static_cast<double>(running));
  s.waiting->Set(static_cast<double>(waiting));
}

void Metrics::SetLoad(int64_t running, int64_t waiting) {
  impl_->num_running->Set(static_cast<double>(running));
  impl_->num_waiting->Set(static_cast<double>(waiting));
}

void Metrics::SetKvCache(const KvCacheState& kv) {
  impl_->kv_capacity->Set(static_cast<double>(kv.total_blocks));
  impl_->kv_used->Set(static_cast<double>(kv.used_blocks));
  impl_->kv_cached->Set(static_cast<double>(kv.cached_blocks));
  impl_->kv_free->Set(static_cast<double>(kv.free_blocks));
  impl_->state_running->Set(static_cast<double>(
      kv.total_state_slots - kv.free_state_slots - kv.state_snapshots));
  impl_->state_snapshot->Set(static_cast<double>(kv.state_snapshots));
  impl_->state_free->Set(static_cast<double>(kv.free_state_slots));
  impl_->kv_usage->Set(kv.total_blocks > 0
                           ? static_cast<double>(kv.used_blocks) /
                                 static_cast<double>(kv.total_blocks)
                           : 0.0);
  absl::MutexLock lock(&impl_->kv_mu);
  if (kv.prefix_query_tokens > impl_->last_query_tokens) {
    impl_->prefix_queried->Increment(
        static_cast<double>(kv.prefix_query_tokens - impl_->last_query_tokens));
    impl_->last_query_tokens = kv.prefix_query_tokens;
  }
  if (kv.prefix_hit_tokens > impl_->last_hit_tokens) {
    impl_->prefix_hits->Increment(
        static_cast<double>(kv.prefix_hit_tokens - impl_->last_hit_tokens));
    impl_->last_hit_tokens = kv.prefix_hit_tokens;
  }
}

void Metrics::EngineStep(absl::Duration duration, int64_t tokens,
                         absl::Time end) {
  const double seconds = Seconds(duration);
  impl_->step_duration->Observe(seconds);
  impl_->step_tokens->Observe(static_cast<double>(tokens));
  impl_->busy_seconds->Increment(seconds);
  const int64_t second = absl::ToUnixSeconds(end);
  const int slot = static_cast<int>(
      ((second % Impl::kBusySlots) + Impl::kBusySlots) % Impl::kBusySlots);
  absl::MutexLock lock(&impl_->busy_mu);
  if (impl_->busy_second[slot] != second) {
    impl_->busy_second[slot] = second;
    impl_->busy_in_second[slot] = 0;
  }
  impl_->busy_in_second[slot] += seconds;
}

void Metrics::SetCollectHook(std::function<void()> hook) {
  absl::MutexLock lock(&impl_->hook_mu);
  impl_->hook = std::move(hook);
}

std::string Metrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->collectable->Collect());
}

}  // namespace paceline::metrics
