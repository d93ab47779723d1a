#include "scheduler/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace paceline::scheduler {

TokenBucket::TokenBucket(int64_t tokens_per_minute, absl::Time now)
    : per_second_(static_cast<double>(std::max<int64_t>(tokens_per_minute, 0)) /
                  60.0),
      capacity_(static_cast<double>(std::max<int64_t>(tokens_per_minute, 0))),
      level_(capacity_),
      last_(now) {}

void TokenBucket::Refill(absl::Time now) {
  // A clock that steps back refills nothing (and does not drain).
  if (now > last_) {
    level_ = std::min(capacity_,
                      level_ + absl::ToDoubleSeconds(now - last_) * per_second_);
    last_ = now;
  }
}

bool TokenBucket::Allows(absl::Time now) {
  if (unlimited()) return true;
  Refill(now);
  return level_ > 0;
}

void TokenBucket::Take(int64_t tokens, absl::Time now) {
  if (unlimited()) return;
  Refill(now);
  level_ -= static_cast<double>(tokens);
}

absl::Duration TokenBucket::TimeUntilAllowed(absl::Time now) {
  if (Allows(now)) return absl::ZeroDuration();
  // Strictly positive: a hair past the moment the level reaches zero.
  const double seconds = (-level_) / per_second_;
  return absl::Seconds(seconds) + absl::Milliseconds(1);
}

double TokenBucket::Level(absl::Time now) {
  if (unlimited()) return INFINITY;
  Refill(now);
  return level_;
}

}  // namespace paceline::scheduler
