#include "server/grpc/grpc_service.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/grpc/complete_call.h"
#include "server/grpc/generate_call.h"
#include "server/grpc/grpc_auth.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/raw_rpc.h"

namespace paceline::server {

absl::StatusOr<const TenantPolicy*> GrpcService::Authenticate(
    grpc::CallbackServerContext* context) const {
  return frontend_->Authenticate(
      AuthorizationMetadata(context->client_metadata()));
}

template <typename CallT>
void GrpcService::BuildAndStart(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer& request, CallT* call) {
  absl::StatusOr<const TenantPolicy*> tenant = Authenticate(context);
  if (!tenant.ok()) return call->Start(tenant.status());
  const TenantPolicy* t = *tenant;
  // gRPC keeps `request` until the call ends, which is after Start.
  absl::Status posted = frontend_->RunOnIntake(
      *t, Frontend::Work::kGeneration, [this, t, &request, call] {
        // A call cancelled while it queued for the pool costs no parsing
        // or tokenizing.
        if (call->cancelled_early()) {
          return call->Start(absl::CancelledError("the client cancelled"));
        }
        v1::GenerateRequest parsed;
        absl::Status status = ParseRequest(request, &parsed);
        if (!status.ok()) return call->Start(status);
        call->Start(frontend_->Build(*t, parsed));
      });
  if (!posted.ok()) call->Start(posted);
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* GrpcService::Unary(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer& request,
    grpc::ByteBuffer* response, UnaryRpc<Request, Response> rpc,
    bool on_intake) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<const TenantPolicy*> tenant = Authenticate(context);
  if (!tenant.ok()) {
    reactor->Finish(ToGrpcStatus(tenant.status(), context));
    return reactor;
  }
  // gRPC keeps `request` and `response` until the reactor has finished.
  auto work = [this, context, &request, response, rpc, reactor,
               tenant = *tenant] {
    Request parsed;
    absl::Status status = ParseRequest(request, &parsed);
    Response answer;
    if (status.ok()) status = (this->*rpc)(*tenant, parsed, &answer);
    if (status.ok()) status = SerializeMessage(answer, response);
    reactor->Finish(ToGrpcStatus(status, context));
  };
  if (!on_intake) {
    work();
    return reactor;
  }
  absl::Status posted =
      frontend_->RunOnIntake(**tenant, Frontend::Work::kOther, std::move(work));
  if (!posted.ok()) reactor->Finish(ToGrpcStatus(posted, context));
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* GrpcService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  auto* call = new GenerateCall(frontend_, options_.max_delta_bytes, context);
  BuildAndStart(context, *request, call);
  return call;
}

grpc::ServerUnaryReactor* GrpcService::Complete(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto* call = new CompleteCall(frontend_, context, response);
  BuildAndStart(context, *request, call);
  return call;
}

grpc::ServerUnaryReactor* GrpcService::Cancel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &GrpcService::Cancel);
}

grpc::ServerUnaryReactor* GrpcService::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &GrpcService::Tokenize,
               /*on_intake=*/true);
}

grpc::ServerUnaryReactor* GrpcService::Detokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &GrpcService::Detokenize,
               /*on_intake=*/true);
}

grpc::ServerUnaryReactor* GrpcService::ListModels(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &GrpcService::ListModels);
}

grpc::ServerUnaryReactor* GrpcService::GetModelInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &GrpcService::GetModelInfo);
}

grpc::ServerUnaryReactor* GrpcService::GetServerStatus(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &GrpcService::GetServerStatus);
}

absl::Status GrpcService::Cancel(const TenantPolicy& tenant,
                                 const v1::CancelRequest& request,
                                 v1::CancelResponse* /*response*/) {
  return frontend_->Cancel(tenant, request.request_id());
}

absl::Status GrpcService::Tokenize(const TenantPolicy& /*tenant*/,
                                   const v1::TokenizeRequest& request,
                                   v1::TokenizeResponse* response) {
  RETURN_IF_ERROR(frontend_->CheckModel(request.model()));
  // Refused by size before any encoding work: no prompt can be longer
  // than the model's context, so text that must encode to more is of no
  // use to tokenize (and its answer could outgrow the message limit).
  const uint64_t max_bytes =
      static_cast<uint64_t>(frontend_->model_config().context_length) *
      frontend_->tokenizer().max_token_bytes();
  if (request.text().size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "text has ", request.text().size(), " bytes, more than the model's ",
        frontend_->model_config().context_length,
        "-token context can hold (at most ",
        frontend_->tokenizer().max_token_bytes(), " bytes per token)"));
  }
  const std::optional<bool> add_special =
      request.has_add_special_tokens()
          ? std::optional<bool>(request.add_special_tokens())
          : std::nullopt;
  for (int32_t id : frontend_->TokenizeText(request.text(), add_special)) {
    response->add_token_ids(id);
    response->add_pieces(frontend_->tokenizer().TokenText(id));
  }
  // Refused here rather than by gRPC's send, which would fail the call
  // with a message about transport limits.
  const size_t answer = response->ByteSizeLong();
  if (options_.max_message_bytes > 0 &&
      answer > static_cast<size_t>(options_.max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the answer would have ", answer, " bytes, over the server's ",
        options_.max_message_bytes,
        "-byte message limit (grpc.max_message_bytes); tokenize the text in "
        "parts"));
  }
  return absl::OkStatus();
}

