#ifndef PACELINE_SERVER_GRPC_COMPLETE_CALL_H_
#define PACELINE_SERVER_GRPC_COMPLETE_CALL_H_

// One Complete call: the StreamWriter of its request's stream, unpaced. It
// collects every message into the response and, at the Finished one,
// answers once (the response serialized: the method is raw,
// grpc_service.h). Like a Generate stream, the engine thread never calls
// it: delivery's messages come from the pacer thread (or from within
// OnWriteDone / Abort), and every write completes at once.
//
// Start comes from the intake pool once the request is built (or
// refused); call_stream.h orders it against OnCancel and OnDone.
//
// Threads: gRPC's (the reactions), the intake pool's (Start), the pacer's
// (Send).

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "paceline/v1/paceline.pb.h"
#include "server/delivery/stream_buffer.h"
#include "server/frontend/frontend.h"
#include "server/grpc/call_stream.h"

namespace paceline::server {

class CompleteCall final : public grpc::ServerUnaryReactor,
                           public StreamWriter {
 public:
  // `frontend` must outlive the call, which deletes itself once both Start
  // and OnDone are done; `response` is gRPC's (the answer's bytes), valid
  // until OnDone.
  CompleteCall(Frontend* frontend, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response)
      : frontend_(frontend),
        context_(context),
        bytes_(response),
        stream_(frontend) {}

  // Once: submits the built request (unpaced: answered at once), or
  // finishes with the refusal.
  void Start(absl::StatusOr<BuiltRequest> built);
  // Whether the client has cancelled already: the intake pool then skips
  // the building (Start still ends the call).
  bool cancelled_early() { return stream_.CancelledEarly(); }

  // Reactions.
  void OnCancel() override;
  void OnDone() override;

 private:
  // Checks the answer's size and sets the stream unpaced; the refusal in
  // `built`.
  void Prepare(absl::StatusOr<BuiltRequest>& built);
  // Start or OnDone is done with the call; the last deletes it.
  void Release();

  // StreamWriter: Accepted and Deltas go into the response (the write is
  // done at once); Finished answers.
  void Send(const Outgoing& out) override;
  void Add(const Outgoing& delta);
  // The status of a call that ended as `finished` says, the response
  // completed when it is OK.
  grpc::Status Fill(const Outgoing& finished);
  // Ends the RPC with `status`, and the response serialized when OK (or
  // INTERNAL when it cannot be).
  void Answer(grpc::Status status);

  Frontend* const frontend_;
  grpc::CallbackServerContext* const context_;
  v1::CompleteResponse response_;  // filled by Send
  grpc::ByteBuffer* const bytes_;  // gRPC's, for response_ serialized
  CallStream stream_;
  bool chat_ = false;  // a chat request: its output split into chat_output_
  Outgoing chat_output_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_COMPLETE_CALL_H_
