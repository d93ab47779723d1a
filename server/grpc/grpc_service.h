#ifndef PACELINE_SERVER_GRPC_GRPC_SERVICE_H_
#define PACELINE_SERVER_GRPC_GRPC_SERVICE_H_

// paceline.v1.Paceline over gRPC's callback API. RPC threads check the
// key; the intake pool validates, tokenizes and submits to the serving
// loop; the engine thread generates and hands output over; delivery (the
// pacer thread and the reactors' completions) writes to clients.
//
// Work before a request can queue (parsing it, rendering its chat
// template, tokenizing it; Tokenize and Detokenize whole) runs on the
// intake pool (intake_pool.h), charged to the caller's tenant; an RPC
// thread only checks the key and hands over.
//
// Every RPC is registered raw (raw_rpc.h says why): each checks the key,
// then parses the request's bytes (INVALID_ARGUMENT "the request is not a
// valid paceline.v1.X" when they are not one), then does its work on the
// typed message. A caller without a valid key learns nothing about its
// bytes: UNAUTHENTICATED (UNAVAILABLE while draining) comes first.
//
// Generate: one reactor per stream (generate_call.h) that is its
// StreamBuffer's writer; Complete: one reactor that answers once
// (complete_call.h). Both register the request id with its tenant, so
// Cancel finds only the caller's own requests and a drain can cut what is
// left. The other RPCs answer at once (Unary; Tokenize and Detokenize from
// the intake pool).
//
// Thread-safe.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "chat/prompt.h"
#include "chat/model_templates.h"
#include "engine/tokenizer/tokenizer.h"
#include "grpcpp/support/byte_buffer.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "scheduler/clock.h"
#include "scheduler/serving_loop.h"
#include "server/frontend/auth.h"
#include "server/delivery/pacer.h"
#include "server/frontend/intake_pool.h"
#include "server/frontend/request_builder.h"
#include "server/frontend/server_observers.h"
#include "server/frontend/tenant_policy.h"

namespace paceline::server {

struct ServiceOptions {
  std::vector<TenantPolicy> tenants;  // every configured tenant
  std::string model_id;               // what `model` fields name
  std::string backend = "cpu";
  engine::MemoryPlan memory_plan;
  int32_t kv_block_size = 0;
  int64_t kv_blocks = 0;
  // The most output bytes one streamed Delta carries (DeliveryOptions::
  // max_delta_bytes): half the gRPC message limit, room for the framing.
  int64_t max_delta_bytes = 0;
  // DeliveryOptions::max_unread_bytes of every stream (config
  // max_unread_bytes; 0 = no limit).
  int64_t max_unread_bytes = 0;
  // The largest answer assembled whole (config max_response_bytes,
  // answer_size.h; 0 = no limit).
  int64_t max_response_bytes = 0;
  // The longest a call may live once submitted (config max_stream_seconds;
  // zero = no limit): AbortExpired cuts older ones.
  absl::Duration max_call_lifetime = absl::ZeroDuration();
  // The intake pool (its observer, when set, must outlive the service).
  IntakeOptions intake;
  // The largest message gRPC sends (config grpc.max_message_bytes; 0 = no
  // check): Tokenize refuses an answer that would be larger.
  int64_t max_message_bytes = 0;
  // The model's chat templates (null: none; chat requests are refused).
  // Must outlive the service.
  const chat::ModelChatTemplates* chat_templates = nullptr;
  // Optional (null: not observed); must outlive the service and its calls.
  RejectionObserver* rejections = nullptr;
  DeliveryObserver* delivery = nullptr;
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

class PacelineService final : public RawPacelineService {
 public:
  // Everything passed must outlive the service.
  PacelineService(ServiceOptions options, const TenantAuthenticator* auth,
                  const engine::ModelConfig* config,
                  const engine::Tokenizer* tokenizer,
                  scheduler::ServingLoop* loop, Pacer* pacer,
                  scheduler::Clock* clock);
  ~PacelineService() override;

  // From now on every RPC fails with UNAVAILABLE ("draining").
  void BeginDrain();
  bool draining() const;
  // Ends every live call with `status` (e.g. ABORTED at the drain
  // deadline) and cancels its request.
  void AbortAll(const absl::Status& status);
  // Calls not yet ended: Generate streams, Complete calls, HTTP answers
  // (an answer's choices, each a request, count once).
  int64_t live_calls() const;
  // Ends every live call submitted max_call_lifetime or longer ago (by the
  // service's clock) with DEADLINE_EXCEEDED and cancels its request, as
  // AbortAll does; returns how many. No-op without a lifetime.
  int64_t AbortExpired();

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

