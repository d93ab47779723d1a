#include "scheduler/tenant_queues.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "scheduler/retry_hint.h"

namespace paceline::scheduler {
namespace {

absl::Status CheckConfig(const TenantConfig& c) {
  const std::string who = absl::StrCat("tenant '", c.name, "': ");
  if (c.name.empty()) return absl::InvalidArgumentError("tenant name is empty");
  if (!(c.weight > 0) || !std::isfinite(c.weight)) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, "weight must be > 0, got ", c.weight));
  }
  if (c.max_running < 0 || c.max_queued < 0 || c.tokens_per_minute < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, "max_running, max_queued and tokens_per_minute must be >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TenantQueues>> TenantQueues::Create(
    std::vector<TenantConfig> tenants, FairShareWeights weights, absl::Time now,
    SchedulerMetrics* metrics) {
  if (tenants.empty()) {
    return absl::InvalidArgumentError("at least one tenant is required");
  }
  if (!(weights.w_in > 0) || !(weights.w_out > 0) ||
      !std::isfinite(weights.w_in) || !std::isfinite(weights.w_out)) {
    return absl::InvalidArgumentError("w_in and w_out must be > 0");
  }
  absl::flat_hash_set<std::string> names;
  std::unique_ptr<TenantQueues> queues(
      new TenantQueues(weights, metrics, tenants.size()));
  for (size_t i = 0; i < tenants.size(); ++i) {
    if (absl::Status s = CheckConfig(tenants[i]); !s.ok()) return s;
    if (!names.insert(tenants[i].name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tenant '", tenants[i].name, "' is configured twice"));
    }
    Tenant& t = queues->tenants_[i];
    t.bucket = TokenBucket::PerMinute(tenants[i].tokens_per_minute, now);
    t.config = std::move(tenants[i]);
  }
  return queues;
}

int32_t TenantQueues::Find(absl::string_view name) const {
  for (size_t i = 0; i < tenants_.size(); ++i) {
    if (tenants_[i].config.name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

absl::Status TenantQueues::CheckQueueLimit(int32_t tenant, absl::Time now,
                                           int32_t n) {
  Tenant& t = tenants_[tenant];
  if (t.config.max_queued == 0 ||
      int64_t{t.stats.waiting} + n <= t.config.max_queued) {
    return absl::OkStatus();
  }
  return ResourceExhaustedWithRetry(
      n == 1
          ? absl::StrCat("tenant '", t.config.name, "' has ", t.stats.waiting,
                         " requests queued, its limit (max_queued)")
          : absl::StrCat("tenant '", t.config.name, "' has ", t.stats.waiting,
                         " requests queued; ", n,
                         " more would pass its limit (max_queued ",
                         t.config.max_queued, ")"),
      QueueFullRetryHint(tenant, now));
}

absl::Duration TenantQueues::QueueFullRetryHint(int32_t tenant,
                                                absl::Time now) {
  return std::max(TimeUntilFits(tenants_[tenant], now), kQueueFullRetryHint);
}

void TenantQueues::PushBack(std::unique_ptr<Request> request) {
  const int32_t tenant = request->tenant_index();
  Tenant& t = tenants_[tenant];
  if (!Active(t)) Lift(tenant);
  t.stats.waiting += request->group_size();
  num_waiting_ += request->group_size();
  t.queues[static_cast<int>(request->priority())].push_back(std::move(request));
}

void TenantQueues::PushFront(std::unique_ptr<Request> request) {
  Tenant& t = tenants_[request->tenant_index()];
  t.stats.waiting += request->group_size();
  num_waiting_ += request->group_size();
  t.queues[static_cast<int>(request->priority())].push_front(
      std::move(request));
}

void TenantQueues::Lift(int32_t tenant) {
  double lowest = INFINITY;
  for (size_t i = 0; i < tenants_.size(); ++i) {
    if (static_cast<int32_t>(i) != tenant && Active(tenants_[i])) {
      lowest = std::min(lowest, tenants_[i].stats.counter);
    }
  }
  if (std::isfinite(lowest)) {
    double& counter = tenants_[tenant].stats.counter;
    counter = std::max(counter, lowest);
  }
}

void TenantQueues::OnCancelled(const Request& request) {
  Tenant& t = tenants_[request.tenant_index()];
  --t.stats.waiting;
  --num_waiting_;
  ++t.dead;
  if (t.dead > std::max(64, t.stats.waiting)) Compact(t);
}

void TenantQueues::OnHeldLeft(int32_t tenant, int32_t n) {
  tenants_[tenant].stats.waiting -= n;
  num_waiting_ -= n;
}

void TenantQueues::CountSkip(Tenant& t, const Request& dropped) {
  --t.dead;
  ++t.stats.skipped[static_cast<int>(dropped.cancel_reason())];
  if (metrics_ != nullptr) {
    metrics_->OnQueueSkip(t.config.name, dropped.cancel_reason());
  }
}

void TenantQueues::Compact(Tenant& t) {
  for (auto& queue : t.queues) {
    std::erase_if(queue, [&](const std::unique_ptr<Request>& r) {
      if (r->state() != RequestState::kFinished) return false;
      CountSkip(t, *r);
      return true;
    });
  }
}

Request* TenantQueues::Front(Tenant& t) {
  for (auto& queue : t.queues) {
    while (!queue.empty() &&
           queue.front()->state() == RequestState::kFinished) {
      CountSkip(t, *queue.front());
      queue.pop_front();
    }
    if (!queue.empty()) return queue.front().get();
  }
  return nullptr;
}

const Request* TenantQueues::FirstLive(const Tenant& t) {
  // Dead entries are skipped, not dropped.
  for (const auto& queue : t.queues) {
    for (const std::unique_ptr<Request>& r : queue) {
      if (r->state() != RequestState::kFinished) return r.get();
    }
  }
  return nullptr;
}

bool TenantQueues::HasRoom(const Tenant& t) const {
  if (t.config.max_running == 0) return true;
  const Request* front = FirstLive(t);
  if (front == nullptr) return t.stats.running < t.config.max_running;
  return int64_t{t.stats.running} + front->group_size() <= t.config.max_running;
}

absl::Duration TenantQueues::TimeUntilFits(Tenant& t, absl::Time now) {
  if (t.bucket.unlimited()) return absl::ZeroDuration();
  const Request* front = FirstLive(t);
  // Nothing to reserve: a readmission (already reserved) or no entry.
  const int64_t need = front == nullptr ? 0 : front->ReservationNeeded();
  if (need == 0) return absl::ZeroDuration();
  return t.bucket.TimeUntilAllowed(static_cast<double>(need), now);
}

bool TenantQueues::Admissible(Tenant& t, absl::Time now) {
  return t.stats.waiting > 0 && HasRoom(t) &&
         TimeUntilFits(t, now) == absl::ZeroDuration();
}

Request* TenantQueues::Peek(absl::Time now, absl::Span<const bool> skip) {
  Tenant* best = nullptr;
  for (size_t i = 0; i < tenants_.size(); ++i) {
    Tenant& t = tenants_[i];
    if (i < skip.size() && skip[i]) continue;
    if (Admissible(t, now) &&
        (best == nullptr || t.stats.counter < best->stats.counter)) {
      best = &t;
    }
  }
  return best == nullptr ? nullptr : Front(*best);
}

void TenantQueues::ForEachAdmissible(
    absl::Time now, absl::FunctionRef<bool(const Request&)> visit) {
  for (Tenant& t : tenants_) {
    if (!Admissible(t, now)) continue;
    int64_t room = t.config.max_running == 0
                       ? std::numeric_limits<int64_t>::max()
                       : int64_t{t.config.max_running} - t.stats.running;
    TokenBucket bucket = t.bucket;  // a copy: what admitting them would leave
    bool more = true;
    for (const auto& queue : t.queues) {
      for (auto it = queue.begin(); more && it != queue.end(); ++it) {
        const Request& r = **it;
        if (r.state() == RequestState::kFinished) continue;
        room -= r.group_size();
        const double need = static_cast<double>(r.ReservationNeeded());
        more = room >= 0 && (need == 0 || bucket.Allows(need, now)) && visit(r);
        bucket.Take(need, now);
      }
    }
  }
}

std::unique_ptr<Request> TenantQueues::Pop(Request* peeked, absl::Time now) {
  Tenant& t = tenants_[peeked->tenant_index()];
  auto& queue = t.queues[static_cast<int>(peeked->priority())];
  // Peek returned the front of this queue; nothing ran in between.
  std::unique_ptr<Request> request = std::move(queue.front());
  queue.pop_front();
  t.stats.waiting -= request->group_size();
  num_waiting_ -= request->group_size();
  const int64_t reserved = request->TakeReservation();
  t.stats.budget_tokens += reserved;
  t.bucket.Take(static_cast<double>(reserved), now);
  return request;
}

bool TenantQueues::HasAdmissible(absl::Time now) {
  for (Tenant& t : tenants_) {
    if (Admissible(t, now)) return true;
  }
  return false;
}

absl::Time TenantQueues::NextAdmissibleTime(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (Tenant& t : tenants_) {
    if (t.stats.waiting > 0 && HasRoom(t)) {
      next = std::min(next, now + TimeUntilFits(t, now));
    }
  }
  return next;
}

double TenantQueues::BudgetLevel(int32_t tenant, absl::Time now) {
  return tenants_[tenant].bucket.Level(now);
}

void TenantQueues::OnStarted(int32_t tenant) {
  ++tenants_[tenant].stats.running;
}

void TenantQueues::OnStopped(int32_t tenant) {
  --tenants_[tenant].stats.running;
}

void TenantQueues::Charge(int32_t tenant, int64_t tokens, double w) {
  Tenant& t = tenants_[tenant];
  const double service = static_cast<double>(tokens) * w;
  t.stats.service += service;
  t.stats.counter += service / t.config.weight;
}

void TenantQueues::ChargePrompt(int32_t tenant, int64_t tokens) {
  tenants_[tenant].stats.prompt_tokens += tokens;
  Charge(tenant, tokens, weights_.w_in);
}

void TenantQueues::ChargeGenerated(int32_t tenant, int64_t tokens) {
  tenants_[tenant].stats.generated_tokens += tokens;
  Charge(tenant, tokens, weights_.w_out);
}

void TenantQueues::ReturnUnused(Request* request, absl::Time now) {
  Tenant& t = tenants_[request->tenant_index()];
  const int64_t unused = request->ReturnReservation();
  t.stats.budget_tokens -= unused;
  t.bucket.Give(static_cast<double>(unused), now);
}

std::vector<std::unique_ptr<Request>> TenantQueues::TakeAll() {
  std::vector<std::unique_ptr<Request>> live;
  for (Tenant& t : tenants_) {
    for (auto& queue : t.queues) {
      for (std::unique_ptr<Request>& r : queue) {
        if (r->state() == RequestState::kFinished) {
          CountSkip(t, *r);
        } else {
          live.push_back(std::move(r));
        }
      }
      queue.clear();
    }
    t.stats.waiting = 0;
  }
  num_waiting_ = 0;
  return live;
}

}  // namespace paceline::scheduler
