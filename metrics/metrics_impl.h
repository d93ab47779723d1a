#ifndef PACELINE_METRICS_METRICS_IMPL_H_
#define PACELINE_METRICS_METRICS_IMPL_H_

// Internal to metrics/: the state behind Metrics, shared with the exposer.
// Nothing outside this folder includes it.

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics/metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace paceline::metrics {

// The series of one `tenant` label value, created up front.
struct TenantSeries {
  std::array<prometheus::Counter*, kNumFinishLabels> requests{};
  prometheus::Counter* prompt_tokens = nullptr;
  prometheus::Counter* generation_tokens = nullptr;
  prometheus::Gauge* running = nullptr;
  prometheus::Gauge* waiting = nullptr;
  prometheus::Counter* intake_cpu = nullptr;
};

// What the exposer serves: `refresh`, then the registry.
class HookedCollectable final : public prometheus::Collectable {
 public:
  HookedCollectable(std::shared_ptr<prometheus::Registry> registry,
                    std::function<void()> refresh)
      : registry_(std::move(registry)), refresh_(std::move(refresh)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    refresh_();
    return registry_->Collect();
  }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::function<void()> refresh_;
};

struct Metrics::Impl {
  explicit Impl(MetricsOptions options);

  const TenantSeries& Tenant(absl::string_view tenant) const;
  // Updates the busy-ratio gauge for `now` (the window's mutex held).
  void UpdateBusyRatioLocked(absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(busy_mu);
  // The hook, then the busy ratio as of now.
  void Refresh() const;

  // Constant after construction.
  const MetricsOptions options;
  const std::string other = "other";
  const absl::Time start;
  const std::shared_ptr<prometheus::Registry> registry;
  absl::flat_hash_map<std::string, TenantSeries> tenants;
  TenantSeries other_series;
  prometheus::Family<prometheus::Counter>* rejections = nullptr;
  prometheus::Histogram* e2e_latency = nullptr;
  prometheus::Histogram* queue_time = nullptr;
  prometheus::Histogram* intake_wait = nullptr;
  prometheus::Histogram* ttft = nullptr;
  prometheus::Histogram* itl = nullptr;
  prometheus::Histogram* ttft_delivered = nullptr;
  prometheus::Histogram* itl_delivered = nullptr;
  prometheus::Counter* preemptions = nullptr;
  prometheus::Counter* spec_draft_tokens = nullptr;
  prometheus::Counter* spec_accepted_tokens = nullptr;
  prometheus::Counter* forced_tokens = nullptr;
  prometheus::Gauge* pacer_buffered = nullptr;
  prometheus::Gauge* pacer_streams = nullptr;
  prometheus::Gauge* num_running = nullptr;
  prometheus::Gauge* num_waiting = nullptr;
  prometheus::Gauge* kv_usage = nullptr;
  prometheus::Gauge* kv_used = nullptr;
  prometheus::Gauge* kv_cached = nullptr;
  prometheus::Gauge* kv_free = nullptr;
  // Recurrent-state slots (hybrid models; 0 otherwise), by state.
  prometheus::Gauge* state_running = nullptr;
  prometheus::Gauge* state_snapshot = nullptr;
  prometheus::Gauge* state_free = nullptr;
  prometheus::Gauge* kv_capacity = nullptr;
  prometheus::Counter* prefix_queried = nullptr;
  prometheus::Counter* prefix_hits = nullptr;
  prometheus::Histogram* step_duration = nullptr;
  prometheus::Histogram* step_tokens = nullptr;
  prometheus::Counter* busy_seconds = nullptr;
  prometheus::Gauge* busy_ratio = nullptr;
  std::shared_ptr<HookedCollectable> collectable;

  // The hook; set before serving.
  mutable absl::Mutex hook_mu;
  std::function<void()> hook ABSL_GUARDED_BY(hook_mu);

  // Prefix-cache totals last seen (SetKvCache).
  absl::Mutex kv_mu;
  int64_t last_query_tokens ABSL_GUARDED_BY(kv_mu) = 0;
  int64_t last_hit_tokens ABSL_GUARDED_BY(kv_mu) = 0;

  // Busy time per wall-clock second, for the last kBusyWindow: slot
  // i holds second `busy_second[i]`.
  static constexpr int kBusySlots = 10;
  mutable absl::Mutex busy_mu;
  std::array<int64_t, kBusySlots> busy_second ABSL_GUARDED_BY(busy_mu){};
  std::array<double, kBusySlots> busy_in_second ABSL_GUARDED_BY(busy_mu){};
};

}  // namespace paceline::metrics

#endif  // PACELINE_METRICS_METRICS_IMPL_H_
