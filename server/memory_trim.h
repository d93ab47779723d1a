#ifndef PACELINE_SERVER_MEMORY_TRIM_H_
#define PACELINE_SERVER_MEMORY_TRIM_H_

// Gives the allocator's free memory back to the system, so the daemon's
// RSS returns near its baseline after a request that needed a lot (a large
// answer, a long prompt's JSON): glibc keeps freed chunks in its arenas,
// and the pages of a large free region stay resident until trimmed.
//
// The daemon's main thread calls Tick once a second: it trims once each
// time the daemon goes idle (no live call), and every `period` while busy. A trim takes a few milliseconds per GiB of
// heap and holds each arena's lock only while that arena is walked.
// Thread-compatible (one caller).

#include "absl/time/time.h"

namespace paceline::server {

class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(absl::Duration period) : period_(period) {}

  // `idle`: no call is live now. Returns whether it trimmed.
  bool Tick(bool idle, absl::Time now);

 private:
  const absl::Duration period_;
  absl::Time last_ = absl::InfinitePast();
  bool busy_since_idle_trim_ = true;
};

// malloc_trim(0) where the allocator is glibc's; nothing elsewhere.
void ReleaseFreeMemory();

}  // namespace paceline::server

#endif  // PACELINE_SERVER_MEMORY_TRIM_H_
