#ifndef PACELINE_SERVER_MEMORY_TRIM_H_
#define PACELINE_SERVER_MEMORY_TRIM_H_

// Gives the allocator's free memory back to the system, so the daemon's
// RSS returns near its baseline after a request that needed a lot (a large
// answer, a long prompt's JSON): glibc keeps freed chunks in its arenas,
// and the pages of a large free region stay resident until trimmed.
//
// The daemon's main thread calls Tick once a second. A trim is due when
// the heap shows something to give back since the last one: the RSS rose
// past its lowest reading since then (pages touched and maybe freed), or
// the allocator's free bytes did (memory freed after the last trim, e.g.
// an answer's body released once it was written). While idle a due trim
// runs at once; while busy at most every `period`. A trim takes a few
// milliseconds per GiB of heap and holds each arena's lock only while that
// arena is walked. Thread-compatible (one caller).

#include <cstdint>
#include <functional>

#include "absl/time/time.h"

namespace paceline::server {

// What the trimmer reads of the heap, and how it trims: the process's in
// production (HeapOfThisProcess), a fake in tests.
struct HeapProbe {
  struct Reading {
    int64_t rss_bytes = 0;
    int64_t free_bytes = 0;  // freed, kept by the allocator
  };
  std::function<Reading()> read;
  std::function<void()> release;
};

HeapProbe HeapOfThisProcess();

class MemoryTrimmer {
 public:
  // Growth below `slack` (RSS or free bytes) does not make a trim due.
  static constexpr int64_t kDefaultSlack = int64_t{8} << 20;

  MemoryTrimmer(absl::Duration period, HeapProbe heap,
                int64_t slack = kDefaultSlack);

  // `idle`: no call is live now. Returns whether it trimmed.
  bool Tick(bool idle, absl::Time now);

 private:
  void Floor(const HeapProbe::Reading& r);

  const absl::Duration period_;
  const HeapProbe heap_;
  const int64_t slack_;
  absl::Time last_ = absl::InfinitePast();
  // The lowest readings since the last trim (its own reading included).
  HeapProbe::Reading low_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_MEMORY_TRIM_H_
