#ifndef PACELINE_SERVER_METRICS_ADAPTER_H_
#define PACELINE_SERVER_METRICS_ADAPTER_H_

// Maps what the scheduler, the serving loop, the stream buffers and the
// service report onto metrics::Metrics (the one place that knows the
// Prometheus families). The scheduler and the buffers know nothing of
// metrics/; metrics/ knows nothing of them.
//
// Gauges read from elsewhere (the KV pool, per-tenant load, the pacer's
// buffer) are refreshed at every scrape from ServingLoop::Load() and the
// Pacer, and also after every step from what the loop reports.
//
// Thread-safe, as Metrics is.

#include <cstdint>
#include <functional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "metrics/metrics.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler_metrics.h"
#include "scheduler/serving_loop.h"
#include "server/delivery/pacer.h"
#include "server/frontend/intake_pool.h"
#include "server/frontend/server_observers.h"

namespace paceline::server {

class MetricsAdapter final : public scheduler::SchedulerMetrics,
                             public DeliveryObserver,
                             public RejectionObserver,
                             public IntakeObserver {
 public:
  // Whether a token that stopped a request is end-of-sequence
  // (Tokenizer::IsEog): "eos", else "stop".
  using IsEos = std::function<bool(int32_t token)>;

  // `metrics` and `clock` (null: SystemClock) must outlive the adapter.
  MetricsAdapter(metrics::Metrics* metrics, IsEos is_eos,
                 scheduler::Clock* clock = nullptr);
  // Resets the collect hook.
  ~MetricsAdapter() override;
  MetricsAdapter(const MetricsAdapter&) = delete;
  MetricsAdapter& operator=(const MetricsAdapter&) = delete;

  // Where scrapes read the gauges from; either may be null. Both must
  // outlive the adapter (or the exposer serving it). Call before serving.
  void AttachSources(const scheduler::ServingLoop* loop, const Pacer* pacer);
  // What a scrape does first: reads the sources into the gauges.
  void Refresh();

  // Whether an end-of-sequence token ended the request (kStop by a stop
  // token that is_eos names, no stop string): metrics' "eos".
  static bool EndedByEos(const scheduler::FinishInfo& info,
                         const IsEos& is_eos);
  // The finish_reason label a finish is counted under
  // (metrics::FinishReasonLabel).
  static absl::string_view FinishLabel(const scheduler::FinishInfo& info,
                                       const IsEos& is_eos);

  // --- scheduler::SchedulerMetrics (engine thread) --------------------------
  void OnStep(const scheduler::StepStats& stats) override;
  void OnTenantLoad(absl::string_view tenant, int32_t running,
                    int32_t waiting) override;
  // Also RejectionObserver's (the same signature): one family for both.
  void OnRejected(absl::string_view tenant, absl::StatusCode code) override;

  // --- IntakeObserver -------------------------------------------------------
  void OnIntakeJob(absl::string_view tenant, absl::Duration queued,
                   absl::Duration cpu) override;
  void OnAdmitted(absl::string_view tenant, absl::Duration queued) override;
  void OnFirstToken(absl::string_view tenant, absl::Duration ttft) override;
  void OnNextToken(absl::string_view tenant,
                   absl::Duration since_previous) override;
  void OnPreempted(absl::string_view tenant) override;
  void OnFinished(absl::string_view tenant,
                  const scheduler::FinishInfo& info) override;

  // --- DeliveryObserver
  // -------------------------------------------------------
  void OnStreamOpened() override;
  void OnStreamClosed() override;
  void OnDelivered(absl::string_view tenant, bool first, absl::Duration since,
                   int32_t tokens) override;

 private:
  metrics::Metrics* const metrics_;
  const IsEos is_eos_;
  scheduler::Clock* const clock_;
  const scheduler::ServingLoop* loop_ = nullptr;  // set before serving
  const Pacer* pacer_ = nullptr;                  // set before serving
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_METRICS_ADAPTER_H_
