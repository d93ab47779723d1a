#include "server/memory_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace paceline::server {

bool MemoryTrimmer::Tick(bool idle, absl::Time now) {
  // A trim while busy leaves the idle one due: what the live calls hold
  // is freed only after it.
  if (!idle) busy_since_idle_trim_ = true;
  const bool due = idle ? busy_since_idle_trim_ : now - last_ >= period_;
  if (!due) return false;
  ReleaseFreeMemory();
  last_ = now;
  if (idle) busy_since_idle_trim_ = false;
  return true;
}

void ReleaseFreeMemory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace paceline::server