absl::Status GrpcService::Detokenize(const TenantPolicy& /*tenant*/,
                                     const v1::DetokenizeRequest& request,
                                     v1::DetokenizeResponse* response) {
  RETURN_IF_ERROR(frontend_->CheckModel(request.model()));
  const bool skip_special =
      !request.has_skip_special_tokens() || request.skip_special_tokens();
  ASSIGN_OR_RETURN(
      std::string text,
      frontend_->DetokenizeIds(
          absl::MakeConstSpan(request.token_ids().data(),
                              static_cast<size_t>(request.token_ids_size())),
          skip_special));
  response->set_text(std::move(text));
  return absl::OkStatus();
}

absl::Status GrpcService::ListModels(const TenantPolicy& /*tenant*/,
                                     const v1::ListModelsRequest& /*request*/,
                                     v1::ListModelsResponse* response) {
  v1::ModelEntry* entry = response->add_models();
  entry->set_id(frontend_->model().id);
  FillModelInfo(frontend_->model_config(), frontend_->tokenizer(),
                entry->mutable_info());
  return absl::OkStatus();
}

absl::Status GrpcService::GetModelInfo(const TenantPolicy& /*tenant*/,
                                       const v1::GetModelInfoRequest& request,
                                       v1::GetModelInfoResponse* response) {
  RETURN_IF_ERROR(frontend_->CheckModel(request.model()));
  v1::ModelEntry* entry = response->mutable_model();
  entry->set_id(frontend_->model().id);
  FillModelInfo(frontend_->model_config(), frontend_->tokenizer(),
                entry->mutable_info());
  FillMemoryPlan(frontend_->model().memory_plan,
                 response->mutable_memory_plan());
  response->set_kv_block_size(frontend_->model().kv_block_size);
  response->set_kv_blocks(frontend_->model().kv_blocks);
  response->set_backend(frontend_->model().backend);
  const chat::ModelChatTemplates* chat = frontend_->model().chat_templates;
  if (chat != nullptr && chat->source != engine::ChatTemplateSource::kNone) {
    v1::ChatSupport* support = response->mutable_chat();
    support->set_template_source(
        std::string(engine::ChatTemplateSourceName(chat->source)));
    support->set_has_tool_use_template(chat->tool_use.has_value());
    if (!chat->output.reasoning_open.empty()) {
      support->set_reasoning_format(chat->output.reasoning_open);
    }
    support->set_tool_call_format(
        std::string(chat::ToolCallFormatName(chat->output.tool_calls)));
  }
  return absl::OkStatus();
}

absl::Status GrpcService::GetServerStatus(
    const TenantPolicy& tenant, const v1::GetServerStatusRequest& /*request*/,
    v1::ServerStatus* response) {
  const scheduler::LoadSnapshot load = frontend_->Load();
  response->set_draining(frontend_->draining());
  for (const scheduler::LoadSnapshot::Tenant& t : load.tenants) {
    if (t.name != tenant.name) continue;
    v1::TenantStatus* out = response->add_tenants();
    out->set_tenant(t.name);
    out->set_running(t.running);
    out->set_waiting(t.waiting);
  }
  v1::KvCacheStatus* kv = response->mutable_kv_cache();
  kv->set_total_blocks(load.kv.total_blocks);
  kv->set_used_blocks(load.kv.used_blocks);
  kv->set_cached_blocks(load.kv.cached_blocks);
  kv->set_free_blocks(load.kv.free_blocks);
  kv->set_block_size(load.kv.block_size);
  response->set_running_sequences(load.running);
  response->set_waiting_requests(load.waiting);
  response->set_paced_streams(frontend_->pacer().buffering_streams());
  response->set_buffered_tokens(frontend_->pacer().buffered_tokens());
  response->set_engine_steps(load.steps);
  return absl::OkStatus();
}

}  // namespace paceline::server
