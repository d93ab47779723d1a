#include "scheduler/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace paceline::scheduler {
namespace {

// What WhenAvailable's rounding may leave missing; Allows and Take forgive
// it.
constexpr double kRounding = 1e-6;

}  // namespace

TokenBucket::TokenBucket(double rate, double capacity, absl::Time now)
    : rate_(std::max(rate, 0.0)),
      capacity_(std::max(capacity, 0.0)),
      level_(capacity_),
      last_(now) {}

TokenBucket TokenBucket::PerMinute(int64_t tokens_per_minute, absl::Time now) {
  const double per_minute =
      static_cast<double>(std::max<int64_t>(tokens_per_minute, 0));
  return TokenBucket(per_minute / 60.0, per_minute, now);
}

TokenBucket TokenBucket::Pace(double tokens_per_s, int32_t burst,
                              absl::Time now) {
  return TokenBucket(tokens_per_s, std::max<int32_t>(burst, 1), now);
}

void TokenBucket::Refill(absl::Time now) {
  if (now <= last_) return;  // a clock that steps back refills nothing
  level_ =
      std::min(capacity_, level_ + absl::ToDoubleSeconds(now - last_) * rate_);
  last_ = now;
}

double TokenBucket::Level(absl::Time now) {
  if (unlimited()) return INFINITY;
  Refill(now);
  return level_;
}

bool TokenBucket::Allows(double tokens, absl::Time now) {
  if (unlimited()) return true;
  return Level(now) + kRounding >= std::min(tokens, capacity_);
}

absl::Duration TokenBucket::TimeUntilAllowed(double tokens, absl::Time now) {
  if (Allows(tokens, now)) return absl::ZeroDuration();
  return WhenAvailable(std::min(tokens, capacity_), now) - now;
}

absl::Time TokenBucket::WhenAvailable(double tokens, absl::Time from) {
  if (unlimited()) return from;
  Refill(from);  // now last_ == max(from, every earlier time)
  if (level_ >= tokens) return last_;
  // Rounded up so that Take at the returned time finds the tokens despite
  // floating-point rounding (and Take forgives what is left of it).
  return last_ + absl::Ceil(absl::Seconds((tokens - level_) / rate_),
                            absl::Nanoseconds(1));
}

void TokenBucket::Take(double tokens, absl::Time at) {
  if (unlimited()) return;
  Refill(at);
  level_ -= tokens;
  if (level_ < 0 && level_ > -kRounding) level_ = 0;  // rounding at the edge
}

void TokenBucket::Give(double tokens, absl::Time at) {
  if (unlimited()) return;
  Refill(at);
  level_ = std::min(capacity_, level_ + std::max(tokens, 0.0));
}

}  // namespace paceline::scheduler
