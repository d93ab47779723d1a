#include "scheduler/intake_gate.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/retry_hint.h"

namespace paceline::scheduler {

IntakeGate::IntakeGate(const std::vector<TenantConfig>& tenants) {
  for (const TenantConfig& t : tenants) {
    index_[t.name] = static_cast<int32_t>(tenants_.size());
    Tenant gate;
    gate.name = t.name;
    gate.max_queued = t.max_queued;
    tenants_.push_back(std::move(gate));
  }
}

absl::Status IntakeGate::Admit(absl::string_view tenant, int32_t n,
                               absl::Time now) {
  const auto it = index_.find(tenant);
  if (it == index_.end()) return absl::OkStatus();
  Tenant& t = tenants_[it->second];
  const int64_t queued = int64_t{t.waiting} + t.in_flight + t.in_inbox;
  if (t.max_queued > 0 && queued + n > t.max_queued) {
    return ResourceExhaustedWithRetry(
        absl::StrCat("tenant '", t.name, "' has ", queued,
                     " requests queued, its limit (max_queued ", t.max_queued,
                     ")"),
        std::max(t.retry_at - now, kQueueFullRetryHint));
  }
  t.in_inbox += n;
  return absl::OkStatus();
}

void IntakeGate::OnInboxTaken() {
  for (Tenant& t : tenants_) {
    t.in_flight += t.in_inbox;
    t.in_inbox = 0;
  }
}

void IntakeGate::OnPublished(const std::vector<Published>& tenants) {
  const size_t n = std::min(tenants.size(), tenants_.size());
  for (size_t i = 0; i < n; ++i) {
    tenants_[i].waiting = tenants[i].waiting;
    tenants_[i].retry_at = tenants[i].retry_at;
    tenants_[i].in_flight = 0;
  }
}

}  // namespace paceline::scheduler
