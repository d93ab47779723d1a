#ifndef PACELINE_SERVER_GRPC_GRPC_TSAN_H_
#define PACELINE_SERVER_GRPC_GRPC_TSAN_H_

// What gRPC's core guarantees but ThreadSanitizer cannot see (Debian's gRPC
// is not built with it): an operation a reactor starts (StartWrite, Finish)
// happens before the reaction that completes it (OnWriteDone, OnDone), on
// whichever gRPC thread that runs. A reactor calls HandOffToGrpc(this) just
// before starting one and TakeBackFromGrpc(this) first thing in the
// reaction, so what it wrote before the start is ordered before what the
// reaction reads, and every other access of ours stays checked. No-ops in
// other builds.

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace paceline::server {

inline void HandOffToGrpc(const void* reactor) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(reactor));
#else
  (void)reactor;
#endif
}

inline void TakeBackFromGrpc(const void* reactor) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(reactor));
#else
  (void)reactor;
#endif
}

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_GRPC_TSAN_H_
