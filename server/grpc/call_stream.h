#ifndef PACELINE_SERVER_GRPC_CALL_STREAM_H_
#define PACELINE_SERVER_GRPC_CALL_STREAM_H_

// The stream of a gRPC call whose request is built on the intake pool,
// after the RPC's handler has returned the reactor: gRPC may then call
// OnCancel before, during or after the start, and OnDone before the start
// has returned. A call (generate_call.h, complete_call.h) holds one
// CallStream and asks it:
//   Start (intake pool):  status = stream.Start(built, writer, observed);
//                         a refusal: the call answers with it;
//                         finally if (stream.Release()) delete the call.
//   OnCancel (gRPC):      stream.OnCancel();
//   OnDone (gRPC):        if (stream.Release()) delete the call.
// So a cancel is acted on exactly once, after the submission, and the call
// is freed by whichever of the start and OnDone ends last; the stream is
// then detached and its id unregistered.
//
// Thread-safe.

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/delivery/stream_buffer.h"
#include "server/frontend/frontend.h"

namespace paceline::server {

class CallStream {
 public:
  // `frontend` must outlive the call.
  explicit CallStream(Frontend* frontend) : frontend_(frontend) {}

  // Whether the client cancelled before the start began: the intake pool
  // then skips the building (Start still ends the call).
  bool CancelledEarly() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  // Opens `built`'s stream to `writer` (Frontend::OpenStream; `observed`
  // as there) and submits it. Returns the refusal the call answers with:
  // `built`'s own, the client's early cancel, or the submission's. A
  // client that cancels while it is submitted has it stopped here.
  absl::Status Start(absl::StatusOr<BuiltRequest> built, StreamWriter* writer,
                     bool observed);
  // gRPC's OnCancel: stops the stream if it has started, else the start
  // refuses.
  void OnCancel();
  // One of the two owners (the start, gRPC's OnDone) is done with the
  // call: true for the last, after the stream is detached and unregistered.
  bool Release();

  // The started stream's buffer (for the writer's completions).
  StreamBuffer& buffer() { return *stream_.buffer; }

 private:
  void Stop();

  Frontend* const frontend_;
  Stream stream_;  // its buffer null until opened, its id 0 until submitted
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> owners_{2};
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_CALL_STREAM_H_
