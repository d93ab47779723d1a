#ifndef PACELINE_SERVER_GRPC_GRPC_SERVICE_H_
#define PACELINE_SERVER_GRPC_GRPC_SERVICE_H_

// paceline.v1.Paceline over gRPC's callback API: the gRPC adapter of the
// frontend core (server/frontend/frontend.h). An RPC thread checks the key
// and hands over; the intake pool parses, builds and submits; delivery (the
// pacer thread and the reactors' completions) writes to clients.
//
// Every RPC is registered raw (raw_rpc.h says why): each checks the key,
// then parses the request's bytes (INVALID_ARGUMENT "the request is not a
// valid paceline.v1.X" when they are not one), then does its work on the
// typed message. A caller without a valid key learns nothing about its
// bytes: UNAUTHENTICATED (UNAVAILABLE while draining) comes first.
//
// Generate: one reactor per stream (generate_call.h); Complete: one
// reactor that answers once (complete_call.h); both are the StreamWriter of
// their request's stream. The other RPCs answer at once (Unary; Tokenize
// and Detokenize from the intake pool).
//
// Thread-safe.

#include <cstdint>

#include "grpcpp/support/byte_buffer.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "server/frontend/frontend.h"

namespace paceline::server {

struct GrpcServiceOptions {
  // The most output bytes one streamed Delta carries (DeliveryOptions::
  // max_delta_bytes): half the gRPC message limit, room for the framing.
  int64_t max_delta_bytes = 0;
  // The largest message gRPC sends (config grpc.max_message_bytes; 0 = no
  // check): Tokenize refuses an answer that would be larger.
  int64_t max_message_bytes = 0;
};

// paceline.v1.Paceline with every method raw (bytes in, bytes out). A
// method missing here would stay gRPC's sync default (UNIMPLEMENTED);
// malformed_request_test walks the service descriptor and would fail.
using RawPacelineService = v1::Paceline::WithRawCallbackMethod_Generate<
    v1::Paceline::WithRawCallbackMethod_Complete<
        v1::Paceline::WithRawCallbackMethod_Cancel<
            v1::Paceline::WithRawCallbackMethod_Tokenize<
                v1::Paceline::WithRawCallbackMethod_Detokenize<
                    v1::Paceline::WithRawCallbackMethod_ListModels<
                        v1::Paceline::WithRawCallbackMethod_GetModelInfo<
                            v1::Paceline::WithRawCallbackMethod_GetServerStatus<
                                v1::Paceline::Service>>>>>>>>;

class GrpcService final : public RawPacelineService {
 public:
  // `frontend` must outlive the service and its calls.
  GrpcService(GrpcServiceOptions options, Frontend* frontend)
      : options_(options), frontend_(frontend) {}

  // --- RPCs: gRPC's entry points, raw ---------------------------------------
  // `request` holds the request's bytes; `response` gets the answer's.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerStatus(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
      grpc::ByteBuffer* response) override;

 private:
  // The caller's tenant, or UNAUTHENTICATED / UNAVAILABLE (draining).
  absl::StatusOr<const TenantPolicy*> Authenticate(
      grpc::CallbackServerContext* context) const;
  // Generate's and Complete's start: checks the key here, then parses and
  // builds the request on the intake pool and starts `call` with the
  // result (CallT::Start).
  template <typename CallT>
  void BuildAndStart(grpc::CallbackServerContext* context,
                     const grpc::ByteBuffer& request, CallT* call);

  // The unary RPCs' work, typed, for an authenticated caller: the answer
  // in *response when OK.
  template <typename Request, typename Response>
  using UnaryRpc = absl::Status (GrpcService::*)(const TenantPolicy&,
                                                 const Request&, Response*);
  absl::Status Cancel(const TenantPolicy& tenant,
                      const v1::CancelRequest& request,
                      v1::CancelResponse* response);
  absl::Status Tokenize(const TenantPolicy& tenant,
                        const v1::TokenizeRequest& request,
                        v1::TokenizeResponse* response);
  absl::Status Detokenize(const TenantPolicy& tenant,
                          const v1::DetokenizeRequest& request,
                          v1::DetokenizeResponse* response);
  absl::Status ListModels(const TenantPolicy& tenant,
                          const v1::ListModelsRequest& request,
                          v1::ListModelsResponse* response);
  absl::Status GetModelInfo(const TenantPolicy& tenant,
                            const v1::GetModelInfoRequest& request,
                            v1::GetModelInfoResponse* response);
  absl::Status GetServerStatus(const TenantPolicy& tenant,
                               const v1::GetServerStatusRequest& request,
                               v1::ServerStatus* response);
  // A unary RPC end to end: the key, the request's bytes, `rpc`, the
  // answer's bytes. Answered before returning, or (on_intake) from the
  // intake pool.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer& request,
                                  grpc::ByteBuffer* response,
                                  UnaryRpc<Request, Response> rpc,
                                  bool on_intake = false);

  const GrpcServiceOptions options_;
  Frontend* const frontend_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_GRPC_SERVICE_H_
