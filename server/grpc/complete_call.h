#ifndef PACELINE_SERVER_GRPC_COMPLETE_CALL_H_
#define PACELINE_SERVER_GRPC_COMPLETE_CALL_H_

// One Complete call: collects the whole result, then answers once (its
// response serialized: the method is raw, service.h).
//
// The request's sink appends on the engine thread and, at the finish,
// hands the call to the pacer, whose thread fills the response and
// finishes the RPC: the engine thread never writes to a client. Whoever
// ends the call (the finish, an abort, the client's cancel) goes through
// the sink, which hands it over exactly once and calls Finish outside its
// lock (gRPC may run OnDone inline).
//
// Start comes from the intake pool once the request is admitted (or
// refused); call_start.h orders it against OnCancel and OnDone.
//
// Threads: gRPC's (the reactions, aborts), the intake pool's (Start), the
// engine's (the sink), the pacer's (the answer).

#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/token_sink.h"
#include "server/grpc/call_start.h"
#include "server/grpc/grpc_service.h"

namespace paceline::server {

class CompleteCall final : public grpc::ServerUnaryReactor {
 public:
  // `service` must outlive the call, which deletes itself once both Start
  // and OnDone are done; `response` is gRPC's (the answer's bytes), valid
  // until OnDone.
  CompleteCall(PacelineService* service, grpc::CallbackServerContext* context,
               grpc::ByteBuffer* response)
      : service_(service), context_(context), bytes_(response) {}

  // Once: submits the admitted request (unpaced: answered at once), or
  // finishes with the refusal.
  void Start(absl::StatusOr<PacelineService::Admitted> admitted);
  // Whether the client has cancelled already: the intake pool then skips
  // the admission's work (Start still ends the call).
  bool cancelled_early() { return start_.CancelledEarly(); }

  // Reactions.
  void OnCancel() override;
  void OnDone() override;

 private:
  class Sink;

  // Start's work: true once submitted, false after finishing instead.
  bool Submit(absl::StatusOr<PacelineService::Admitted> admitted);
  void CancelSubmitted();
  // Start or OnDone is done with the call; the last deletes it.
  void Release();

  // The response for a request that ended as `info` says, and the status.
  // `called_tools`: a chat answer held a complete tool call.
  grpc::Status Fill(const scheduler::FinishInfo& info, bool called_tools);
  // Ends the RPC with `status`, and the response serialized when OK (or
  // INTERNAL when it cannot be).
  void Answer(grpc::Status status);

  PacelineService* const service_;
  grpc::CallbackServerContext* const context_;
  v1::CompleteResponse response_;  // filled by the sink, then Fill
  grpc::ByteBuffer* const bytes_;  // gRPC's, for response_ serialized
  std::shared_ptr<Sink> sink_;     // set once submitted
  scheduler::RequestId id_ = 0;
  CallStart start_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_COMPLETE_CALL_H_
