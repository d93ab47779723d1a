#include "scheduler/mask_fill_pool.h"

#include <utility>

namespace paceline::scheduler {

MaskFillPool::MaskFillPool(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

MaskFillPool::~MaskFillPool() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

void MaskFillPool::Start(std::vector<std::function<void()>> jobs) {
  absl::MutexLock lock(&mu_);
  jobs_ = std::move(jobs);
  next_ = 0;
  done_ = 0;
}

bool MaskFillPool::RunOne() {
  std::function<void()>* job = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (next_ == jobs_.size()) return false;
    job = &jobs_[next_++];
  }
  (*job)();  // jobs_ is not resized until every job is done (Wait)
  absl::MutexLock lock(&mu_);
  ++done_;
  return true;
}

void MaskFillPool::Work() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || next_ < jobs_.size();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
    }
    RunOne();
  }
}

void MaskFillPool::Wait() {
  while (RunOne()) {
  }
  absl::MutexLock lock(&mu_);
  auto finished = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return done_ == jobs_.size();
  };
  mu_.Await(absl::Condition(&finished));
}

}  // namespace paceline::scheduler
