#ifndef PACELINE_SCHEDULER_TOKEN_BUCKET_H_
#define PACELINE_SCHEDULER_TOKEN_BUCKET_H_

// A token bucket: it holds at most `capacity` tokens, refills continuously
// at `rate` tokens per second, and starts full. Taking may overdraw it: the
// level goes negative (a debt) and the refill pays it back first.
//
// Two uses, one type:
//  - a tenant's tokens-per-minute budget (PerMinute): one minute's worth is
//    the burst. The scheduler takes a request's whole reservation at its
//    admission, once the bucket holds it (Allows), and gives back what the
//    request did not use when it finishes (Give); see tenant_queues.h.
//    A reservation larger than the capacity is allowed only when the
//    bucket is full, and takes it into debt (the level goes negative and
//    the refill pays it back first): such a request never waits forever,
//    and the average still holds to the rate.
//  - a stream's pace (Pace): `burst` tokens go out as they are generated,
//    later ones 1/pace apart; a token goes out once the bucket holds a
//    whole one (WhenAvailable), and after a pause up to `burst` go out
//    together again.
//
// The level is brought up to date lazily, at the latest time any call has
// named; a time before that (a clock stepping back) refills nothing and
// drains nothing.
//
// A rate of 0 means unlimited: it always allows, never waits, and taking
// changes nothing. Thread-compatible.

#include <cstdint>

#include "absl/time/time.h"

namespace paceline::scheduler {

class TokenBucket {
 public:
  // Unlimited.
  TokenBucket() = default;
  // rate >= 0 tokens/s (negative counts as 0), capacity >= 0. Full at `now`.
  TokenBucket(double rate, double capacity, absl::Time now);

  // A tokens-per-minute budget: refills at tokens_per_minute / 60 per
  // second, holds one minute's worth. 0 (or less): unlimited.
  static TokenBucket PerMinute(int64_t tokens_per_minute, absl::Time now);
  // A stream's pace: `tokens_per_s` (0: unpaced), holding `burst` tokens
  // (values below 1 count as 1).
  static TokenBucket Pace(double tokens_per_s, int32_t burst, absl::Time now);

  bool unlimited() const { return rate_ == 0; }
  // Tokens per second (0: unlimited).
  double rate() const { return rate_; }

  // The level at `now` (INFINITY when unlimited).
  double Level(absl::Time now);
  // Whether `tokens` (>= 0) may be taken at `now`: the level holds
  // min(tokens, capacity), so more than the capacity needs a full bucket.
  // Within a rounding error (what WhenAvailable promised) counts as held.
  // Always true when unlimited.
  bool Allows(double tokens, absl::Time now);
  // How long from `now` until Allows(tokens) holds (rounded up to the
  // nanosecond); zero if it holds already.
  absl::Duration TimeUntilAllowed(double tokens, absl::Time now);
  // The earliest time at or after `from` (and after every time already
  // named) at which the bucket holds `tokens` (<= capacity), rounded up to
  // the nanosecond; `from` itself when unlimited.
  absl::Time WhenAvailable(double tokens, absl::Time from);
  // Debits `tokens` at `at`; the level may go negative. A level a rounding
  // error below zero (taking what WhenAvailable promised) counts as zero.
  void Take(double tokens, absl::Time at);
  // Gives back `tokens` (>= 0) taken earlier and not used, at `at`; the
  // level stays at most the capacity (the burst never grows).
  void Give(double tokens, absl::Time at);

 private:
  // Brings the level up to `now` if it is later than the last time seen.
  void Refill(absl::Time now);

  double rate_ = 0;  // tokens per second; 0: unlimited
  double capacity_ = 0;
  double level_ = 0;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace paceline::scheduler

#endif  // PACELINE_SCHEDULER_TOKEN_BUCKET_H_
