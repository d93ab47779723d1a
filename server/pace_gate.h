#ifndef PACELINE_SERVER_PACE_GATE_H_
#define PACELINE_SERVER_PACE_GATE_H_

// When each of a stream's tokens may be delivered: a token bucket that
// holds at most `burst` tokens, refills at `pace` tokens per second, and
// starts full. A token ready at time r goes out at r if the bucket holds a
// whole token then, else as soon as it does. So the first `burst` tokens go
// out as they are generated, later ones 1/pace apart; after a pause the
// bucket refills and up to `burst` go out together again.
//
// A pace of 0 means unpaced: every token goes out when ready.
// Thread-compatible.

#include <cstdint>

#include "absl/time/time.h"

namespace paceline::server {

class PaceGate {
 public:
  // Unpaced.
  PaceGate() = default;
  // pace >= 0 tokens/s; burst >= 1 (smaller values count as 1). Full at
  // `start`.
  PaceGate(double pace, int32_t burst, absl::Time start);

  bool paced() const { return pace_ > 0; }
  double pace() const { return pace_; }

  // When a token that is ready at `ready` may go out (>= ready).
  absl::Time ReleaseTime(absl::Time ready) const;
  // Takes one token at `at`, which must be >= ReleaseTime of that token.
  void Take(absl::Time at);

 private:
  // The level at `t` (>= last_).
  double LevelAt(absl::Time t) const;

  double pace_ = 0;
  double capacity_ = 1;
  double level_ = 1;
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_PACE_GATE_H_
