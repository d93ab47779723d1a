#include "scheduler/scheduler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "engine/sampling/sampler.h"
#include "scheduler/context_limit.h"
#include "scheduler/ngram_proposer.h"

namespace paceline::scheduler {

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(
    const SchedulerOptions& options, const engine::Engine& engine,
    const engine::Tokenizer* tokenizer, Clock* clock,
    SchedulerMetrics* metrics) {
  if (tokenizer == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("a tokenizer and a clock are required");
  }
  if (options.max_batched_tokens < 0 ||
      options.max_batched_tokens > engine.max_tokens_per_step()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_batched_tokens must be in [0, ", engine.max_tokens_per_step(),
        "] (0 = the engine's step limit), got ", options.max_batched_tokens));
  }
  if (!(options.admission_reserve >= 0 && options.admission_reserve < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("admission_reserve must be in [0, 1), got ",
                     options.admission_reserve));
  }
  if (options.speculation_max_step_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculation_max_step_tokens must be >= 0, got ",
                     options.speculation_max_step_tokens));
  }
  if (options.max_running < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_running must be >= 1, got ", options.max_running));
  }
  if (engine.config().n_vocab < 1 || engine.config().n_vocab > INT32_MAX) {
    return absl::InvalidArgumentError("the engine's vocabulary is empty");
  }
  std::unique_ptr<Scheduler> s(
      new Scheduler(options, engine, tokenizer, clock, metrics));
  ASSIGN_OR_RETURN(s->pager_,
                   kvpager::KvPager::Create(
                       engine.num_blocks(), engine.block_size(),
                       engine.kv_group_windows(), engine.num_state_slots()));
  if (engine.num_state_slots() > 0 && options.state_snapshots != 0) {
    RETURN_IF_ERROR(s->pager_->EnableStateSnapshots(
        options.state_snapshots < 0
            ? engine.num_state_slots()
            : std::min(options.state_snapshots, engine.num_state_slots())));
  }
  ASSIGN_OR_RETURN(s->queues_,
                   TenantQueues::Create(options.tenants, options.fair_share,
                                        clock->Now(), metrics));
  for (int32_t i = 0; i < s->queues_->num_tenants(); ++i) {
    s->tenant_index_[s->queues_->config(i).name] = i;
  }
  s->generated_.assign(s->queues_->num_tenants(), 0);
  return s;
}

Scheduler::Scheduler(const SchedulerOptions& options,
                     const engine::Engine& engine,
                     const engine::Tokenizer* tokenizer, Clock* clock,
                     SchedulerMetrics* metrics)
    : engine_max_tokens_(engine.max_tokens_per_step()),
      // Every running request holds a state slot (scheduler.h).
      max_running_(engine.num_state_slots() > 0
                       ? std::min(options.max_running, engine.num_state_slots())
                       : options.max_running),
      vocab_size_(static_cast<int32_t>(engine.config().n_vocab)),
      pooling_(engine.config().pooling),
      returns_hidden_(engine.returns_hidden()),
      n_embd_(engine.config().n_embd),
      context_length_(engine.config().context_length),
      kv_group_windows_(engine.kv_group_windows()),
      block_size_(engine.block_size()),
      num_blocks_(engine.num_blocks()),
      admission_reserve_(options.admission_reserve),
      speculation_max_step_tokens_(options.speculation_max_step_tokens),
      tokenizer_(tokenizer),
      clock_(clock),
      metrics_(metrics),
      max_batched_tokens_(options.max_batched_tokens > 0
                              ? options.max_batched_tokens
                              : engine.max_tokens_per_step()) {
  admission_reserve_tokens_ = AdmissionReserveTokens();
}

int32_t Scheduler::AdmissionReserveTokens() const {
  return static_cast<int32_t>(max_batched_tokens_ * admission_reserve_);
}

absl::Status Scheduler::set_max_batched_tokens(int32_t tokens) {
  if (tokens < 1 || tokens > engine_max_tokens_) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batched_tokens must be in [1, ", engine_max_tokens_,
                     "], got ", tokens));
  }
  max_batched_tokens_ = tokens;
  admission_reserve_tokens_ = AdmissionReserveTokens();
  return absl::OkStatus();
}

Scheduler::~Scheduler() {
  // A scheduler whose Create failed holds no queues and no request.
  if (queues_ == nullptr) return;
  in_step_ = false;
  CancelAll(CancelReason::kShutdown);
}

// --- Submission --------------------------------------------------------------

