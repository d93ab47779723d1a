#ifndef PACELINE_SERVER_FRONTEND_FRONTEND_H_
#define PACELINE_SERVER_FRONTEND_FRONTEND_H_

// The transport-neutral core every API calls: the gRPC service
// (server/grpc/) and the HTTP APIs (server/openai/) are adapters that turn
// their wire format into these calls and delivery's messages back into it.
// They never call each other.
//
// The words, used one way each:
//   authenticate  an API key (an `authorization` value) -> its tenant
//   intake        the intake pool (intake_pool.h): the work before a
//                 request can queue runs there, charged to the tenant
//   build         parse and check a GenerateRequest, render its chat
//                 template, tokenize (request_builder.h), on the intake pool
//   submit        hand built requests to the serving loop, each delivered
//                 through a stream buffer (server/delivery/); the
//                 scheduler then admits them into the running batch
//   live call     a submitted call not yet ended (a stream, a unary answer,
//                 an HTTP answer of n choices); Cancel finds only the
//                 caller's own, a drain waits for them and cuts what is left
//
// Thread-safe.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "chat/model_templates.h"
#include "chat/prompt.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/clock.h"
#include "scheduler/serving_loop.h"
#include "server/delivery/pacer.h"
#include "server/delivery/stream_buffer.h"
#include "server/frontend/auth.h"
#include "server/frontend/embedding_call.h"
#include "server/frontend/intake_pool.h"
#include "server/frontend/request_builder.h"
#include "server/frontend/server_observers.h"
#include "server/frontend/tenant_policy.h"

namespace paceline::server {

// What is served, for the APIs that describe it.
struct ServedModel {
  std::string id;                    // what `model` fields name
  std::vector<std::string> aliases;  // other names they may use
  std::string backend = "cpu";
  engine::MemoryPlan memory_plan;
  int32_t kv_block_size = 0;
  int64_t kv_blocks = 0;
  // The model's chat templates (null: none; chat requests are refused).
  const chat::ModelChatTemplates* chat_templates = nullptr;
  // Its compiled constraints (null: structured output is refused).
  engine::grammar::GrammarCache* grammars = nullptr;
};

struct FrontendOptions {
  std::vector<TenantPolicy> tenants;  // every configured tenant
  ServedModel model;
  // DeliveryOptions::max_unread_bytes of every stream (config
  // max_unread_bytes; 0 = no limit).
  int64_t max_unread_bytes = 0;
  // The largest answer assembled whole (config max_response_bytes,
  // answer_size.h; 0 = no limit).
  int64_t max_response_bytes = 0;
  // The longest a call may live once submitted (config max_stream_seconds;
  // zero = no limit): AbortExpired cuts older ones.
  absl::Duration max_call_lifetime = absl::ZeroDuration();
  // The intake pool (its observer, when set, must outlive the frontend).
  IntakeOptions intake;
  // Optional (null: not observed); must outlive the frontend and its calls.
  RejectionObserver* rejections = nullptr;
  DeliveryObserver* delivery = nullptr;
};

// A request on its way to a client: its stream buffer (which writes to the
// adapter's StreamWriter) and, once submitted, its id.
struct Stream {
  scheduler::RequestSpec spec;  // until submitted
  std::shared_ptr<StreamBuffer> buffer;
  scheduler::RequestId id = 0;  // once submitted
};

class Frontend {
 public:
  // Everything passed must outlive the frontend.
  Frontend(FrontendOptions options, const TenantAuthenticator* auth,
           const engine::ModelConfig* config,
           const engine::Tokenizer* tokenizer, scheduler::ServingLoop* loop,
           Pacer* pacer, scheduler::Clock* clock);
  ~Frontend();

  // --- Keys ----------------------------------------------------------------
  // The tenant an `authorization` value names (or why the transport has
  // none); UNAVAILABLE while draining, before the key is looked at. A
  // refusal is reported to the rejection observer.
  absl::StatusOr<const TenantPolicy*> Authenticate(
      absl::StatusOr<absl::string_view> authorization) const;

  // --- Intake and building -------------------------------------------------
  enum class Work { kGeneration, kOther };
  // Runs `job` on the intake pool, charged to `tenant`; the refusal
  // (RESOURCE_EXHAUSTED with a retry hint when the tenant has too many
  // waiting, UNAVAILABLE once stopped) when it will not run. A generation's
  // refusal is reported to the rejection observer.
  absl::Status RunOnIntake(const TenantPolicy& tenant, Work work,
                           IntakePool::Job job);
  // Builds `request` for `tenant` (on the intake pool): the model name
  // checked (CheckModel), a seed drawn when it names none (the built
  // spec's sampling.seed is the one used). A refusal is reported.
  absl::StatusOr<BuiltRequest> Build(const TenantPolicy& tenant,
                                     const v1::GenerateRequest& request);

