#include "server/grpc/grpc_service.h"

#include <random>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/echo.h"
#include "common/status_macros.h"
#include "engine/tokenizer/detokenizer.h"
#include "server/grpc/complete_call.h"
#include "server/grpc/generate_call.h"
#include "server/grpc/grpc_auth.h"
#include "server/grpc/proto_convert.h"
#include "server/grpc/raw_rpc.h"

namespace paceline::server {
namespace {

absl::Status Draining() {
  return absl::UnavailableError("the server is draining; try another replica");
}

// SplitMix64: the server's seeds for requests that name none.
uint64_t NextSeed(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

PacelineService::PacelineService(ServiceOptions options,
                                 const TenantAuthenticator* auth,
                                 const engine::ModelConfig* config,
                                 const engine::Tokenizer* tokenizer,
                                 scheduler::ServingLoop* loop, Pacer* pacer,
                                 scheduler::Clock* clock)
    : options_(std::move(options)),
      auth_(auth),
      config_(config),
      tokenizer_(tokenizer),
      chat_encoder_(tokenizer),
      loop_(loop),
      pacer_(pacer),
      clock_(clock),
      seed_state_(std::random_device{}()),
      intake_(options_.intake) {
  for (const TenantPolicy& t : options_.tenants) tenants_[t.name] = &t;
}

PacelineService::~PacelineService() = default;

void PacelineService::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

bool PacelineService::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

void PacelineService::AbortAll(const absl::Status& status) {
  std::vector<std::pair<scheduler::RequestId, AbortFn>> calls;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : live_) calls.emplace_back(id, entry.abort);
  }
  AbortCalls(calls, status);
}

int64_t PacelineService::AbortExpired() {
  const absl::Duration lifetime = options_.max_call_lifetime;
  if (lifetime <= absl::ZeroDuration()) return 0;
  const absl::Time cutoff = clock_->Now() - lifetime;
  std::vector<std::pair<scheduler::RequestId, AbortFn>> calls;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : live_) {
      if (entry.submitted <= cutoff) calls.emplace_back(id, entry.abort);
    }
  }
  AbortCalls(calls, absl::DeadlineExceededError(absl::StrCat(
                        "the call reached the server's max_stream_seconds (",
                        absl::FormatDuration(lifetime), ")")));
  return static_cast<int64_t>(calls.size());
}

void PacelineService::AbortCalls(
    const std::vector<std::pair<scheduler::RequestId, AbortFn>>& calls,
    const absl::Status& status) {
  // The call is cut first, so that the engine's answer to the cancel
  // (a plain cancelled finish) cannot end it before the status does.
  for (const auto& [id, abort] : calls) {
    abort(status);
    loop_->Cancel(id);
  }
}

int64_t PacelineService::live_calls() const {
  absl::MutexLock lock(&mu_);
  int64_t alone = 0;
  absl::flat_hash_set<const void*> calls;
  for (const auto& [id, entry] : live_) {
    if (entry.call == nullptr) {
      ++alone;
    } else {
      calls.insert(entry.call);
    }
  }
  return alone + static_cast<int64_t>(calls.size());
}

absl::StatusOr<const TenantPolicy*> PacelineService::TenantNamed(
    absl::StatusOr<std::string> tenant) const {
  if (!tenant.ok()) return tenant.status();
  auto it = tenants_.find(*tenant);
  if (it == tenants_.end()) {
    return absl::UnauthenticatedError("the API key names no configured tenant");
  }
  return it->second;
}

absl::StatusOr<const TenantPolicy*> PacelineService::Authenticate(
    grpc::CallbackServerContext* context) const {
  if (draining()) return Draining();
  return TenantNamed(AuthenticateMetadata(*auth_, context->client_metadata()));
}

absl::StatusOr<const TenantPolicy*> PacelineService::AuthenticateHeader(
    absl::string_view authorization) const {
  absl::StatusOr<const TenantPolicy*> tenant =
      draining() ? absl::StatusOr<const TenantPolicy*>(Draining())
                 : TenantNamed(auth_->Authenticate(authorization));
  if (!tenant.ok()) return Rejected("", tenant.status());
  return tenant;
}

absl::Status PacelineService::CheckModel(absl::string_view model) const {
  if (model.empty() || model == options_.model_id) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("model '", Echo(model),
                                          "' is not served here; this server "
                                          "serves '",
                                          options_.model_id, "'"));
}

absl::Status PacelineService::Rejected(absl::string_view tenant,
                                       absl::Status status) const {
  if (options_.rejections != nullptr) {
    options_.rejections->OnRejected(tenant, status.code());
  }
  return status;
}

template <typename CallT>
void PacelineService::AdmitAndStart(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer& request,
                                    CallT* call) {
  absl::StatusOr<const TenantPolicy*> tenant = Authenticate(context);
  if (!tenant.ok()) return call->Start(Rejected("", tenant.status()));
  const TenantPolicy* t = *tenant;
  // gRPC keeps `request` until the call ends, which is after Start.
  absl::Status posted =
      RunIntake(*t, /*generation=*/true, [this, t, &request, call] {
        // A call cancelled while it queued for the pool costs no parsing
        // or tokenizing.
        if (call->cancelled_early()) {
          return call->Start(absl::CancelledError("the client cancelled"));
        }
        call->Start(Admit(t, request));
      });
  if (!posted.ok()) call->Start(posted);
}

