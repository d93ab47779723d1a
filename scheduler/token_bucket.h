#ifndef PACELINE_SCHEDULER_TOKEN_BUCKET_H_
#define PACELINE_SCHEDULER_TOKEN_BUCKET_H_

// A tenant's tokens-per-minute budget as a token bucket: it holds at most
// one minute's worth (the burst), refills continuously at rate / 60 per
// second, and is debited as service is given (prompt tokens at admission,
// generated tokens as they are sampled). Service already under way is never
// stopped, so the level may go negative (a debt); a tenant is admitted
// only while its level is positive, which holds its average to the rate.
//
// A rate of 0 means unlimited. Thread-compatible (engine thread only).

#include <cstdint>

#include "absl/time/time.h"

namespace paceline::scheduler {

class TokenBucket {
 public:
  // Unlimited.
  TokenBucket() = default;
  // Full at `now`.
  TokenBucket(int64_t tokens_per_minute, absl::Time now);

  bool unlimited() const { return per_second_ == 0; }

  // Whether a new request may be admitted at `now` (level > 0).
  bool Allows(absl::Time now);
  // Debits `tokens` (the level may go negative).
  void Take(int64_t tokens, absl::Time now);
  // How long from `now` until Allows() holds; zero if it holds already.
  absl::Duration TimeUntilAllowed(absl::Time now);
  // The level after refilling to `now`.
  double Level(absl::Time now);

 private:
  void Refill(absl::Time now);

  double per_second_ = 0;  // 0: unlimited
  double capacity_ = 0;
  double level_ = 0;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_TOKEN_BUCKET_H_
