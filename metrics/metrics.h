#ifndef PACELINE_METRICS_METRICS_H_
#define PACELINE_METRICS_METRICS_H_

// Every Prometheus family of pacelined, defined once, behind a plain C++
// API (std and Abseil types only: callers never see prometheus-cpp).
//
// Naming: prefix `paceline_`, base units in the name (`_seconds`,
// `_tokens`, `_blocks`), counters end in `_total`. Every series carries
// `model` (the served model id); the families listed with `tenant` carry
// it too, bounded by the configured tenants: any other name, or "", is
// counted as "other". README.md ("Metrics") lists every family.
//
// Thread-safety: every method may be called from any thread at any time.
// Counters, gauges and histograms are updated without a lock of this
// class; the engine-busy window and the prefix-cache totals take a short
// mutex.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/finish_reason.h"

namespace paceline::metrics {

// `finish_reason` of paceline_requests_total: FinishReasonName(reason)
// (common/finish_reason.h, the reason the scheduler reports), except that a
// kStop caused by an end-of-sequence token is "eos". Five values: "eos",
// "stop", "length", "cancelled", "error". `end_of_sequence` is ignored
// unless reason is kStop.
inline constexpr int kNumFinishLabels = kNumFinishReasons + 1;
absl::string_view FinishReasonLabel(FinishReason reason, bool end_of_sequence);

// The `reason` of paceline_rejections_total: the lower-case gRPC code name
// ("invalid_argument", "resource_exhausted", ...).
std::string RejectionReason(absl::StatusCode code);

struct MetricsOptions {
  std::string model;                 // the `model` label
  std::vector<std::string> tenants;  // the configured tenants
  // The clock of paceline_engine_busy_ratio's window; null: absl::Now.
  std::function<absl::Time()> now;
  // The KV pool's shape, for paceline_cache_config_info{block_size,
  // num_blocks} = 1 (the endpoint picker's cache-info gauge): tokens per
  // block and blocks in the pool. The family exists only when both are > 0.
  int64_t kv_block_size = 0;
  int64_t kv_num_blocks = 0;
};

// The KV pool as the pager reports it (kvpager::PagerStats).
struct KvCacheState {
  int64_t total_blocks = 0;
  int64_t used_blocks = 0;
  int64_t cached_blocks = 0;
  int64_t free_blocks = 0;
  // Recurrent-state slots (hybrid models; all 0 otherwise): free + held
  // == total, snapshots among the held.
  int64_t total_state_slots = 0;
  int64_t free_state_slots = 0;
  int64_t state_snapshots = 0;
  // Cumulative since start; the counters advance by the increase.
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
};

class Metrics {
 public:
  // The window of paceline_engine_busy_ratio.
  static constexpr absl::Duration kBusyWindow = absl::Seconds(10);

  explicit Metrics(MetricsOptions options);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The tenant label `tenant` is counted under: itself if configured,
  // else "other".
  const std::string& TenantLabel(absl::string_view tenant) const;

  // --- Requests (computed side) -------------------------------------------
  // paceline_requests_total (labelled by FinishReasonLabel),
  // paceline_e2e_request_latency_seconds.
  void RequestFinished(absl::string_view tenant, FinishReason reason,
                       bool end_of_sequence, absl::Duration e2e_latency);
  // paceline_prompt_tokens_total.
  void PromptTokens(absl::string_view tenant, int64_t tokens);
  // One intake pool job: paceline_intake_cpu_seconds_total (its CPU time)
  // and paceline_intake_wait_seconds (how long it waited).
  void IntakeJob(absl::string_view tenant, absl::Duration waited,
                 absl::Duration cpu);
  // paceline_request_queue_time_seconds.
  void RequestQueued(absl::Duration queue_time);
  // The first token sampled: paceline_time_to_first_token_seconds and one
  // paceline_generation_tokens_total.
  void FirstToken(absl::string_view tenant, absl::Duration ttft);
  // A later token sampled: paceline_inter_token_latency_seconds and one
  // paceline_generation_tokens_total.
  void NextToken(absl::string_view tenant, absl::Duration since_previous);
  // paceline_preemptions_total.
  void Preempted();
  // A finished request's speculative decoding: paceline_spec_decode_
  // draft_tokens_total and _accepted_tokens_total.
  void SpeculativeTokens(int64_t drafted, int64_t accepted);
  // A finished request's fast-forward: its forced tokens count in
  // paceline_generation_tokens_total (they were generated without a
  // sample of their own) and paceline_forced_tokens_total.
  void ForcedTokens(absl::string_view tenant, int64_t forced);
  // paceline_rejections_total.
  void Rejected(absl::string_view tenant, absl::StatusCode code);

  // --- Delivery side ------------------------------------------------------
  // The first write with tokens reached the client `since_queued` after the
  // request was queued, carrying `tokens` tokens: one
  // paceline_time_to_first_token_delivered_seconds, and 0 s inter-token
  // gaps for the tokens after the first.
  void FirstDelivered(absl::Duration since_queued, int64_t tokens);
  // A later write with `tokens` tokens, `gap` after the previous one: one
  // paceline_inter_token_latency_delivered_seconds of `gap`, then 0 s for
  // each further token (they arrived together).
  void NextDelivered(absl::Duration gap, int64_t tokens);
  // paceline_pacer_buffered_tokens.
  void SetPacerBufferedTokens(int64_t tokens);
  // paceline_pacer_streams.
  void StreamOpened();
  void StreamClosed();

  // --- Load -----------------------------------------------------------------
  // paceline_requests_running / _waiting{tenant}.
  void SetTenantLoad(absl::string_view tenant, int64_t running,
                     int64_t waiting);
  // paceline_num_requests_running / _waiting (the endpoint picker's).
  void SetLoad(int64_t running, int64_t waiting);
  // paceline_kv_cache_*, paceline_prefix_cache_*.
  void SetKvCache(const KvCacheState& kv);
  // One engine step that ended at `end`: paceline_engine_step_duration_seconds,
  // paceline_engine_step_tokens, paceline_engine_busy_seconds_total and the
  // busy window.
  void EngineStep(absl::Duration duration, int64_t tokens, absl::Time end);

  // --- Collection -----------------------------------------------------------
  // Called before every collection (a scrape or Serialize), on the
  // collecting thread, to refresh gauges read from elsewhere. Set it before
  // serving; it must outlive this object or be reset.
  void SetCollectHook(std::function<void()> hook);
  // Runs the hook, then renders every family in the Prometheus text format.
  std::string Serialize() const;

 private:
  friend class MetricsExposer;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace paceline::metrics

#endif  // PACELINE_METRICS_METRICS_H_
