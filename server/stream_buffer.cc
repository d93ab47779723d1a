#include "server/stream_buffer.h"

#include <utility>

#include "server/pacer.h"

namespace paceline::server {

StreamBuffer::StreamBuffer(const DeliveryOptions& options,
                           scheduler::Clock* clock, Pacer* pacer,
                           DeliveryObserver* observer, std::string tenant)
    : clock_(clock),
      pacer_(pacer),
      observer_(observer),
      tenant_(std::move(tenant)),
      queued_(clock->Now()),
      gate_(options.pace_tokens_per_s, options.burst_tokens, queued_),
      options_(options) {
  if (observer_ != nullptr) observer_->OnStreamOpened();
}

void StreamBuffer::Attach(StreamWriter* writer) {
  absl::MutexLock lock(&mu_);
  writer_ = writer;
}

void StreamBuffer::Detach() {
  bool closed = false;
  {
    absl::MutexLock lock(&mu_);
    writer_ = nullptr;
    closed = !done_;
    done_ = true;
    pending_.clear();
    DropPendingTokens();
    has_ready_ = false;
    ready_ = Outgoing();
  }
  if (closed && observer_ != nullptr) observer_->OnStreamClosed();
}

void StreamBuffer::OnAccepted(const scheduler::AcceptInfo& info) {
  {
    absl::MutexLock lock(&mu_);
    accepted_ = info;
    was_accepted_ = true;
    if (done_ || !aborted_.ok()) return;
    accepted_ready_ = true;
  }
  Pump();
}

void StreamBuffer::OnTokens(const scheduler::TokenDelta& delta) {
  const absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    if (done_ || !aborted_.ok()) return;
    const size_t n = delta.ids.size();
    for (size_t i = 0; i < n; ++i) {
      Piece piece;
      piece.id = delta.ids[i];
      if (i + 1 == n) piece.text.assign(delta.text.data(), delta.text.size());
      if (i < delta.samples.size()) piece.sample = delta.samples[i];
      piece.ready = now;
      pending_.push_back(std::move(piece));
    }
    if (n == 0 && !delta.text.empty()) {
      Piece piece;
      piece.text.assign(delta.text.data(), delta.text.size());
      piece.ready = now;
      pending_.push_back(std::move(piece));
    }
    AddPendingTokens(static_cast<int64_t>(n));
    const absl::Time due = ReleaseLocked(now);
    if (due != absl::InfiniteFuture()) ScheduleLocked(due);
  }
  Pump();
}

void StreamBuffer::OnFinished(const scheduler::FinishInfo& info) {
  {
    absl::MutexLock lock(&mu_);
    finish_ = info;
  }
  Pump();
}

int64_t StreamBuffer::buffered_tokens() const {
  return pending_tokens_.load(std::memory_order_relaxed);
}

void StreamBuffer::OnWriteDone(bool ok) {
  const absl::Time now = clock_->Now();
  int32_t delivered = 0;  // token ids that reached the client
  bool first = false;
  absl::Duration since;
  {
    absl::MutexLock lock(&mu_);
    in_flight_ = false;
    if (ok && in_flight_is_delta_) {
      if (first_delivered_ == absl::InfinitePast()) first_delivered_ = now;
      last_delivered_ = now;
      if (in_flight_tokens_ > 0) {
        delivered = in_flight_tokens_;
        first = last_tokens_delivered_ == absl::InfinitePast();
        since = now - (first ? queued_ : last_tokens_delivered_);
        last_tokens_delivered_ = now;
      }
    }
    in_flight_is_delta_ = false;
    in_flight_tokens_ = 0;
    if (!ok && !broken_) {
      broken_ = true;
      pending_.clear();
      DropPendingTokens();
      has_ready_ = false;
      accepted_ready_ = false;
    }
  }
  if (delivered > 0 && observer_ != nullptr) {
    observer_->OnDelivered(tenant_, first, since, delivered);
  }
  Pump();
}

