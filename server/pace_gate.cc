#include "server/pace_gate.h"

#include <algorithm>

namespace paceline::server {

PaceGate::PaceGate(double pace, int32_t burst, absl::Time start)
    : pace_(std::max(pace, 0.0)),
      capacity_(std::max<int32_t>(burst, 1)),
      level_(capacity_),
      last_(start) {}

double PaceGate::LevelAt(absl::Time t) const {
  if (t <= last_) return level_;
  return std::min(capacity_, level_ + pace_ * absl::ToDoubleSeconds(t - last_));
}

absl::Time PaceGate::ReleaseTime(absl::Time ready) const {
  if (!paced()) return ready;
  const absl::Time from = std::max(ready, last_);
  const double level = LevelAt(from);
  if (level >= 1.0) return from;
  // Round up to the nanosecond so that Take at the returned time finds a
  // whole token despite floating-point rounding.
  return from + absl::Ceil(absl::Seconds((1.0 - level) / pace_),
                           absl::Nanoseconds(1));
}

void PaceGate::Take(absl::Time at) {
  if (!paced()) return;
  level_ = LevelAt(at) - 1.0;
  if (level_ < 0 && level_ > -1e-6) level_ = 0;  // rounding at the boundary
  last_ = std::max(last_, at);
}

}  // namespace paceline::server
