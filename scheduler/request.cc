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
      sampler_(std::move(sampler)),
      detokenizer_(tokenizer,
                   {.control_token_text = spec_.control_token_text}) {
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
  ++usage_.preemptions;
  state_ = RequestState::kWaiting;
}

std::optional<FinishReason> Request::AcceptSample(
    const engine::SampleResult& sample, absl::Time now) {
  const int32_t token = sample.token;
  tokens_.push_back(token);
  ++usage_.completion_tokens;
  if (timings_.first_token == absl::InfinitePast()) timings_.first_token = now;
  last_token_ = now;
  const engine::SampleResult* logprobs =
      spec_.sampling.logprobs ? &sample : nullptr;

  const bool eog = !spec_.stop.ignore_eos && tokenizer_->IsEog(token);
  if (eog || std::find(spec_.stop.stop_token_ids.begin(),
                       spec_.stop.stop_token_ids.end(),
                       token) != spec_.stop.stop_token_ids.end()) {
    stop_token_ = token;
    held_text_ += detokenizer_.Flush();
    if (!held_text_.empty()) Deliver(-1, held_text_, nullptr);
    held_text_.clear();
    return FinishReason::kStop;
  }

  std::string& text = scratch_text_;
  text.assign(held_text_);
  text += detokenizer_.Push(token);
  held_text_.clear();
  if (!spec_.stop.stop_strings.empty()) {
    const std::string* matched = nullptr;
    const size_t at = FindStopString(text, &matched);
    if (matched != nullptr) {
      stop_string_ = *matched;
      const size_t keep =
          at + (spec_.stop.include_stop_str ? matched->size() : 0);
      Deliver(token, absl::string_view(text).substr(0, keep), logprobs);
      return FinishReason::kStop;
    }
  }
  if (num_generated() >= spec_.stop.max_tokens) {
    text += detokenizer_.Flush();
    Deliver(token, text, logprobs);
    return FinishReason::kLength;
  }
  const size_t hold = HoldBack(text);
  held_text_.assign(text, text.size() - hold, hold);
  Deliver(token, absl::string_view(text).substr(0, text.size() - hold),
          logprobs);
  return std::nullopt;
}

void Request::Deliver(int32_t token, absl::string_view text,
                      const engine::SampleResult* sample) {
  TokenDelta delta;
  if (token >= 0) delta.ids = absl::MakeConstSpan(&token, 1);
  delta.text = text;
  if (sample != nullptr) delta.samples = absl::MakeConstSpan(sample, 1);
  spec_.sink->OnTokens(delta);
}

size_t Request::FindStopString(absl::string_view text,
                               const std::string** matched) const {
  size_t best = absl::string_view::npos;
  for (const std::string& s : spec_.stop.stop_strings) {
    const size_t at = text.find(s);
    if (at < best) {
      best = at;
      *matched = &s;
    }
  }
  return best;
}

size_t Request::HoldBack(absl::string_view text) const {
  size_t hold = 0;
  for (const std::string& s : spec_.stop.stop_strings) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > hold; --k) {
      if (text.substr(text.size() - k) == absl::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return hold;
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
  spec_.sink->OnFinished(info);
  return info;
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
