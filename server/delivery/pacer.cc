#include "server/delivery/pacer.h"

#include <utility>

namespace paceline::server {

Pacer::Pacer(scheduler::Clock* clock) : clock_(clock) {}

Pacer::~Pacer() { Stop(); }

void Pacer::Start() {
  thread_ = std::thread([this] { ThreadMain(); });
}

void Pacer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  heap_ = {};
  woken_.clear();
}

void Pacer::Wake(std::shared_ptr<Deliverable> target) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  // Non-empty: the thread has been signalled already, or is running.
  if (woken_.empty()) wake_.Signal();
  woken_.push_back(std::move(target));
}

void Pacer::Schedule(std::shared_ptr<Deliverable> target, absl::Time due) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  const bool earliest = heap_.empty() || due < heap_.top().due;
  heap_.push(Entry{due, next_seq_++, std::move(target)});
  if (earliest) wake_.Signal();
}

absl::Time Pacer::RunDue() {
  const absl::Time now = clock_->Now();
  std::vector<std::shared_ptr<Deliverable>> due;
  {
    absl::MutexLock lock(&mu_);
    PopDueLocked(now, &due);
  }
  ReleaseAll(now, &due);
  absl::MutexLock lock(&mu_);
  return heap_.empty() ? absl::InfiniteFuture() : heap_.top().due;
}

int64_t Pacer::num_scheduled() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(heap_.size());
}

int64_t Pacer::num_woken() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(woken_.size());
}

void Pacer::ThreadMain() {
  std::vector<std::shared_ptr<Deliverable>> due;
  while (true) {
    absl::Time now;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (stopping_) return;
        now = clock_->Now();
        if (!woken_.empty()) break;
        if (!heap_.empty() && heap_.top().due <= now) break;
        if (heap_.empty()) {
          wake_.Wait(&mu_);
        } else {
          wake_.WaitWithTimeout(&mu_, heap_.top().due - now);
        }
      }
      PopDueLocked(now, &due);
    }
    ReleaseAll(now, &due);
  }
}

void Pacer::PopDueLocked(absl::Time now,
                         std::vector<std::shared_ptr<Deliverable>>* due) {
  // Paced entries first: they have waited for their time.
  while (!heap_.empty() && heap_.top().due <= now) {
    due->push_back(heap_.top().target);
    heap_.pop();
  }
  for (std::shared_ptr<Deliverable>& target : woken_) {
    due->push_back(std::move(target));
  }
  woken_.clear();  // keeps its capacity: no allocation per hand-over
}

void Pacer::ReleaseAll(absl::Time now,
                       std::vector<std::shared_ptr<Deliverable>>* due) {
  for (std::shared_ptr<Deliverable>& target : *due) {
    const absl::Time next = target->Release(now);
    if (next != absl::InfiniteFuture()) {
      absl::MutexLock lock(&mu_);
      if (!stopping_) heap_.push(Entry{next, next_seq_++, std::move(target)});
    }
  }
  due->clear();
}

}  // namespace paceline::server
