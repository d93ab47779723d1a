#include "server/metrics_adapter.h"

#include <utility>

namespace paceline::server {

MetricsAdapter::MetricsAdapter(metrics::Metrics* metrics, IsEos is_eos,
                               scheduler::Clock* clock)
    : metrics_(metrics),
      is_eos_(std::move(is_eos)),
      clock_(clock != nullptr ? clock : scheduler::SystemClock::Get()) {}

MetricsAdapter::~MetricsAdapter() { metrics_->SetCollectHook(nullptr); }

void MetricsAdapter::AttachSources(const scheduler::ServingLoop* loop,
                                   const Pacer* pacer) {
  loop_ = loop;
  pacer_ = pacer;
  metrics_->SetCollectHook([this] { Refresh(); });
}

void MetricsAdapter::Refresh() {
  if (loop_ != nullptr) {
    const scheduler::LoadSnapshot load = loop_->Load();
    for (const scheduler::LoadSnapshot::Tenant& t : load.tenants) {
      metrics_->SetTenantLoad(t.name, t.running, t.waiting);
    }
    metrics_->SetLoad(load.running, load.waiting);
    metrics::KvCacheState kv;
    kv.total_blocks = load.kv.total_blocks;
    kv.used_blocks = load.kv.used_blocks;
    kv.cached_blocks = load.kv.cached_blocks;
    kv.free_blocks = load.kv.free_blocks;
    kv.total_state_slots = load.kv.total_state_slots;
    kv.free_state_slots = load.kv.free_state_slots;
    kv.state_snapshots = load.kv.state_snapshots;
    kv.prefix_query_tokens = load.kv.prefix_query_tokens;
    kv.prefix_hit_tokens = load.kv.prefix_hit_tokens;
    metrics_->SetKvCache(kv);
  }
  if (pacer_ != nullptr) {
    metrics_->SetPacerBufferedTokens(pacer_->buffered_tokens());
  }
}

bool MetricsAdapter::EndedByEos(const scheduler::FinishInfo& info,
                                const IsEos& is_eos) {
  // As FillFinished tells them apart: a stop string, or a stop token that
  // is not end-of-generation, is "stop".
  return info.reason == scheduler::FinishReason::kStop &&
         info.stop_string.empty() && info.stop_token >= 0 && is_eos &&
         is_eos(info.stop_token);
}

absl::string_view MetricsAdapter::FinishLabel(const scheduler::FinishInfo& info,
                                              const IsEos& is_eos) {
  return metrics::FinishReasonLabel(info.reason, EndedByEos(info, is_eos));
}

void MetricsAdapter::OnStep(const scheduler::StepStats& stats) {
  metrics_->EngineStep(
      stats.schedule_time + stats.forward_time + stats.update_time,
      stats.num_tokens, clock_->Now());
  metrics_->SetLoad(stats.num_running, stats.num_waiting);
}

void MetricsAdapter::OnTenantLoad(absl::string_view tenant, int32_t running,
                                  int32_t waiting) {
  metrics_->SetTenantLoad(tenant, running, waiting);
}

void MetricsAdapter::OnRejected(absl::string_view tenant,
                                absl::StatusCode code) {
  metrics_->Rejected(tenant, code);
}

void MetricsAdapter::OnIntakeJob(absl::string_view tenant,
                                 absl::Duration queued, absl::Duration cpu) {
  metrics_->IntakeJob(tenant, queued, cpu);
}

void MetricsAdapter::OnAdmitted(absl::string_view, absl::Duration queued) {
  metrics_->RequestQueued(queued);
}

void MetricsAdapter::OnFirstToken(absl::string_view tenant,
                                  absl::Duration ttft) {
  metrics_->FirstToken(tenant, ttft);
}

void MetricsAdapter::OnNextToken(absl::string_view tenant,
                                 absl::Duration since_previous) {
  metrics_->NextToken(tenant, since_previous);
}

void MetricsAdapter::OnPreempted(absl::string_view) { metrics_->Preempted(); }

void MetricsAdapter::OnFinished(absl::string_view tenant,
                                const scheduler::FinishInfo& info) {
  const scheduler::RequestTimings& t = info.timings;
  const absl::Duration e2e =
      t.arrival != absl::InfinitePast() && t.finished != absl::InfinitePast()
          ? t.finished - t.arrival
          : absl::ZeroDuration();
  metrics_->RequestFinished(tenant, info.reason, EndedByEos(info, is_eos_),
                            e2e);
  // Prompt tokens count once the request was admitted (prefilled).
  if (t.first_scheduled != absl::InfinitePast()) {
    metrics_->PromptTokens(tenant, info.usage.prompt_tokens);
  }
  metrics_->SpeculativeTokens(info.usage.draft_tokens,
                              info.usage.accepted_draft_tokens);
  metrics_->ForcedTokens(tenant, info.usage.forced_tokens);
}

void MetricsAdapter::OnStreamOpened() { metrics_->StreamOpened(); }

void MetricsAdapter::OnStreamClosed() { metrics_->StreamClosed(); }

void MetricsAdapter::OnDelivered(absl::string_view, bool first,
                                 absl::Duration since, int32_t tokens) {
  if (first) {
    metrics_->FirstDelivered(since, tokens);
  } else {
    metrics_->NextDelivered(since, tokens);
  }
}

}  // namespace paceline::server
