// Scheduler's request groups: submission, whole admission, the fork point
// and the fallback. The rest of the scheduler is in scheduler.cc.
//
// Groups (SubmitGroup; OpenAI's `n`): 1..kMaxGroupSize requests with the
// same tenant, prompt, cache salt and priority, each with its own sink,
// sampling (the caller seeds member i with seed + i) and stop conditions.
// Member 0 is the parent: it is queued and admitted like any request and
// holds the others, its children, until its fork point:
//   Admission is whole: the parent is admitted only when its tenant's and
//   the scheduler's max_running leave room for the whole group (until
//   then the group waits at the front of its queue, as a request whose
//   blocks do not fit does), so a group is never admitted in part. From
//   then on the children hold running slots, without blocks.
//   Fork point: the parent's lease covers its prompt but the last token,
//   and it is granted no more; once those are computed, every child takes
//   KvPager::Fork of that lease and runs from there as an ordinary request.
//   Each member then appends the last prompt token itself (the shared
//   partial block is copied on write by Append, into plan.copies: one copy
//   per member but the last) and samples its first token from its own
//   logits row. A 1-token prompt has nothing to share: at the parent's
//   admission each child allocates its own block. On a hybrid model each
//   fork also takes a state slot of its own, and the parent's state (after
//   the prompt but the last token) is copied into it before the next
//   step's forward pass (StepPlan::state_copies).
//   Fallback: if the parent is preempted, cancelled or fails before the
//   fork, or a child of a 1-token prompt gets no block (or a fork no state
//   slot: never while max_running is at most the slots), the children
//   become ordinary requests at the front of their tenant's queue (they
//   prefill themselves, mostly from the prefix cache). After the fork
//   every member is on its own: preempted, recomputed, cancelled alone.
//   Counting: a group is n requests for every limit and for fair share —
//   n queued (max_queued), n running from the parent's admission
//   (max_running of the tenant and of the scheduler), each member's prompt
//   charged once (the children's at the fork or their own admission), each
//   generated token as sampled. The token budget reserves every member's
//   prompt + max_tokens at the parent's admission (a child that falls back
//   keeps its reservation, like a preempted request); each member gives
//   back its own unused part when it finishes. A group larger than its
//   tenant's max_queued or max_running, or than the scheduler's
//   max_running, can never be admitted whole: InvalidArgument (no retry
//   can help). (One larger than the token bucket waits for a full bucket,
//   tenant_queues.h.)

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/sampler.h"
#include "scheduler/scheduler.h"

