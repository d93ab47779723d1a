#include "scheduler/token_sink.h"

namespace paceline::scheduler {

void CollectingSink::OnAccepted(const AcceptInfo& info) {
  absl::MutexLock lock(&mu_);
  accepted_ = true;
  accept_info_ = info;
}

void CollectingSink::OnTokens(const TokenDelta& delta) {
  absl::MutexLock lock(&mu_);
  tokens_.insert(tokens_.end(), delta.ids.begin(), delta.ids.end());
  samples_.insert(samples_.end(), delta.samples.begin(), delta.samples.end());
  ++num_deltas_;
}

void CollectingSink::OnFinished(const FinishInfo& info) {
  absl::MutexLock lock(&mu_);
  finished_ = true;
  finish_ = info;
}

int64_t CollectingSink::buffered_tokens() const {
  absl::MutexLock lock(&mu_);
  return buffered_;
}

void CollectingSink::set_buffered_tokens(int64_t n) {
  absl::MutexLock lock(&mu_);
  buffered_ = n;
}

bool CollectingSink::accepted() const {
  absl::MutexLock lock(&mu_);
  return accepted_;
}

RequestId CollectingSink::id() const {
  absl::MutexLock lock(&mu_);
  return accept_info_.id;
}

AcceptInfo CollectingSink::accept_info() const {
  absl::MutexLock lock(&mu_);
  return accept_info_;
}

std::vector<int32_t> CollectingSink::tokens() const {
  absl::MutexLock lock(&mu_);
  return tokens_;
}

int32_t CollectingSink::num_deltas() const {
  absl::MutexLock lock(&mu_);
  return num_deltas_;
}

std::vector<engine::SampleResult> CollectingSink::samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

bool CollectingSink::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

FinishInfo CollectingSink::finish() const {
  absl::MutexLock lock(&mu_);
  return finish_;
}

bool CollectingSink::WaitFinished(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&finished_), timeout);
  return finished_;
}

}  // namespace paceline::scheduler
