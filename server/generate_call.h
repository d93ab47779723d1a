#ifndef PACELINE_SERVER_GENERATE_CALL_H_
#define PACELINE_SERVER_GENERATE_CALL_H_

// One Generate stream: the gRPC write reactor, and the StreamWriter of the
// stream's StreamBuffer. The buffer decides what to write and when; this
// turns each Outgoing into a GenerateResponse, serialized (the method is
// raw: service.h), keeps one write in flight (gRPC's rule), and ends the
// RPC with the Finished message.
//
// Reactions: OnWriteDone hands the completion to the buffer (which may
// start the next write from there); OnCancel cancels the request and cuts
// delivery; OnDone detaches the buffer and deletes the call.
//
// Threads: gRPC's (the reactions), and the pacer's (Send).

#include <memory>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/token_sink.h"
#include "server/delivery/stream_buffer.h"
#include "server/service.h"

namespace paceline::server {

class GenerateCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                           public StreamWriter {
 public:
  // Submits the admitted request, or finishes at once with the refusal.
  // Deletes itself in OnDone. `service` must outlive the call.
  GenerateCall(PacelineService* service, grpc::CallbackServerContext* context,
               absl::StatusOr<PacelineService::Admitted> admitted);

  // Reactions.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // StreamWriter: one GenerateResponse, or the end of the RPC.
  void Send(const Outgoing& out) override;
  // The end of the RPC for a Finished message.
  void SendFinished(const Outgoing& out);
  // Serializes response_ into bytes_ for the next write; false when it
  // cannot be, after ending the RPC with INTERNAL instead.
  bool Serialize();

  PacelineService* const service_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<StreamBuffer> buffer_;  // null when refused
  scheduler::RequestId id_ = 0;           // 0 until submitted
  v1::GenerateResponse response_;         // the next message, as built
  grpc::ByteBuffer bytes_;                // the write in flight, serialized
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GENERATE_CALL_H_
