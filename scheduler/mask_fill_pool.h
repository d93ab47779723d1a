#ifndef PACELINE_SCHEDULER_MASK_FILL_POOL_H_
#define PACELINE_SCHEDULER_MASK_FILL_POOL_H_

// Fills a step's token masks (structured output) on worker threads while
// the engine thread runs the forward pass: a mask depends only on the
// tokens a request has already generated, so it can be computed before the
// logits exist. The engine thread starts the step's jobs, runs the forward
// pass, then Wait()s, running whatever no worker has taken yet itself — so
// with no workers (threads = 0) the jobs simply run in Wait.
//
// Each job touches one request's sampler, which nothing else touches until
// Wait returns (the engine thread only runs the forward pass meanwhile).
//
// Thread-safety: Start and Wait are the engine thread's; one batch of jobs
// at a time.

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace paceline::scheduler {

class MaskFillPool {
 public:
  explicit MaskFillPool(int threads);
  ~MaskFillPool();
  MaskFillPool(const MaskFillPool&) = delete;
  MaskFillPool& operator=(const MaskFillPool&) = delete;

  // Hands out `jobs` (after the previous batch's Wait).
  void Start(std::vector<std::function<void()>> jobs);
  // Returns once every job of the batch has run; idempotent.
  void Wait();

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  void Work();
  // Takes the next job, or returns false when none is left to take.
  bool RunOne() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::vector<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // the next job to take
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;  // jobs finished
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_MASK_FILL_POOL_H_