namespace paceline::scheduler {

// --- Submission --------------------------------------------------------------

absl::Status Scheduler::CheckGroup(absl::Span<const RequestSpec> specs) const {
  if (specs.empty() || specs.size() > static_cast<size_t>(kMaxGroupSize)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a group has 1 to ", kMaxGroupSize, " requests, got ", specs.size()));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::Status status = CheckRequest(specs[i]);
    if (!status.ok() && specs.size() > 1) {
      status = absl::Status(
          status.code(),
          absl::StrCat("group member ", i, ": ", status.message()));
    }
    RETURN_IF_ERROR(status);
  }
  RETURN_IF_ERROR(CheckGroupShape(specs));
  return CheckGroupLimits(specs[0], static_cast<int32_t>(specs.size()));
}

absl::Status Scheduler::CheckGroupShape(
    absl::Span<const RequestSpec> specs) const {
  const RequestSpec& parent = specs[0];
  absl::flat_hash_set<const TokenSink*> sinks;
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestSpec& s = specs[i];
    const char* differs = nullptr;
    if (s.tenant != parent.tenant) differs = "tenant";
    if (s.prompt != parent.prompt) differs = "prompt";
    if (s.cache_salt != parent.cache_salt) differs = "cache salt";
    if (s.priority != parent.priority) differs = "priority";
    if (differs != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group member ", i, " has another ", differs, " than member 0"));
    }
    if (s.embed && specs.size() > 1) {
      return absl::InvalidArgumentError(
          "an embedding request is submitted alone, not in a group");
    }
    if (!sinks.insert(s.sink.get()).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group member ", i, " shares its sink with an earlier member"));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckGroupLimits(const RequestSpec& spec,
                                         int32_t n) const {
  const TenantConfig& tenant = queues_->config(tenant_index_.at(spec.tenant));
  // Not RESOURCE_EXHAUSTED: retrying cannot help, only a smaller group.
  const auto never = [&](absl::string_view limit, int32_t value) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a group of ", n, " requests can never be admitted whole: ", limit,
        " is ", value));
  };
  if (n > max_running_)
    return never("the scheduler's max_running", max_running_);
  if (tenant.max_running > 0 && n > tenant.max_running) {
    return never(absl::StrCat("tenant '", tenant.name, "''s max_running"),
                 tenant.max_running);
  }
  if (tenant.max_queued > 0 && n > tenant.max_queued) {
    return never(absl::StrCat("tenant '", tenant.name, "''s max_queued"),
                 tenant.max_queued);
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Submit(RequestId id, RequestSpec spec) {
  std::vector<RequestSpec> specs;
  specs.push_back(std::move(spec));
  return SubmitGroup(absl::MakeConstSpan(&id, 1), std::move(specs));
}

absl::Status Scheduler::SubmitGroup(absl::Span<const RequestId> ids,
                                    std::vector<RequestSpec> specs) {
  const absl::Time now = clock_->Now();
  const int32_t n = static_cast<int32_t>(specs.size());
  absl::Status status = CheckGroup(specs);
  if (status.ok() && ids.size() != specs.size()) {
    status = absl::InvalidArgumentError(
        absl::StrCat(ids.size(), " ids for ", specs.size(), " requests"));
  }
  for (size_t i = 0; status.ok() && i < ids.size(); ++i) {
    const bool repeated =
        std::find(ids.begin(), ids.begin() + i, ids[i]) != ids.begin() + i;
    if (repeated || live_.contains(ids[i])) {
      status = absl::AlreadyExistsError(
          absl::StrCat("request ", ids[i], " is live"));
    }
  }
  if (status.ok()) {
    status =
        queues_->CheckQueueLimit(tenant_index_.at(specs[0].tenant), now, n);
  }
  std::vector<engine::SequenceSampler> samplers;
  for (size_t i = 0; status.ok() && i < specs.size(); ++i) {
    absl::StatusOr<engine::SequenceSampler> sampler =
        engine::SequenceSampler::Create(specs[i].sampling, vocab_size_,
                                        specs[i].prompt);
    if (sampler.ok()) {
      samplers.push_back(*std::move(sampler));
    } else {
      status = sampler.status();
    }
  }
  if (!status.ok()) {
    for (const RequestSpec& spec : specs) {
      ReportRejected(spec.tenant, status.code());
    }
    return status;
  }
  const int32_t tenant = tenant_index_.at(specs[0].tenant);
  AcceptInfo accepted;
  accepted.prompt_tokens = static_cast<int32_t>(specs[0].prompt.size());
  accepted.cached_prompt_tokens = pager_->CachedPrefixTokens(
      specs[0].prompt, specs[0].cache_salt.empty()
                           ? absl::string_view(specs[0].tenant)
                           : absl::string_view(specs[0].cache_salt));
  std::vector<std::shared_ptr<TokenSink>> sinks;
  std::unique_ptr<Request> parent;
  for (int32_t i = 0; i < n; ++i) {
    sinks.push_back(specs[i].sink);
    auto request = std::make_unique<Request>(
        ids[i], std::move(specs[i]), tenant, next_arrival_seq_++, now,
        std::move(samplers[i]), tokenizer_);
    if (request->embed()) request->set_pooling(pooling_, n_embd_);
    live_[ids[i]] = request.get();
    if (parent == nullptr) {
      parent = std::move(request);
    } else {
      parent->Hold(std::move(request));
    }
  }
  queues_->PushBack(std::move(parent));
  counters_.submitted += n;
  for (int32_t i = 0; i < n; ++i) {
    accepted.id = ids[i];
    sinks[i]->OnAccepted(accepted);
  }
  return absl::OkStatus();
}

// --- Admission, fork, fallback -----------------------------------------------

int32_t Scheduler::MaxGrant(const Request& r) {
  return r.holds_children() ? r.lease().num_tokens() - r.num_computed_tokens()
                            : r.num_uncomputed();
}

absl::Span<const int32_t> Scheduler::AdmissionTokens(const Request& r) {
  // A parent holding children is at its first admission (any preemption
  // releases them), so its tokens are its prompt.
  if (r.holds_children() && r.num_prompt_tokens() > 1) {
    return r.tokens().first(r.num_prompt_tokens() - 1);
  }
  return r.tokens();
}

std::vector<Request*> Scheduler::AdmitHeld(Request* parent, absl::Time now) {
  if (!parent->holds_children()) return {};
  const int32_t children = parent->group_size() - 1;
  num_reserved_ += children;
  for (int32_t i = 0; i < children; ++i) {
    queues_->OnStarted(parent->tenant_index());
  }
  if (parent->num_prompt_tokens() > 1) return {};
  return ForkChildren(parent, now);
}

std::vector<Request*> Scheduler::ForkChildren(Request* parent, absl::Time now) {
  std::vector<Request*> started;
  const kvpager::BlockLease& source = parent->lease();
  for (std::unique_ptr<Request>& child : parent->ReleaseHeld()) {
    --num_reserved_;
    absl::StatusOr<kvpager::BlockLease> lease =
        parent->num_prompt_tokens() > 1
            ? pager_->Fork(source, in_step_ ? &plan_.state_copies
                                            : &pending_state_copies_)
            : pager_->Allocate(child->tokens(), child->cache_salt());
    if (!lease.ok()) {  // no block for a 1-token prompt: the fallback
      queues_->OnStopped(child->tenant_index());
      queues_->PushFront(std::move(child));
      continue;
    }
    Request* c = child.get();
    running_.push_back(std::move(child));
    StartRequest(c, *std::move(lease), now);
    started.push_back(c);
  }
  return started;
}

void Scheduler::ReleaseChildren(Request* parent) {
  const bool reserved = parent->state() == RequestState::kRunning;
  const int32_t tenant = parent->tenant_index();
  std::vector<std::unique_ptr<Request>> children = parent->ReleaseHeld();
  const int32_t n = static_cast<int32_t>(children.size());
  if (reserved) {
    num_reserved_ -= n;
    for (int32_t i = 0; i < n; ++i) queues_->OnStopped(tenant);
  } else {
    queues_->OnHeldLeft(tenant, n);
  }
  // Front of the queue, first child first.
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    queues_->PushFront(std::move(*it));
  }
}

std::unique_ptr<Request> Scheduler::TakeHeld(Request* child) {
  Request* parent = child->holder();
  if (parent->state() == RequestState::kRunning) {
    --num_reserved_;
    queues_->OnStopped(child->tenant_index());
  } else {
    queues_->OnHeldLeft(child->tenant_index(), 1);
  }
  return parent->ReleaseHeld(child);
}

}  // namespace paceline::scheduler
