#ifndef PACELINE_SERVER_GRPC_CALL_START_H_
#define PACELINE_SERVER_GRPC_CALL_START_H_

// The start of a gRPC call whose admission (parse, tokenize) runs on the
// intake pool, after the RPC's handler has returned the reactor: gRPC may
// then call OnCancel before, during or after the start, and OnDone before
// the start has returned. A call holds one CallStart and asks it:
//   Start:    if (start.CancelledEarly()) refuse; else submit, then
//             if (start.MarkStarted()) cancel what was submitted;
//             finally if (start.Release()) free the call.
//   OnCancel: if (start.OnCancel()) cancel what was submitted.
//   OnDone:   if (start.Release()) free the call.
// So the cancel is acted on exactly once, after the submission, and the
// call is freed by whichever of the start and OnDone ends last.
//
// Thread-safe.

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace paceline::server {

class CallStart {
 public:
  // Whether the client cancelled before the start began.
  bool CancelledEarly() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  // After a successful submission: true when the client cancelled while it
  // ran (the caller cancels now; OnCancel did not).
  bool MarkStarted() {
    absl::MutexLock lock(&mu_);
    started_ = true;
    return cancelled_;
  }
  // From OnCancel: true when the call has started (the caller cancels
  // now); else the cancel is remembered for the start.
  bool OnCancel() {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    return started_;
  }
  // One of the two owners (the start, gRPC's OnDone) is done with the
  // call: true for the last.
  bool Release() {
    return owners_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

 private:
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> owners_{2};
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_CALL_START_H_