  // --- Submission ----------------------------------------------------------
  // The stream `built` is delivered through, writing to `writer` (which
  // must outlive the buffer until it is detached or has sent Finished):
  // the server's delivery limits applied, `call_unread` (when set) the
  // budget of every stream of one call; a cut the buffer decides on
  // cancels the request, a stop string it finds stops it there.
  // `observed`: its writes are reported to the delivery observer (a
  // stream's; not a unary answer's, which reaches the client whole at the
  // end).
  Stream OpenStream(BuiltRequest built, StreamWriter* writer,
                    std::shared_ptr<UnreadBytes> call_unread = nullptr,
                    bool observed = true);
  // Submits the streams as one live call (`call` its key; null for a call
  // of one stream) and sets their ids. Several streams are the n choices of
  // one prompt (ServingLoop::SubmitGroup: they fork its KV blocks). All or
  // nothing: on a refusal (UNAVAILABLE while draining, the loop's own) none
  // is submitted and every buffer is detached.
  absl::Status Submit(absl::Span<Stream* const> streams,
                      const void* call = nullptr);
  absl::Status Submit(Stream& stream) { return Submit({&stream}); }
  // A call ends its own stream early (its client cancelled or left): the
  // request is cancelled and its delivery cut with `status`.
  void Stop(const Stream& stream, const absl::Status& status);
  // The call of `id` has written its last byte.
  void Unregister(scheduler::RequestId id);
  // A client's cancel by id: only its tenant's live requests
  // (NOT_FOUND "no live request ID of this tenant" otherwise).
  absl::Status Cancel(const TenantPolicy& tenant, scheduler::RequestId id);

  // --- Embeddings ----------------------------------------------------------
  // Embeds `inputs` (token ids each) for `tenant`: one embedding request
  // (scheduler RequestSpec::embed) per input, all one live call, each
  // queued, admitted, counted and fair-shared as the tenant's requests
  // are. Refusals are returned, and then `done` is never called:
  // FAILED_PRECONDITION when the model has no pooling type (a generation
  // model); INVALID_ARGUMENT for no input, an empty one, an id outside the
  // vocabulary, or one longer than the tenant's max_prompt_tokens or the
  // context; UNAVAILABLE while draining; the serving loop's own (a full
  // queue: RESOURCE_EXHAUSTED, none of the inputs left queued). Otherwise
  // `done` runs once, on the intake pool (embedding_call.h).
  absl::Status Embed(const TenantPolicy& tenant,
                     std::vector<std::vector<int32_t>> inputs,
                     EmbeddingsDone done);
  // Forgets every live request of embedding call `call` (its end, on the
  // intake pool; embedding_call.cc).
  void UnregisterEmbeddingCall(const void* call);

  // --- Drain and expiry ----------------------------------------------------
  // From now on every call is refused with UNAVAILABLE ("draining").
  void BeginDrain();
  bool draining() const;
  // Ends every live call with `status` (e.g. ABORTED at the drain
  // deadline) and cancels its request.
  void AbortAll(const absl::Status& status);
  // Calls not yet ended (an answer's choices, each a request, count once).
  int64_t live_calls() const;
  // Ends every live call submitted max_call_lifetime or longer ago (by the
  // clock) with DEADLINE_EXCEEDED, as AbortAll does; returns how many.
  // No-op without a lifetime.
  int64_t AbortExpired();

  // --- Tokens and the model ------------------------------------------------
  // `add_special` unset = the model's BOS rule.
  std::vector<int32_t> TokenizeText(absl::string_view text,
                                    std::optional<bool> add_special) const;
  // InvalidArgument naming token_ids[i] for an id outside the vocabulary.
  absl::StatusOr<std::string> DetokenizeIds(absl::Span<const int32_t> ids,
                                            bool skip_special) const;
  // A model name a request may use: "" or the served model's id; NOT_FOUND
  // "model 'X' is not served here; this server serves 'Y'" otherwise.
  absl::Status CheckModel(absl::string_view model) const;
  // A fresh server-chosen number (seeds, response ids).
  uint64_t NextSeed();
  const ServedModel& model() const { return options_.model; }
  const engine::ModelConfig& model_config() const { return *config_; }
  const engine::Tokenizer& tokenizer() const { return *tokenizer_; }
  int64_t max_response_bytes() const { return options_.max_response_bytes; }
  // The serving loop's load and the pacer's backlog.
  scheduler::LoadSnapshot Load() const { return loop_->Load(); }
  const Pacer& pacer() const { return *pacer_; }

  // A refusal the adapter made itself (a body that does not parse, an
  // unknown route, a transport limit) counted as the core counts its own
  // (RejectionObserver); returns `status`. `tenant` "" when unknown.
  absl::Status Rejected(absl::string_view tenant, absl::Status status) const;

 private:
  // How to cut a live call short; never called with mu_ held.
  using AbortFn = std::function<void(const absl::Status&)>;
  struct Entry {
    std::string tenant;
    AbortFn abort;
    absl::Time submitted;
    const void* call = nullptr;  // null: the request is a call of its own
  };
  // Checks Embed's inputs against the model and the tenant.
  absl::Status CheckEmbeddingInputs(
      const TenantPolicy& tenant,
      const std::vector<std::vector<int32_t>>& inputs) const;
  // Cancels each request and ends its call with `status`, outside mu_.
  void AbortCalls(
      const std::vector<std::pair<scheduler::RequestId, AbortFn>>& calls,
      const absl::Status& status);

  const FrontendOptions options_;
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

#endif  // PACELINE_SERVER_FRONTEND_FRONTEND_H_