void StreamBuffer::Abort(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (done_ || !aborted_.ok()) return;
    aborted_ = std::move(status);
    pending_.clear();
    DropPendingTokens();
    has_ready_ = false;
    accepted_ready_ = false;
  }
  Pump();
}

absl::Time StreamBuffer::Release(absl::Time now) {
  absl::Time due;
  {
    absl::MutexLock lock(&mu_);
    scheduled_ = false;
    due = ReleaseLocked(now);
    if (due != absl::InfiniteFuture()) scheduled_ = true;
  }
  Pump();
  return due;
}

bool StreamBuffer::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

scheduler::RequestId StreamBuffer::id() const {
  absl::MutexLock lock(&mu_);
  return accepted_.id;
}

absl::Time StreamBuffer::ReleaseLocked(absl::Time now) {
  if (done_ || !aborted_.ok() || broken_) return absl::InfiniteFuture();
  while (!pending_.empty()) {
    Piece& piece = pending_.front();
    if (piece.id >= 0) {
      const absl::Time at = gate_.ReleaseTime(piece.ready);
      if (at > now) return at;
      gate_.Take(at);
      AddPendingTokens(-1);
    }
    if (!has_ready_) {
      ready_ = Outgoing();
      ready_.kind = Outgoing::Kind::kDelta;
      has_ready_ = true;
    }
    if (piece.id >= 0) ready_.ids.push_back(piece.id);
    ready_.text += piece.text;
    if (piece.sample.has_value()) ready_.samples.push_back(*std::move(piece.sample));
    pending_.pop_front();
  }
  return absl::InfiniteFuture();
}

bool StreamBuffer::NextWriteLocked(Outgoing* out) {
  if (in_flight_ || done_ || writer_ == nullptr) return false;
  const bool cut = !aborted_.ok() || broken_;
  if (!cut) {
    if (accepted_ready_) {
      *out = Outgoing();
      out->kind = Outgoing::Kind::kAccepted;
      out->accepted = accepted_;
      accepted_ready_ = false;
      in_flight_ = true;
      return true;
    }
    if (has_ready_) {
      *out = std::move(ready_);
      ready_ = Outgoing();
      has_ready_ = false;
      in_flight_ = true;
      in_flight_is_delta_ = true;
      in_flight_tokens_ = static_cast<int32_t>(out->ids.size());
      return true;
    }
    if (!finish_.has_value() || !pending_.empty()) return false;
  }
  *out = Outgoing();
  out->kind = Outgoing::Kind::kFinished;
  out->was_accepted = was_accepted_;
  if (finish_.has_value()) out->finish = *finish_;
  out->aborted =
      !aborted_.ok() ? aborted_
      : broken_      ? absl::CancelledError("the client stopped reading")
                     : absl::OkStatus();
  out->first_delivered = first_delivered_;
  out->last_delivered = last_delivered_;
  done_ = true;
  return true;
}

void StreamBuffer::Pump() {
  Outgoing out;
  StreamWriter* writer = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (!NextWriteLocked(&out)) return;
    writer = writer_;
  }
  // Outside the lock: the writer may complete inline and call back.
  // Finishing may end the call and drop this buffer before StartWrite
  // returns: nothing of `this` is touched after it.
  DeliveryObserver* closed =
      out.kind == Outgoing::Kind::kFinished ? observer_ : nullptr;
  writer->StartWrite(out);
  if (closed != nullptr) closed->OnStreamClosed();
}

void StreamBuffer::AddPendingTokens(int64_t n) {
  pending_tokens_.fetch_add(n, std::memory_order_relaxed);
  if (pacer_ != nullptr) pacer_->AddBufferedTokens(n);
}

void StreamBuffer::DropPendingTokens() {
  const int64_t n = pending_tokens_.exchange(0, std::memory_order_relaxed);
  if (pacer_ != nullptr) pacer_->AddBufferedTokens(-n);
}

void StreamBuffer::ScheduleLocked(absl::Time due) {
  if (scheduled_ || pacer_ == nullptr) return;
  scheduled_ = true;
  pacer_->Schedule(shared_from_this(), due);
}

}  // namespace paceline::server