absl::StatusOr<PacelineService::Admitted> PacelineService::Admit(
    const TenantPolicy* tenant, const grpc::ByteBuffer& request) {
  v1::GenerateRequest parsed;
  absl::Status status = ParseRequest(request, &parsed);
  if (!status.ok()) return Rejected(tenant->name, std::move(status));
  return AdmitAs(tenant, parsed);
}

absl::Status PacelineService::RunIntake(const TenantPolicy& tenant,
                                        bool generation, IntakePool::Job job) {
  absl::Status posted =
      intake_.Post(tenant.name, tenant.weight, std::move(job));
  if (!posted.ok() && generation) return Rejected(tenant.name, posted);
  return posted;
}

absl::StatusOr<PacelineService::Admitted> PacelineService::AdmitAs(
    const TenantPolicy* tenant, const v1::GenerateRequest& request) {
  absl::StatusOr<Admitted> out = Check(tenant, request);
  if (!out.ok()) return Rejected(tenant->name, out.status());
  return out;
}

uint64_t PacelineService::NextSeed() {
  absl::MutexLock lock(&mu_);
  return paceline::server::NextSeed(&seed_state_);
}

std::vector<int32_t> PacelineService::TokenizeText(
    absl::string_view text, std::optional<bool> add_special) const {
  engine::EncodeOptions encode;
  encode.add_bos = add_special.has_value()
                       ? *add_special && tokenizer_->add_bos()
                       : tokenizer_->add_bos();
  return tokenizer_->Encode(text, encode);
}

absl::StatusOr<std::string> PacelineService::DetokenizeIds(
    absl::Span<const int32_t> ids, bool skip_special) const {
  engine::IncrementalDetokenizer detokenizer(tokenizer_);
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_ids[", i, "] must be in [0, ",
                       tokenizer_->vocab_size(), "), got ", id));
    }
    if (!skip_special && tokenizer_->IsControl(id)) {
      text += tokenizer_->TokenText(id);
      continue;
    }
    text += detokenizer.Push(id);
  }
  text += detokenizer.Flush();
  return text;
}

absl::StatusOr<PacelineService::Admitted> PacelineService::Check(
    const TenantPolicy* tenant, const v1::GenerateRequest& request) {
  Admitted out;
  out.tenant = tenant;
  RETURN_IF_ERROR(CheckModel(request.model()));
  const uint64_t seed = NextSeed();
  ModelLimits limits;
  limits.vocab_size = static_cast<int32_t>(config_->n_vocab);
  limits.context_length = config_->context_length;
  ChatInput chat;
  chat.templates = options_.chat_templates;
  chat.encoder = &chat_encoder_;
  chat.now = clock_->Now();
  ASSIGN_OR_RETURN(out.built, BuildRequest(request, *out.tenant, *tokenizer_,
                                           limits, seed, chat));
  return out;
}

absl::StatusOr<scheduler::RequestId> PacelineService::Submit(
    scheduler::RequestSpec spec, AbortFn abort) {
  const std::string tenant = spec.tenant;
  // Registered under mu_ together with the submission, so AbortAll never
  // misses a request the loop has.
  absl::MutexLock lock(&mu_);
  // (The serving loop reports its own refusals to the scheduler metrics.)
  if (draining_) return Rejected(tenant, Draining());
  ASSIGN_OR_RETURN(scheduler::RequestId id, loop_->Submit(std::move(spec)));
  live_[id] = Entry{tenant, std::move(abort), clock_->Now()};
  return id;
}

absl::StatusOr<std::vector<scheduler::RequestId>> PacelineService::SubmitGroup(
    std::vector<scheduler::RequestSpec> specs, std::vector<AbortFn> aborts,
    const void* call) {
  if (specs.empty() || specs.size() != aborts.size()) {
    return absl::InternalError("SubmitGroup: one abort per spec");
  }
  const std::string tenant = specs.front().tenant;
  absl::MutexLock lock(&mu_);
  if (draining_) return Rejected(tenant, Draining());
  ASSIGN_OR_RETURN(std::vector<scheduler::RequestId> ids,
                   loop_->SubmitGroup(std::move(specs)));
  for (size_t i = 0; i < ids.size(); ++i) {
    live_[ids[i]] = Entry{tenant, std::move(aborts[i]), clock_->Now(), call};
  }
  return ids;
}

void PacelineService::Unregister(scheduler::RequestId id) {
  absl::MutexLock lock(&mu_);
  live_.erase(id);
}

template <typename Request, typename Response>
grpc::ServerUnaryReactor* PacelineService::Unary(
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
      RunIntake(**tenant, /*generation=*/false, std::move(work));
  if (!posted.ok()) reactor->Finish(ToGrpcStatus(posted, context));
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* PacelineService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  auto* call = new GenerateCall(this, context);
  AdmitAndStart(context, *request, call);
  return call;
}

