#ifndef PACELINE_SERVER_GRPC_GENERATE_CALL_H_
#define PACELINE_SERVER_GRPC_GENERATE_CALL_H_

// One Generate stream: the gRPC write reactor, and the StreamWriter of the
// stream's StreamBuffer. The buffer decides what to write and when; this
// turns each Outgoing into a GenerateResponse, serialized (the method is
// raw: grpc_service.h), keeps one write in flight (gRPC's rule), and ends the
// RPC with the Finished message.
//
// Start comes from the intake pool once the request is built (or
// refused); call_stream.h orders it against the reactions. OnWriteDone
// hands the completion to the buffer (which may start the next write from
// there); OnCancel cancels the request and cuts delivery; the last of
// OnDone and Start detaches the buffer and deletes the call.
//
// Threads: gRPC's (the reactions), the intake pool's (Start), and the
// pacer's (Send).

#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/token_sink.h"
#include "server/delivery/stream_buffer.h"
#include "server/frontend/frontend.h"
#include "server/grpc/call_stream.h"

namespace paceline::server {

class GenerateCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                           public StreamWriter {
 public:
  // `frontend` must outlive the call, which deletes itself (see above).
  // Each Delta carries at most `max_delta_bytes` of output.
  GenerateCall(Frontend* frontend, int64_t max_delta_bytes,
               grpc::CallbackServerContext* context)
      : frontend_(frontend),
        max_delta_bytes_(max_delta_bytes),
        context_(context),
        stream_(frontend) {}

  // Once: submits the built request, or finishes with the refusal.
  void Start(absl::StatusOr<BuiltRequest> built);
  // Whether the client has cancelled already: the intake pool then skips
  // the building (Start still ends the call).
  bool cancelled_early() { return stream_.CancelledEarly(); }

  // Reactions.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // Start or OnDone is done with the call; the last deletes it.
  void Release();
  // StreamWriter: one GenerateResponse, or the end of the RPC.
  void Send(const Outgoing& out) override;
  // The end of the RPC for a Finished message.
  void SendFinished(const Outgoing& out);
  // Finish, after HandOffToGrpc (grpc_tsan.h).
  void FinishWith(const grpc::Status& status);
  // Serializes response_ into bytes_ for the next write; false when it
  // cannot be, after ending the RPC with INTERNAL instead.
  bool Serialize();

  Frontend* const frontend_;
  const int64_t max_delta_bytes_;
  grpc::CallbackServerContext* const context_;
  CallStream stream_;
  v1::GenerateResponse response_;  // the next message, as built
  grpc::ByteBuffer bytes_;         // the write in flight, serialized
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_GENERATE_CALL_H_
