#include "server/memory_trim.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace paceline::server {
namespace {

int64_t ResidentBytes() {
  long pages = 0;  // NOLINT(runtime/int): fscanf's %ld
  long resident = 0;  // NOLINT(runtime/int)
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? int64_t{resident} * sysconf(_SC_PAGESIZE) : 0;
}

int64_t AllocatorFreeBytes() {
#if defined(__GLIBC__)
  return static_cast<int64_t>(mallinfo2().fordblks);
#else
  return 0;
#endif
}

}  // namespace

HeapProbe HeapOfThisProcess() {
  return HeapProbe{
      .read = [] { return HeapProbe::Reading{ResidentBytes(),
                                              AllocatorFreeBytes()}; },
      .release =
          [] {
#if defined(__GLIBC__)
            malloc_trim(0);
#endif
          },
  };
}

MemoryTrimmer::MemoryTrimmer(absl::Duration period, HeapProbe heap,
                             int64_t slack)
    : period_(period), heap_(std::move(heap)), slack_(slack) {
  low_ = heap_.read();
}

void MemoryTrimmer::Floor(const HeapProbe::Reading& r) {
  low_.rss_bytes = std::min(low_.rss_bytes, r.rss_bytes);
  low_.free_bytes = std::min(low_.free_bytes, r.free_bytes);
}

bool MemoryTrimmer::Tick(bool idle, absl::Time now) {
  const HeapProbe::Reading r = heap_.read();
  Floor(r);
  const bool grew = r.rss_bytes - low_.rss_bytes > slack_ ||
                    r.free_bytes - low_.free_bytes > slack_;
  if (!grew || (!idle && now - last_ < period_)) return false;
  heap_.release();
  last_ = now;
  low_ = heap_.read();
  return true;
}

}  // namespace paceline::server