  // --- For the calls (generate_call.h, complete_call.h) ------------------
  // How to cut a live call short: ends it with the status (no-op once it
  // has ended). Holds what it needs by shared_ptr, so it may outlive the
  // call; never called with the service's lock held.
  using AbortFn = std::function<void(const absl::Status&)>;
  struct Admitted {
    const TenantPolicy* tenant = nullptr;
    BuiltRequest built;
  };
  // Checks a GenerateRequest of a tenant authenticated by other means (the
  // HTTP API); a refusal is reported to the rejection observer.
  absl::StatusOr<Admitted> AdmitAs(const TenantPolicy* tenant,
                                   const v1::GenerateRequest& request);
  // The tenant an `authorization` header value names; UNAUTHENTICATED, or
  // UNAVAILABLE while draining. A refusal is reported to the rejection
  // observer.
  absl::StatusOr<const TenantPolicy*> AuthenticateHeader(
      absl::string_view authorization) const;
  // Submits to the serving loop and registers the call under the id.
  absl::StatusOr<scheduler::RequestId> Submit(scheduler::RequestSpec spec,
                                              AbortFn abort);
  // Submit for the n choices of one prompt (ServingLoop::SubmitGroup: they
  // fork its KV blocks); one abort per spec. All or nothing. `call`
  // identifies the call they belong to (live_calls counts it once, however
  // many groups it submits).
  absl::StatusOr<std::vector<scheduler::RequestId>> SubmitGroup(
      std::vector<scheduler::RequestSpec> specs, std::vector<AbortFn> aborts,
      const void* call);
  void Unregister(scheduler::RequestId id);
  // Runs `job` on the intake pool, charged to `tenant`; the refusal
  // (RESOURCE_EXHAUSTED with a retry hint when the tenant has too many
  // waiting, UNAVAILABLE once stopped) when it will not run. The refusal
  // of a generation request is reported to the rejection observer.
  absl::Status RunIntake(const TenantPolicy& tenant, bool generation,
                         IntakePool::Job job);
  // A fresh server-chosen seed (for a request that names none).
  uint64_t NextSeed();
  // Tokenize's and Detokenize's work, for every transport: `add_special`
  // unset = the model's BOS rule. Detokenize: InvalidArgument naming
  // token_ids[i] for an id outside the vocabulary.
  std::vector<int32_t> TokenizeText(absl::string_view text,
                                    std::optional<bool> add_special) const;
  absl::StatusOr<std::string> DetokenizeIds(absl::Span<const int32_t> ids,
                                            bool skip_special) const;
  // A model name a request may use: "" or the served model's id; NotFound
  // otherwise.
  absl::Status CheckModel(absl::string_view model) const;
  const std::string& model_id() const { return options_.model_id; }
  const engine::ModelConfig& model_config() const { return *config_; }
  const engine::Tokenizer& tokenizer() const { return *tokenizer_; }
  scheduler::ServingLoop& loop() { return *loop_; }
  Pacer* pacer() { return pacer_; }
  DeliveryObserver* delivery_observer() const { return options_.delivery; }
  int64_t max_delta_bytes() const { return options_.max_delta_bytes; }
  int64_t max_unread_bytes() const { return options_.max_unread_bytes; }
  int64_t max_response_bytes() const { return options_.max_response_bytes; }
  scheduler::Clock* clock() { return clock_; }

 private:
  struct Entry {
    std::string tenant;
    AbortFn abort;
    absl::Time submitted;
    const void* call = nullptr;  // null: the request is a call of its own
  };
  // Cancels each request and ends its call with `status`, outside mu_.
  void AbortCalls(
      const std::vector<std::pair<scheduler::RequestId, AbortFn>>& calls,
      const absl::Status& status);

  // The caller's tenant, or UNAUTHENTICATED / UNAVAILABLE (draining).
  absl::StatusOr<const TenantPolicy*> Authenticate(
      grpc::CallbackServerContext* context) const;
  // Generate's and Complete's start: checks the key here, then parses,
  // checks and builds the request on the intake pool and starts `call`
  // with the result (CallT::Start). A refusal is reported to the
  // rejection observer.
  template <typename CallT>
  void AdmitAndStart(grpc::CallbackServerContext* context,
                     const grpc::ByteBuffer& request, CallT* call);
  // The pool's part of it: parses and checks the request's bytes.
  absl::StatusOr<Admitted> Admit(const TenantPolicy* tenant,
                                 const grpc::ByteBuffer& request);

  // The unary RPCs' work, typed, for an authenticated caller: the answer
  // in *response when OK.
  template <typename Request, typename Response>
  using UnaryRpc = absl::Status (PacelineService::*)(const TenantPolicy&,
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
  // The configured tenant `tenant` names (an authenticator's answer).
  absl::StatusOr<const TenantPolicy*> TenantNamed(
      absl::StatusOr<std::string> tenant) const;
  // Admit for an authenticated caller.
  absl::StatusOr<Admitted> Check(const TenantPolicy* tenant,
                                 const v1::GenerateRequest& request);
  // Tells the rejection observer, if any; returns `status`.
  absl::Status Rejected(absl::string_view tenant, absl::Status status) const;

  const ServiceOptions options_;
  const TenantAuthenticator* const auth_;
  const engine::ModelConfig* const config_;
  const engine::Tokenizer* const tokenizer_;
  const chat::ChatPromptEncoder chat_encoder_;
  scheduler::ServingLoop* const loop_;
  Pacer* const pacer_;
  scheduler::Clock* const clock_;
  absl::flat_hash_map<std::string, const TenantPolicy*> tenants_;

  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<scheduler::RequestId, Entry> live_ ABSL_GUARDED_BY(mu_);
  uint64_t seed_state_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed first, running what is queued while the rest is alive.
  IntakePool intake_;
};

}  // namespace paceline::server

#endif  // PACELINE_SERVER_GRPC_GRPC_SERVICE_H_