absl::Status Scheduler::CheckRequest(const RequestSpec& spec) const {
  if (!tenant_index_.contains(spec.tenant)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown tenant '", spec.tenant, "'"));
  }
  if (spec.sink == nullptr) return absl::InvalidArgumentError("no sink");
  if (spec.prompt.empty()) {
    return absl::InvalidArgumentError("the prompt is empty");
  }
  for (int32_t t : spec.prompt) {
    if (t < 0 || t >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token ", t, " is outside the vocabulary [0, ",
                       vocab_size_, ")"));
    }
  }
  RETURN_IF_ERROR(engine::Validate(spec.sampling, vocab_size_));
  if (spec.embed) RETURN_IF_ERROR(CheckEmbedding(spec));
  const StopConditions& stop = spec.stop;
  if (stop.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be >= 1, got ", stop.max_tokens));
  }
  for (int32_t t : stop.stop_token_ids) {
    if (t < 0 || t >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop token id ", t, " is outside the vocabulary"));
    }
  }
  if (spec.max_draft_tokens < 0 || spec.max_draft_tokens > kMaxDraftTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_draft_tokens must be in [0, ", kMaxDraftTokens,
                     "], got ", spec.max_draft_tokens));
  }
  if (spec.max_forced_tokens < 0 || spec.max_forced_tokens > kMaxForcedTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_forced_tokens must be in [0, ", kMaxForcedTokens,
                     "], got ", spec.max_forced_tokens));
  }
  if (!(spec.pace_tokens_per_s >= 0) ||
      !std::isfinite(spec.pace_tokens_per_s)) {
    return absl::InvalidArgumentError("pace must be a number >= 0");
  }
  // The last generated token is never fed back: prompt + max_tokens - 1
  // positions hold K/V at most.
  const int64_t positions =
      static_cast<int64_t>(spec.prompt.size()) + stop.max_tokens - 1;
  if (positions > context_length_) {
    return MarkContextExceeded(absl::InvalidArgumentError(absl::StrCat(
        "the prompt (", spec.prompt.size(), " tokens) plus max_tokens (",
        stop.max_tokens, ") needs ", positions,
        " positions; the model's context is ", context_length_)));
  }
  if (BlocksToHold(positions) > num_blocks_) {
    // Not RESOURCE_EXHAUSTED: retrying cannot help, only a smaller request.
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt (", spec.prompt.size(), " tokens) plus max_tokens (",
        stop.max_tokens, ") needs ", positions, " positions of KV cache, ",
        BlocksToHold(positions), " blocks of ", block_size_,
        "; the whole pool holds ", num_blocks_, ", so it can never run"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckEmbedding(const RequestSpec& spec) const {
  if (pooling_ == engine::PoolingType::kNone) {
    return absl::FailedPreconditionError(
        "the model has no pooling type: it is a generation model, not an "
        "embedding model");
  }
  if (!returns_hidden_) {
    return absl::FailedPreconditionError(
        "this engine computes no embeddings");
  }
  if (spec.stop.max_tokens != 1 || spec.max_draft_tokens != 0 ||
      spec.max_forced_tokens != 0) {
    return absl::InvalidArgumentError(
        "an embedding request has max_tokens 1 and no drafts or forced "
        "tokens");
  }
  return absl::OkStatus();
}

void Scheduler::ReportRejected(absl::string_view tenant,
                               absl::StatusCode code) {
  ++counters_.rejected;
  // Only configured names reach the metrics (bounded labels).
  if (metrics_ != nullptr) {
    metrics_->OnRejected(tenant_index_.contains(tenant) ? tenant : "", code);
  }
}

absl::Status Scheduler::Cancel(RequestId id, CancelReason reason) {
  return End(id, [reason](Request& r, absl::Time now) {
    return r.Cancel(reason, now);
  });
}

absl::Status Scheduler::StopAtString(RequestId id, std::string stop_string,
                                     int32_t tokens) {
  return End(id, [&](Request& r, absl::Time now) {
    return r.StopAtString(std::move(stop_string), tokens, now);
  });
}

absl::Status Scheduler::End(
    RequestId id, const std::function<FinishInfo(Request&, absl::Time)>& end) {
  if (in_step_) {
    return absl::FailedPreconditionError("Cancel between Schedule and Update");
  }
  auto it = live_.find(id);
  if (it == live_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not live"));
  }
  Request* r = it->second;
  live_.erase(it);
  std::unique_ptr<Request> held;  // a held child, destroyed on return
  if (r->holder() != nullptr) {
    held = TakeHeld(r);
  } else if (r->holds_children()) {
    ReleaseChildren(r);  // they fall back to ordinary requests
  }
  const bool running = r->state() == RequestState::kRunning;
  const absl::Time now = clock_->Now();
  const FinishInfo info = end(*r, now);
  queues_->ReturnUnused(r, now);  // running, preempted or a reserved child
  ++counters_.finished[static_cast<int>(info.reason)];
  if (metrics_ != nullptr) metrics_->OnFinished(r->tenant(), info);
  if (held != nullptr) return absl::OkStatus();
  if (running) {
    queues_->OnStopped(r->tenant_index());
    TakeRunning(r);  // destroyed here
  } else {
    queues_->OnCancelled(*r);  // its entry is dropped when popped
  }
  return absl::OkStatus();
}

void Scheduler::CancelAll(CancelReason reason) {
  std::vector<RequestId> ids;
  ids.reserve(live_.size());
  for (const auto& [id, r] : live_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) Cancel(id, reason).IgnoreError();
  queues_->TakeAll();  // only cancelled entries are left: counted, dropped
}

std::unique_ptr<Request> Scheduler::TakeRunning(Request* r) {
  auto it = std::find_if(running_.begin(), running_.end(),
                         [r](const auto& p) { return p.get() == r; });
  std::unique_ptr<Request> taken = std::move(*it);
  running_.erase(it);
  return taken;
}

// --- Schedule ----------------------------------------------------------------

// A step (Schedule):
//   budgets: max_batched_tokens tokens, max_running sequences.
//   1. Running requests, in admission order — or, under overload (more
//      running requests than tokens), by priority class, then slack
//      (buffered undelivered tokens / pace, least first; unpaced = 0), then
//      arrival. (Admission never lets running requests outnumber the
//      budget, so overload comes from lowering it: set_max_batched_tokens.)
//      Each is granted the rest of its uncomputed tokens (a decode
//      token, or the rest of its prompt) but keeps one token of the budget
//      for each request after it, so a long prefill chunk never starves a
//      decode. A prefill chunk (more than one token) also leaves, up to the
//      admission reserve (SchedulerOptions::admission_reserve of the
//      budget), the prefill tokens that other tenants' requests after it
//      could take beyond that one, and those of other tenants' waiting
//      requests that could be admitted now (room under max_running and for
//      their blocks; each tenant's in its admission order, until they
//      cover the reserve): other tenants' short prompts are admitted and
//      sampled beside a long prefill instead of after it.
//      Decodes are never cut; what a chunk leaves is only what others can
//      take, so with nothing else wanting tokens a prefill takes the whole
//      budget; and a tenant's own prompts still prefill one after another
//      (the next one's prefill overlapping the last one's decode). If the pager
//      cannot grow the request's blocks (or only into the reserve, below),
//      running requests are preempted by recompute — victim: lowest priority
//      class, then latest arrival, possibly the request itself, never a
//      readmitted request — until it can: the victim's lease is destroyed and
//      it goes back to the front of its tenant queue. A victim already granted
//      tokens this step gives them back.
//   2. Unless something was preempted (no blocks to spare), waiting
//      requests are admitted in fair-share order (tenant_queues.h; a
//      tenant's next request only once its tokens-per-minute bucket holds
//      the request's reservation, prompt + max_tokens, which admission
//      takes) into the leftover budget, each taking what it can of its
//      prompt (chunked prefill; the blocks of the whole prompt are
//      allocated at admission, its cached prefix counting as computed); a
//      request whose blocks cannot be allocated (or only into the reserve)
//      stays at the front of its queue and admission stops. A prompt
//      longer than the admission reserve is a chunk too: it leaves what
//      other tenants' waiting prompts can take; left only that, its tenant
//      is passed over for this step (and its demand no longer counts, so
//      two tenants' long prompts never both give way).
//   3. Speculative decoding (below): running requests that asked for it
//      may take draft tokens from what is left of the budget.
//
// Update: for each scheduled request, its granted tokens become computed
// (the pager hears MarkComputed); a request whose grant reached its last
// token takes its logits row's sampled token, which passes the stop checks
// (request.h) and goes to its sink — or, when the row holds a sampling
// error, finishes with kError. A failed step (StepTokens::status) finishes
// every request of the plan with kError. A finished request's lease is
// destroyed at once, and what its reservation did not use goes back to its
// tenant's token budget (TenantQueues::ReturnUnused). Generated tokens are
// charged to fair share as they are sampled, never to the budget again.
const StepPlan& Scheduler::Schedule() {
  plan_.Clear();
  // The forks of the last Update copy their state first (step.h).
  plan_.state_copies.swap(pending_state_copies_);
  in_step_ = true;
  int32_t budget = max_batched_tokens_;  // tokens; sequences: max_running_
  reserved_blocks_ = 0;  // what readmitted requests may still take
  for (const auto& r : running_) {
    if (IsReadmitted(*r)) {
      reserved_blocks_ += BlocksToFinish(*r) - r->lease().num_blocks();
    }
  }

  OrderRunning(budget);
  PlanWaitingDemand();
  PlanPrefillDemand();
  for (size_t i = 0; i < order_.size() && budget > 0; ++i) {
    Request* r = order_[i];
    if (r->state() != RequestState::kRunning) continue;  // preempted already
    const int32_t keep = static_cast<int32_t>(order_.size() - 1 - i);
    const int32_t max = MaxGrant(*r);
    // A prefill chunk leaves room for the prefills after it (above).
    const int32_t leave =
        max > 1 ? std::min(admission_reserve_tokens_, demand_after_[i]) : 0;
    const int32_t n = SnapshotAlignedGrant(
        *r, std::min(max, std::max(1, budget - keep - leave)));
    if (GrowLease(r, n, &budget)) Grant(r, n, &budget);
  }
  if (plan_.num_preempted == 0) {
    AdmitWaiting(&budget);
    AddDrafts(&budget);
  }
  BuildBatch();
  if (!plan_.empty()) ++counters_.steps;
  return plan_;
}

void Scheduler::PlanWaitingDemand() {
  waiting_demand_.assign(queues_->num_tenants(), 0);
  waiting_demand_total_ = 0;
  // Only other tenants' demand is ever left room for.
  if (admission_reserve_tokens_ == 0 || queues_->num_tenants() < 2 ||
      queues_->num_waiting() == 0) {
    return;
  }
  // Each tenant's waiting requests in its admission order, while they
  // could be admitted now (room under max_running and for their blocks)
  // and until its demand covers the reserve; at most kMaxVisits of them
  // (the step's cost stays bounded, whatever is queued).
  constexpr int kMaxVisits = 16;
  int64_t room = max_running_ - num_running();
  int32_t tenant = -1;
  int visits = 0;
  queues_->ForEachAdmissible(clock_->Now(), [&](const Request& r) {
    if (r.tenant_index() != tenant) {
      tenant = r.tenant_index();
      visits = 0;
    }
    room -= r.group_size();
    const absl::Span<const int32_t> tokens = AdmissionTokens(r);
    if (room < 0 || !HasRoomFor(r) ||
        !pager_->CanAllocate(tokens, r.cache_salt(), max_batched_tokens_)) {
      return false;
    }
    const int64_t prompt = static_cast<int64_t>(tokens.size()) -
                           pager_->CachedPrefixTokens(tokens, r.cache_salt());
    int64_t& demand = waiting_demand_[r.tenant_index()];
    demand += prompt;
    waiting_demand_total_ += prompt;
    return demand < admission_reserve_tokens_ && ++visits < kMaxVisits;
  });
}

bool Scheduler::LongerThanTheReserve(const Request& r) const {
  const absl::Span<const int32_t> tokens = AdmissionTokens(r);
  if (static_cast<int64_t>(tokens.size()) <= admission_reserve_tokens_) {
    return false;
  }
  return static_cast<int64_t>(tokens.size()) -
             pager_->CachedPrefixTokens(tokens, r.cache_salt()) >
         admission_reserve_tokens_;
}

int32_t Scheduler::LeaveForOthers(int32_t tenant) const {
  return static_cast<int32_t>(
      std::min<int64_t>(admission_reserve_tokens_,
                        waiting_demand_total_ - waiting_demand_[tenant]));
}

void Scheduler::PlanPrefillDemand() {
  const size_t n = order_.size();
  demand_after_.assign(n, 0);
  if (admission_reserve_tokens_ == 0 ||
      std::none_of(order_.begin(), order_.end(),
                   [](const Request* r) { return MaxGrant(*r) > 1; })) {
    return;  // no prefill chunk to hold back
  }
  // Beyond the one token each later request is kept anyway: the prefill
  // tokens of the running requests after each and of the waiting requests
  // (PlanWaitingDemand); only other tenants' count.
  demand_by_tenant_ = waiting_demand_;
  int64_t demand = waiting_demand_total_;
  for (size_t i = n; i-- > 0;) {
    const Request& r = *order_[i];
    demand_after_[i] = static_cast<int32_t>(
        std::min<int64_t>(demand - demand_by_tenant_[r.tenant_index()],
                          std::numeric_limits<int32_t>::max()));
    demand_by_tenant_[r.tenant_index()] += MaxGrant(r) - 1;
    demand += MaxGrant(r) - 1;
  }
}

void Scheduler::OrderRunning(int32_t budget) {
  order_.clear();
  for (const auto& r : running_) order_.push_back(r.get());
  if (static_cast<int64_t>(order_.size()) <= budget) return;
  // Overload: not every running request gets a token this step.
  using Key = std::tuple<PriorityClass, double, uint64_t>;
  std::vector<std::pair<Key, Request*>> keyed;
  keyed.reserve(order_.size());
  for (Request* r : order_) {
    keyed.push_back({Key{r->priority(), r->Slack(), r->arrival_seq()}, r});
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) order_[i] = keyed[i].second;
}

bool Scheduler::GrowLease(Request* r, int32_t num_tokens, int32_t* budget) {
  kvpager::BlockLease& lease = r->lease();
  // The step computes positions up to `end`: tokens past the lease's are
  // appended; a prompt's next chunk is covered (windowed KV groups take
  // their blocks as chunks come, kv_pager.h; a no-op with one group).
  const int32_t end = r->num_computed_tokens() + num_tokens;
  const int32_t grow = end - lease.num_tokens();
  const auto can_grow = [&] {
    return grow > 0 ? pager_->CanAppend(lease, grow)
                    : pager_->CanCover(lease, end);
  };
  // A readmitted request's growth is covered by the reserve (see the top),
  // so it never preempts; anyone else's must leave the reserve free.
  const int32_t blocks = lease.num_blocks();
  while (!can_grow()) {
    Request* victim = PickVictim(r);
    Preempt(victim, budget);
    if (victim == r) return false;
  }
  const absl::Status grown =
      grow > 0 ? pager_->Append(&lease,
                                r->tokens().subspan(lease.num_tokens(), grow),
                                &plan_.copies)
               : pager_->Cover(&lease, end);
  // The check passed just before: the act cannot fail.
  assert(grown.ok());
  (void)grown;
  if (grow <= 0 && lease.num_blocks() == blocks) return true;
  if (IsReadmitted(*r)) {
    reserved_blocks_ -= lease.num_blocks() - blocks;
    return true;
  }
  while (AvailableBlocks() < reserved_blocks_) {
    Request* victim = PickVictim(r);
    Preempt(victim, budget);
    if (victim == r) return false;
  }
  return true;
}

// Preemption is bounded: a request is preempted at most once, so it
// recomputes at most the tokens it had computed then (prompt + max_tokens
// - 2), less what the prefix cache kept (Usage::recomputed_tokens). A
// preempted request is readmitted only when the pager's available blocks
// (free + evictable cached) cover, beside the reserve, every block it can
// ever hold: prompt + max_tokens - 1 positions. While it runs, the blocks
// it may still take are the reserve: every other admission and growth
// must leave them available (counted as if no block were a cache hit), so
// it grows without preempting and is never a victim — whatever its class.
// The cost: under pressure a readmission waits for room to finish (and
// blocks admission behind it), and a readmitted request that stops early
// held its reserve idle.
Request* Scheduler::PickVictim(Request* self) const {
  Request* victim = nullptr;
  for (const auto& r : running_) {
    if (IsReadmitted(*r)) continue;  // never preempted twice (above)
    if (victim == nullptr ||
        std::make_pair(r->priority(), r->arrival_seq()) >
            std::make_pair(victim->priority(), victim->arrival_seq())) {
      victim = r.get();
    }
  }
  // Only a readmitted `self` can find no victim, and the reserve covers its
  // growth, so it never asks.
  assert(victim != nullptr);
  return victim != nullptr ? victim : self;
}

int32_t Scheduler::BlocksToFinish(const Request& r) const {
  // The last generated token is never fed back (CheckRequest).
  const int64_t positions =
      int64_t{r.num_prompt_tokens()} + r.stop().max_tokens - 1;
  return static_cast<int32_t>(
      std::min<int64_t>(BlocksToHold(positions), num_blocks_));
}

int64_t Scheduler::BlocksToHold(int64_t positions) const {
  int64_t blocks = 0;
  for (int32_t w : kv_group_windows_) {
    blocks += kvpager::KvPager::GroupBlocksToHold(w, block_size_, positions,
                                                  engine_max_tokens_);
  }
  return blocks;
}

int64_t Scheduler::AvailableBlocks() const {
  const kvpager::PagerStats stats = pager_->Stats();
  return stats.total_blocks - stats.used_blocks;  // free + evictable cached
}

void Scheduler::Preempt(Request* victim, int32_t* budget) {
  // A victim granted tokens earlier this step gives them back, and any copy
  // into its blocks (its growth this step) is dropped: the blocks are about
  // to be freed.
  auto granted = std::find_if(
      plan_.scheduled.begin(), plan_.scheduled.end(),
      [victim](const ScheduledRequest& s) { return s.request == victim; });
  if (granted != plan_.scheduled.end()) {
    *budget += granted->num_tokens;
    plan_.scheduled.erase(granted);
  }
  const kvpager::BlockLease& lease = victim->lease();
  std::erase_if(plan_.copies, [&](const kvpager::BlockCopy& c) {
    const auto holds = [&](absl::Span<const int32_t> blocks) {
      return std::find(blocks.begin(), blocks.end(), c.dst) != blocks.end();
    };
    return holds(lease.block_ids()) ||
           std::any_of(lease.group_tables().begin(),
                       lease.group_tables().end(), holds);
  });
  // The same for a state copy into its slot (a fork's copy of the last
  // Update): the slot is about to be freed.
  std::erase_if(plan_.state_copies, [&](const kvpager::StateCopy& c) {
    return c.dst == lease.state_slot();
  });
  if (victim->holds_children()) ReleaseChildren(victim);
  victim->Preempt();
  ++plan_.num_preempted;
  ++counters_.preemptions;
  if (metrics_ != nullptr) metrics_->OnPreempted(victim->tenant());
  queues_->PushFront(TakeRunning(victim));
  queues_->OnStopped(victim->tenant_index());
}

void Scheduler::Grant(Request* r, int32_t num_tokens, int32_t* budget) {
  plan_.scheduled.push_back(ScheduledRequest{.request = r,
                                             .num_tokens = num_tokens,
                                             .num_draft = 0,
                                             .logits_row = -1});
  *budget -= num_tokens;
}

void Scheduler::AdmitWaiting(int32_t* budget) {
  const absl::Time now = clock_->Now();
  skipped_.assign(queues_->num_tenants(), false);
  while (*budget > 0 && num_running() < max_running_) {
    Request* next = queues_->Peek(now, skipped_);
    if (next == nullptr || !HasRoomFor(*next)) break;
    // A prompt longer than the reserve leaves what other tenants' waiting
    // prompts can take (see the top); left only that, its tenant waits for
    // the next step (and stops counting as demand: two long prompts never
    // wait for each other).
    const int32_t tenant = next->tenant_index();
    const int32_t leave =
        LongerThanTheReserve(*next) ? LeaveForOthers(tenant) : 0;
    if (leave > 0 && *budget <= leave) {
      skipped_[tenant] = true;
      TakeWaitingDemand(tenant, waiting_demand_[tenant]);
      continue;
    }
    // Windowed KV groups take blocks for the first chunk only (GrowLease
    // covers the next ones): at most what this step grants it.
    // A hybrid model's hit starts from its snapshot's state: copied in
    // before this step's forward pass.
    absl::StatusOr<kvpager::BlockLease> lease =
        pager_->Allocate(AdmissionTokens(*next), next->cache_salt(),
                         *budget - leave, &plan_.state_copies);
    if (!lease.ok()) break;  // stays at the front until blocks free up
    if (IsReadmitted(*next)) {
      reserved_blocks_ += BlocksToFinish(*next) - lease->num_blocks();
    }
    running_.push_back(queues_->Pop(next, now));  // takes its reservation
    queues_->OnStarted(tenant);
    StartRequest(next, *std::move(lease), now);
    const std::vector<Request*> forked = AdmitHeld(next, now);
    TakeWaitingDemand(tenant, MaxGrant(*next));
    Grant(next,
          SnapshotAlignedGrant(*next,
                               std::min(MaxGrant(*next), *budget - leave)),
          budget);
    for (Request* child : forked) {
      if (*budget > 0) {
        Grant(child, std::min(child->num_uncomputed(), *budget), budget);
      }
    }
  }
}

void Scheduler::TakeWaitingDemand(int32_t tenant, int64_t tokens) {
  const int64_t taken = std::min(tokens, waiting_demand_[tenant]);
  waiting_demand_[tenant] -= taken;
  waiting_demand_total_ -= taken;
}

bool Scheduler::HasRoomFor(const Request& next) const {
  // A group is admitted whole; until it fits it stays at the front.
  if (num_running() + next.group_size() > max_running_) return false;
  // The block reserve (see the top): a readmission needs room to finish
  // beside it, anyone else room for its prompt (and a 1-token prompt's
  // children, a block each). Counted as if no block were a cache hit.
  const bool readmitted = IsReadmitted(next);
  if (reserved_blocks_ == 0 && !readmitted) return true;
  const int64_t need =
      readmitted ? BlocksToFinish(next)
                 : pager_->BlocksToHold(
                       static_cast<int64_t>(AdmissionTokens(next).size()),
                       max_batched_tokens_) +
                       int64_t{next.group_size() - 1} * pager_->num_groups();
  return AvailableBlocks() - need >= reserved_blocks_;
}

void Scheduler::StartRequest(Request* r, kvpager::BlockLease lease,
                             absl::Time now) {
  const bool first = !r->prompt_charged();
  const int32_t recomputed = r->recomputed_tokens();
  r->Start(std::move(lease), now);
  counters_.recomputed_tokens += r->recomputed_tokens() - recomputed;
  if (!first) return;
  r->set_prompt_charged();
  queues_->ChargePrompt(r->tenant_index(), r->num_prompt_tokens());
  if (metrics_ != nullptr) {
    metrics_->OnAdmitted(r->tenant(), now - r->timings().arrival);
  }
}

// Speculative decoding (RequestSpec::max_draft_tokens; n-gram drafts,
// ngram_proposer.h): once a step's grants and admissions are made, a
// request granted its one next token may append up to max_draft_tokens
// draft tokens to its slice, in plan order, while the step's tokens stay
// within SchedulerOptions::speculation_max_step_tokens and the budget: the
// drafts ride on a small step, where the engine reads every weight for
// each token anyway and runs a few more tokens at almost no cost, and a
// large (compute-bound) step takes none, so speculation never lowers
// aggregate throughput. No draft past max_tokens, none in a step that
// preempted, and a draft's blocks only from free ones beside the reserve
// (never evicting the prefix cache, never preempting). The engine returns
// a logits row for the last token and for each draft token; the sampling
// stage samples the rows in order while each sampled token equals the
// draft token after it, so a step yields 1 + (accepted drafts) tokens.
// Each row is sampled exactly as without speculation (the same sampler
// step, history and uniform), so the output is the same token for token,
// greedy or sampled: for a draft given as one token x, drawing t from the
// model's distribution p and accepting iff t == x is the standard
// accept/reject rule (accept with probability min(1, p(x) / q(x)) = p(x))
// with the residual distribution (p without x, renormalized) on a reject.
// Update appends the accepted tokens through the stop checks (a stop ends
// them), counts the drafts' K/V as computed only up to the last accepted
// one, and truncates the lease there (KvPager::Truncate), freeing the
// rejected drafts' blocks. Drafts reserve nothing: an accepted one is a
// generated token, within max_tokens and so within the reservation.
//
// On a hybrid model (state slots) a rejected draft must not advance the
// recurrent state, but the engine leaves a slot's state after all of its
// slice's tokens, drafts included, and a state cannot be truncated as
// K/V can. So: snapshot and recompute. Before a step that verifies drafts
// (only then) the request's state, after its computed tokens (position
// c), is copied into a second slot of its lease (KvPager::Snapshot, a
// StateCopy run before the forward pass; a request drafts only when a
// slot is free beyond those that held children will fork into, so forks
// never lack one).
// If every draft is accepted, the state is right (after c + 1 + drafts)
// and the snapshot is dropped. If one is rejected, the snapshot becomes
// the request's state (KvPager::RestoreSnapshot: a swap of slot ids, no
// copy) and its computed count goes back to c, so the next step feeds
// again its token at c, the accepted drafts and the token sampled after
// them, as a prompt chunk: their K/V are rewritten with the values they
// have (the same tokens at the same positions after the same state; the
// engine's rows do not depend on how a sequence's tokens are split into
// steps), and the state ends after them. The lease is truncated to the
// accepted tokens as without slots, and is marked computed only when no
// draft was rejected (a windowed group then keeps what the recompute
// reads; the prefix cache is off with slots anyway). Output is unchanged;
// the cost of a rejection is one state copy and the accepted tokens fed
// twice, in a step that is small by construction.
void Scheduler::AddDrafts(int32_t* budget) {
  if (speculation_max_step_tokens_ == 0) return;
  // The budget started at max_batched_tokens_; what is gone is granted.
  int32_t room = std::min(
      *budget, speculation_max_step_tokens_ - (max_batched_tokens_ - *budget));
  for (ScheduledRequest& s : plan_.scheduled) {
    if (room <= 0) return;
    Request* r = s.request;
    if (r->max_draft_tokens() == 0 || s.num_tokens != 1 ||
        r->num_uncomputed() != 1 || r->holds_children() ||
        !HasSnapshotRoom(*r)) {
      continue;
    }
    // The last of max_tokens is sampled from the last draft's row at most.
    const int32_t max = std::min({r->max_draft_tokens(), room,
                                  r->stop().max_tokens - r->num_generated() - 1,
                                  DraftRoom(*r)});
    ProposeNgramDraft(r->tokens(), max, &draft_);
    // A draft token the token mask refuses could never be accepted.
    draft_.resize(static_cast<size_t>(r->sampler().AllowedPrefix(draft_)));
    const int32_t n = static_cast<int32_t>(draft_.size());
    if (n == 0) continue;
    const absl::Status appended =
        pager_->Append(&r->lease(), draft_, &plan_.copies);
    // Within DraftRoom: Append cannot fail.
    assert(appended.ok());
    (void)appended;
    if (r->lease().state_slot() >= 0) {
      const absl::Status kept =
          pager_->Snapshot(&r->lease(), &plan_.state_copies);
      // HasSnapshotRoom: cannot fail.
      assert(kept.ok());
      (void)kept;
    }
    r->set_draft(draft_);
    s.num_tokens += n;
    s.num_draft = n;
    room -= n;
    *budget -= n;
  }
}

bool Scheduler::HasSnapshotRoom(const Request& r) const {
  if (r.lease().state_slot() < 0) return true;
  // Prefix snapshots' slots count: a speculation snapshot takes one.
  return pager_->CanSnapshot(r.lease()) &&
         pager_->num_available_state_slots() > num_reserved_;
}

int32_t Scheduler::DraftRoom(const Request& r) const {
  // The last block is the request's own (its token was just appended,
  // copied on write if it was shared), so its free slots count, and the
  // free blocks beside the reserve (a readmitted request's are in the
  // reserve already).
  const kvpager::BlockLease& lease = r.lease();
  const int64_t reserve = IsReadmitted(r) ? 0 : reserved_blocks_;
  const int64_t blocks =
      std::max<int64_t>(0, pager_->Stats().free_blocks - reserve);
  return std::min(pager_->AppendRoom(lease, blocks), kMaxDraftTokens);
}

void Scheduler::BuildBatch() {
  engine::ForwardBatch& batch = plan_.batch;
  for (ScheduledRequest& s : plan_.scheduled) {
    Request* r = s.request;
    const int32_t begin = r->num_computed_tokens();
    engine::SequenceSlice slice;
    slice.token_begin = batch.num_tokens();
    slice.token_count = s.num_tokens;
    slice.position_begin = begin;
    slice.block_table = r->lease().block_ids();
    slice.group_tables = r->lease().group_tables();
    slice.state_slot = r->lease().state_slot();
    const int32_t own = s.num_tokens - s.num_draft;
    if (r->embed()) {
      slice.num_hidden = engine::EmbeddingPooler::RowsNeeded(
          r->pooler()->pooling(), begin, own, r->num_prompt_tokens());
      if (slice.num_hidden > 0) {
        s.hidden_row = static_cast<int32_t>(plan_.hidden.size() / n_embd_);
        plan_.hidden.resize(plan_.hidden.size() + slice.num_hidden * n_embd_);
      }
    } else if (own == r->num_uncomputed()) {
      slice.num_logits = 1 + s.num_draft;
      s.logits_row = plan_.num_logit_rows;
      plan_.num_logit_rows += slice.num_logits;
    }
    const absl::Span<const int32_t> tokens = r->tokens().subspan(begin, own);
    batch.tokens.insert(batch.tokens.end(), tokens.begin(), tokens.end());
    batch.tokens.insert(batch.tokens.end(), r->draft().begin(),
                        r->draft().end());
    batch.sequences.push_back(slice);
  }
  batch.hidden = absl::MakeSpan(plan_.hidden);
}

// --- Update ------------------------------------------------------------------

void Scheduler::Update(const StepTokens& tokens) {
  // Update applies the plan Schedule returned, once.
  assert(in_step_);
  if (!in_step_) return;
  in_step_ = false;
  const absl::Time now = clock_->Now();
  absl::Status status = tokens.status;
  if (status.ok() &&
      tokens.rows.size() < static_cast<size_t>(plan_.num_logit_rows)) {
    status = absl::InternalError(absl::StrCat("the sampling stage returned ",
                                              tokens.rows.size(), " rows for ",
                                              plan_.num_logit_rows));
  }
  for (const ScheduledRequest& s : plan_.scheduled) {
    Request* r = s.request;
    if (!status.ok()) {
      r->ClearDraft();
      FinishRunning(r, FinishReason::kError, status, now);
      continue;
    }
    if (s.num_draft > 0) {
      TakeDraftedTokens(r, s, tokens, now);
      FastForward(r, now);
      continue;
    }
    r->AddComputed(s.num_tokens);
    // An uncached prompt's blocks stay out of the cache, but windowed KV
    // groups still give theirs back.
    const absl::Status marked = pager_->MarkComputed(
        &r->lease(), r->num_computed_tokens(), !r->UncachedPrompt());
    // The lease covers every computed token (GrowLease): cannot fail.
    assert(marked.ok());
    (void)marked;
    KeepStateSnapshot(r);
    if (r->embed()) {
      TakeHidden(r, s, now);
      continue;
    }
    // A parent's fork point: its lease's tokens, the prompt but the last,
    // are computed (scheduler_group.cc).
    if (r->holds_children() &&
        r->num_computed_tokens() == r->lease().num_tokens()) {
      ForkChildren(r, now);
    }
    if (s.logits_row >= 0) {
      TakeToken(r, tokens.rows[s.logits_row], now);
      FastForward(r, now);
    }
  }
  ChargeGenerated();
  std::erase_if(running_, [](const std::unique_ptr<Request>& r) {
    return r->state() == RequestState::kFinished;
  });
}

void Scheduler::TakeHidden(Request* r, const ScheduledRequest& s,
                           absl::Time now) {
  if (s.hidden_row >= 0) {
    const int32_t rows =
        plan_.batch.sequences[&s - plan_.scheduled.data()].num_hidden;
    r->pooler()->Add(r->num_computed_tokens() - 1,
                     absl::MakeConstSpan(plan_.hidden)
                         .subspan(s.hidden_row * n_embd_, rows * n_embd_));
  }
  if (r->num_uncomputed() == 0) {
    FinishRunning(r, FinishReason::kStop, absl::OkStatus(), now);
  }
}

void Scheduler::TakeToken(Request* r, const SampledRow& row, absl::Time now) {
  if (!row.status.ok()) {
    FinishRunning(r, FinishReason::kError, row.status, now);
    return;
  }
  ++generated_[r->tenant_index()];
  const bool first = r->num_generated() == 0;
  const absl::Time previous = r->last_token_time();
  const std::optional<FinishReason> done = r->AcceptSample(row.sample, now);
  if (metrics_ != nullptr) {
    if (first) {
      metrics_->OnFirstToken(r->tenant(), now - r->timings().arrival);
    } else {
      metrics_->OnNextToken(r->tenant(), now - previous);
    }
  }
  if (done.has_value()) FinishRunning(r, *done, absl::OkStatus(), now);
}

void Scheduler::TakeDraftedTokens(Request* r, const ScheduledRequest& s,
                                  const StepTokens& tokens, absl::Time now) {
  // The request's own token was computed, and so is each draft token that
  // turns out to be the request's next token: its K/V were written at the
  // right position after the right tokens. The lease is marked as each
  // one is known, so a request that finishes on the way leaves its blocks
  // to the prefix cache as computed.
  // With a state snapshot (AddDrafts) the lease is marked once the
  // outcome is known.
  const absl::Span<const int32_t> draft = r->draft();
  const int32_t begin = r->num_computed_tokens();
  const bool snapshot = r->lease().snapshot_slot() >= 0;
  for (int32_t i = 0;; ++i) {
    r->AddComputed(1);
    if (!snapshot) {
      const absl::Status marked =
          pager_->MarkComputed(&r->lease(), r->num_computed_tokens());
      // Within the lease (the drafts were appended to it): cannot fail.
      assert(marked.ok());
      (void)marked;
    }
    TakeToken(r, tokens.rows[s.logits_row + i], now);
    if (r->state() != RequestState::kRunning) break;
    if (i == s.num_draft || r->tokens().back() != draft[i]) break;
    r->AcceptDraftToken();
  }
  r->ClearDraft();
  if (r->state() != RequestState::kRunning) return;
  const absl::Status truncated =
      pager_->Truncate(&r->lease(), r->num_computed_tokens());
  // Computed <= the lease's tokens, and marked no further: cannot fail.
  assert(truncated.ok());
  (void)truncated;
  if (!snapshot) return;
  // The snapshot holds the state after `begin` tokens (AddDrafts).
  absl::Status settled;
  if (r->num_computed_tokens() == begin + 1 + s.num_draft) {
    settled = pager_->DropSnapshot(&r->lease());
    if (settled.ok()) {
      settled = pager_->MarkComputed(&r->lease(), r->num_computed_tokens());
    }
  } else {
    settled = pager_->RestoreSnapshot(&r->lease());
    r->RollBackComputed(begin);
  }
  // The lease has a snapshot and covers what is computed: cannot fail.
  assert(settled.ok());
  (void)settled;
  KeepStateSnapshot(r);
}

int32_t Scheduler::SnapshotAlignedGrant(const Request& r, int32_t n) const {
  if (!pager_->state_snapshots() || n <= 1) return n;
  const int32_t end = r.num_prompt_tokens() / block_size_ * block_size_;
  const int32_t begin = r.num_computed_tokens();
  return begin < end && end < begin + n ? end - begin : n;
}

void Scheduler::KeepStateSnapshot(Request* r) {
  if (!pager_->state_snapshots() || r->embed()) return;
  const int32_t computed = r->num_computed_tokens();
  if (computed == 0 || computed % block_size_ != 0) return;
  const int32_t prompt_end = r->num_prompt_tokens() / block_size_ * block_size_;
  if (computed < prompt_end) return;  // only the prompt's last whole block
  // The prompt's stays; a generating request's replaces its previous one.
  const bool rolling = computed > prompt_end;
  const int32_t block = pager_->KeepStateSnapshot(
      r->lease(), computed, rolling ? r->rolling_snapshot() : -1,
      &pending_state_copies_);
  if (rolling && block >= 0) r->set_rolling_snapshot(block);
}

// Fast-forward: after a running request's sampled token, the tokens its
// token mask forces (within max_tokens) are appended as generated and
// delivered at once; the next step computes them with the sampled one, as
// a prompt chunk, and samples after the last. The sampler records each,
// so its mask and step counter move past them.
void Scheduler::FastForward(Request* r, absl::Time now) {
  if (r->state() != RequestState::kRunning || r->max_forced_tokens() == 0) {
    return;
  }
  const int32_t room = r->stop().max_tokens - r->num_generated();
  forced_.clear();
  r->sampler().ForcedTokens(std::min(r->max_forced_tokens(), room), &forced_);
  for (const int32_t token : forced_) {
    // Forced, so allowed: a refusal would be the mask's bug; stop there.
    if (!r->sampler().AcceptGenerated(token).ok()) return;
    ++generated_[r->tenant_index()];
    const std::optional<FinishReason> done = r->AcceptForced(token);
    if (done.has_value()) {
      FinishRunning(r, *done, absl::OkStatus(), now);
      return;
    }
  }
}

// Generated tokens are charged to fair share once per tenant per step (the
// counters are read only when admitting); the token budget reserved them
// at admission.
void Scheduler::ChargeGenerated() {
  for (size_t t = 0; t < generated_.size(); ++t) {
    if (generated_[t] == 0) continue;
    queues_->ChargeGenerated(static_cast<int32_t>(t), generated_[t]);
    generated_[t] = 0;
  }
}

// Leaves `r` in running_ (finished) for Update to erase.
void Scheduler::FinishRunning(Request* r, FinishReason reason,
                              absl::Status status, absl::Time now) {
  live_.erase(r->id());
  if (r->holds_children()) ReleaseChildren(r);  // failed before the fork
  const FinishInfo info = r->Finish(reason, std::move(status), now);
  queues_->ReturnUnused(r, now);
  queues_->OnStopped(r->tenant_index());
  ++counters_.finished[static_cast<int>(reason)];
  if (metrics_ != nullptr) metrics_->OnFinished(r->tenant(), info);
}

// --- State -------------------------------------------------------------------

bool Scheduler::HasRunnable() {
  return !running_.empty() || queues_->HasAdmissible(clock_->Now());
}

absl::Time Scheduler::NextAdmissibleTime() {
  return queues_->NextAdmissibleTime(clock_->Now());
}

}  // namespace paceline::scheduler
