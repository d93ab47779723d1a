#ifndef PACELINE_SCHEDULER_CLOCK_H_
#define PACELINE_SCHEDULER_CLOCK_H_

// The time source of the scheduler: arrival times, request timings, the
// per-tenant token buckets. Injected so tests step time by hand.
//
// Thread-safety: Now() may be called from any thread.

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace paceline::scheduler {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// absl::Now().
class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }

  // A process-wide instance (never destroyed).
  static Clock* Get() {
    static SystemClock* clock = new SystemClock();
    return clock;
  }
};

// Time that moves only when told to. Starts at the Unix epoch.
class ManualClock final : public Clock {
 public:
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_CLOCK_H_