grpc::ServerUnaryReactor* PacelineService::Complete(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto* call = new CompleteCall(this, context, response);
  AdmitAndStart(context, *request, call);
  return call;
}

grpc::ServerUnaryReactor* PacelineService::Cancel(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &PacelineService::Cancel);
}

grpc::ServerUnaryReactor* PacelineService::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &PacelineService::Tokenize,
               /*on_intake=*/true);
}

grpc::ServerUnaryReactor* PacelineService::Detokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &PacelineService::Detokenize,
               /*on_intake=*/true);
}

grpc::ServerUnaryReactor* PacelineService::ListModels(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &PacelineService::ListModels);
}

grpc::ServerUnaryReactor* PacelineService::GetModelInfo(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &PacelineService::GetModelInfo);
}

grpc::ServerUnaryReactor* PacelineService::GetServerStatus(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return Unary(context, *request, response, &PacelineService::GetServerStatus);
}

absl::Status PacelineService::Cancel(const TenantPolicy& tenant,
                                     const v1::CancelRequest& request,
                                     v1::CancelResponse* /*response*/) {
  const scheduler::RequestId id = request.request_id();
  AbortFn abort;
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    // Another tenant's request looks exactly like an unknown one.
    if (it != live_.end() && it->second.tenant == tenant.name) {
      abort = it->second.abort;
    }
  }
  if (!abort) {
    return absl::NotFoundError(
        absl::StrCat("no live request ", id, " of this tenant"));
  }
  loop_->Cancel(id);
  abort(absl::CancelledError(absl::StrCat("request ", id, " was cancelled")));
  return absl::OkStatus();
}

absl::Status PacelineService::Tokenize(const TenantPolicy& /*tenant*/,
                                       const v1::TokenizeRequest& request,
                                       v1::TokenizeResponse* response) {
  RETURN_IF_ERROR(CheckModel(request.model()));
  // Refused by size before any encoding work: no prompt can be longer
  // than the model's context, so text that must encode to more is of no
  // use to tokenize (and its answer could outgrow the message limit).
  const uint64_t max_bytes = static_cast<uint64_t>(config_->context_length) *
                             tokenizer_->max_token_bytes();
  if (request.text().size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "text has ", request.text().size(), " bytes, more than the model's ",
        config_->context_length, "-token context can hold (at most ",
        tokenizer_->max_token_bytes(), " bytes per token)"));
  }
  const std::optional<bool> add_special =
      request.has_add_special_tokens()
          ? std::optional<bool>(request.add_special_tokens())
          : std::nullopt;
  for (int32_t id : TokenizeText(request.text(), add_special)) {
    response->add_token_ids(id);
    response->add_pieces(tokenizer_->TokenText(id));
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

absl::Status PacelineService::Detokenize(const TenantPolicy& /*tenant*/,
                                         const v1::DetokenizeRequest& request,
                                         v1::DetokenizeResponse* response) {
  RETURN_IF_ERROR(CheckModel(request.model()));
  const bool skip_special =
      !request.has_skip_special_tokens() || request.skip_special_tokens();
  ASSIGN_OR_RETURN(
      std::string text,
      DetokenizeIds(
          absl::MakeConstSpan(request.token_ids().data(),
                              static_cast<size_t>(request.token_ids_size())),
          skip_special));
  response->set_text(std::move(text));
  return absl::OkStatus();
}

absl::Status PacelineService::ListModels(
    const TenantPolicy& /*tenant*/, const v1::ListModelsRequest& /*request*/,
    v1::ListModelsResponse* response) {
  v1::ModelEntry* entry = response->add_models();
  entry->set_id(options_.model_id);
  FillModelInfo(*config_, *tokenizer_, entry->mutable_info());
  return absl::OkStatus();
}

absl::Status PacelineService::GetModelInfo(
    const TenantPolicy& /*tenant*/, const v1::GetModelInfoRequest& request,
    v1::GetModelInfoResponse* response) {
  RETURN_IF_ERROR(CheckModel(request.model()));
  v1::ModelEntry* entry = response->mutable_model();
  entry->set_id(options_.model_id);
  FillModelInfo(*config_, *tokenizer_, entry->mutable_info());
  FillMemoryPlan(options_.memory_plan, response->mutable_memory_plan());
  response->set_kv_block_size(options_.kv_block_size);
  response->set_kv_blocks(options_.kv_blocks);
  response->set_backend(options_.backend);
  const chat::ModelChatTemplates* chat = options_.chat_templates;
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

absl::Status PacelineService::GetServerStatus(
    const TenantPolicy& tenant, const v1::GetServerStatusRequest& /*request*/,
    v1::ServerStatus* response) {
  const scheduler::LoadSnapshot load = loop_->Load();
  response->set_draining(draining());
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
  response->set_paced_streams(pacer_->buffering_streams());
  response->set_buffered_tokens(pacer_->buffered_tokens());
  response->set_engine_steps(load.steps);
  return absl::OkStatus();
}

}  // namespace paceline::server
