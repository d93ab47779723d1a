#include "scheduler/request.h"

#include <algorithm>
#include <utility>

namespace paceline::scheduler {

absl::string_view PriorityClassName(PriorityClass priority) {
  switch (priority) {
    case PriorityClass::kInteractive:
      return "interactive";
    case PriorityClass::kStandard:
      return "standard";
    case PriorityClass::kBatch:
      return "batch";
  }
  return "unknown";
}

absl::string_view CancelReasonName(CancelReason reason) {
  switch (reason) {
    case CancelReason::kClient:
      return "client";
    case CancelReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

Request::Request(RequestId id, RequestSpec spec, int32_t tenant_index,
                 uint64_t arrival_seq, absl::Time arrival,
                 engine::SequenceSampler sampler,
                 const engine::Tokenizer* tokenizer)
    : id_(id),
      spec_(std::move(spec)),
      tenant_index_(tenant_index),
      arrival_seq_(arrival_seq),
      num_prompt_tokens_(static_cast<int32_t>(spec_.prompt.size())),
      tokenizer_(tokenizer),
      tokens_(std::move(spec_.prompt)),
      sampler_(std::move(sampler)) {
  // Room for a typical generation; a long one grows the vector as usual.
  tokens_.reserve(tokens_.size() + std::min(spec_.stop.max_tokens, 512));
  usage_.prompt_tokens = num_prompt_tokens_;
  timings_.arrival = arrival;
}

double Request::Slack() const {
  if (spec_.pace_tokens_per_s <= 0) return 0;
  return static_cast<double>(spec_.sink->buffered_tokens()) /
         spec_.pace_tokens_per_s;
}

void Request::Hold(std::unique_ptr<Request> child) {
  child->holder_ = this;
  held_.push_back(std::move(child));
}

std::vector<std::unique_ptr<Request>> Request::ReleaseHeld() {
  for (const std::unique_ptr<Request>& child : held_) child->holder_ = nullptr;
  return std::exchange(held_, {});
}

std::unique_ptr<Request> Request::ReleaseHeld(const Request* child) {
  auto it = std::find_if(held_.begin(), held_.end(),
                         [child](const auto& c) { return c.get() == child; });
  std::unique_ptr<Request> released = std::move(*it);
  held_.erase(it);
  released->holder_ = nullptr;
  return released;
}

int64_t Request::ReservationNeeded() const {
  if (reserved_) return 0;
  int64_t tokens = int64_t{num_prompt_tokens_} + spec_.stop.max_tokens;
  // A parent is unreserved until its admission, and so are its children.
  for (const std::unique_ptr<Request>& child : held_) {
    tokens += child->ReservationNeeded();
  }
  return tokens;
}

int64_t Request::TakeReservation() {
  const int64_t tokens = ReservationNeeded();
  reserved_ = true;
  for (const std::unique_ptr<Request>& child : held_) child->reserved_ = true;
  return tokens;
}

int64_t Request::ReturnReservation() {
  if (!reserved_) return 0;
  reserved_ = false;
  // Generation stops at max_tokens (AcceptSample), drafts included.
  return (prompt_charged_ ? 0 : int64_t{num_prompt_tokens_}) +
         spec_.stop.max_tokens - num_generated();
}

void Request::Start(kvpager::BlockLease lease, absl::Time now) {
  lease_ = std::move(lease);
  num_computed_tokens_ = lease_.num_computed_tokens();
  usage_.recomputed_tokens +=
      std::max(0, lost_computed_tokens_ - num_computed_tokens_);
  lost_computed_tokens_ = 0;
  if (timings_.first_scheduled == absl::InfinitePast()) {
    timings_.first_scheduled = now;
    usage_.cached_prompt_tokens =
        std::min(lease_.num_cached_tokens(), num_prompt_tokens_);
  }
  state_ = RequestState::kRunning;
}

void Request::Preempt() {
  lease_.Reset();
  lost_computed_tokens_ = num_computed_tokens_;
  num_computed_tokens_ = 0;
  if (pooler_ != nullptr) pooler_->Reset();
  ++usage_.preemptions;
  state_ = RequestState::kWaiting;
}

std::optional<FinishReason> Request::AcceptSample(
    const engine::SampleResult& sample, absl::Time now) {
  if (timings_.first_token == absl::InfinitePast()) timings_.first_token = now;
  last_token_ = now;
  return Append(sample.token, spec_.sampling.logprobs ? &sample : nullptr);
}

std::optional<FinishReason> Request::AcceptForced(int32_t token) {
  ++usage_.forced_tokens;
  return Append(token, nullptr);
}

std::optional<FinishReason> Request::Append(
    int32_t token, const engine::SampleResult* logprobs) {
  tokens_.push_back(token);
  ++usage_.completion_tokens;
  const bool eog = !spec_.stop.ignore_eos && tokenizer_->IsEog(token);
  if (eog || std::find(spec_.stop.stop_token_ids.begin(),
                       spec_.stop.stop_token_ids.end(),
                       token) != spec_.stop.stop_token_ids.end()) {
    stop_token_ = token;
    return FinishReason::kStop;
  }
  Deliver(token, logprobs);
  if (num_generated() >= spec_.stop.max_tokens) return FinishReason::kLength;
  return std::nullopt;
}

void Request::Deliver(int32_t token, const engine::SampleResult* sample) {
  TokenDelta delta;
  delta.ids = absl::MakeConstSpan(&token, 1);
  if (sample != nullptr) delta.samples = absl::MakeConstSpan(sample, 1);
  spec_.sink->OnTokens(delta);
}

FinishInfo Request::Finish(FinishReason reason, absl::Status status,
                           absl::Time now) {
  lease_.Reset();
  state_ = RequestState::kFinished;
  timings_.finished = now;
  FinishInfo info;
  info.reason = reason;
  info.status = std::move(status);
  info.stop_string = std::move(stop_string_);
  info.stop_token = stop_token_;
  info.usage = usage_;
  info.timings = timings_;
  if (pooler_ != nullptr && info.status.ok() && num_uncomputed() == 0) {
    info.embedding = pooler_->Finish();
  }
  spec_.sink->OnFinished(info);
  return info;
}

FinishInfo Request::StopAtString(std::string stop_string, int32_t tokens,
                                 absl::Time now) {
  stop_string_ = std::move(stop_string);
  usage_.completion_tokens = std::min(usage_.completion_tokens, tokens);
  return Finish(FinishReason::kStop, absl::OkStatus(), now);
}

FinishInfo Request::Cancel(CancelReason reason, absl::Time now) {
  cancel_reason_ = reason;
  return Finish(FinishReason::kCancelled,
                reason == CancelReason::kClient
                    ? absl::CancelledError("cancelled by the client")
                    : absl::UnavailableError("the server is shutting down"),
                now);
}

}  // namespace paceline::scheduler
