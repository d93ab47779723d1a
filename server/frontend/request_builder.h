#ifndef PACELINE_SERVER_FRONTEND_REQUEST_BUILDER_H_
#define PACELINE_SERVER_FRONTEND_REQUEST_BUILDER_H_

// GenerateRequest (the wire) -> scheduler::RequestSpec + delivery options,
// with every field checked and the tenant's rules applied. Every error is
// InvalidArgument naming the field ("sampling.top_p must be in (0, 1], got
// 0"); a request over a tenant limit (prompt tokens, max_tokens) is
// InvalidArgument too, naming the limit: it can never succeed as sent.
// Checks run in this order, and the first failure is returned: input (text,
// token_ids or chat, then the prompt limit), sampling and logprobs,
// stopping, priority, delivery. Nothing here touches queue state; the
// scheduler's own checks (context length, queue limits) follow at
// submission.
//
// Chat input: the model's template (its tool_use variant when the request
// has tools and the model has one) renders the request
// (chat/request_context.h), and chat::ChatPromptEncoder tokenizes it with
// control tokens only where the template put them. A model without a template is FailedPrecondition
// ("the model has no chat template; set model.chat_template_file or send
// text"); a template that fails (its raise_exception, a limit) is
// InvalidArgument "chat: " + the template's message.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chat/model_templates.h"
#include "chat/prompt.h"
#include "engine/sampling/grammar/grammar_cache.h"
#include "engine/tokenizer/tokenizer.h"
#include "paceline/v1/paceline.pb.h"
#include "scheduler/request.h"
#include "server/delivery/stream_buffer.h"
#include "server/frontend/tenant_policy.h"

namespace paceline::server {

struct BuiltRequest {
  scheduler::RequestSpec spec;  // no sink yet
  DeliveryOptions delivery;
};

struct ModelLimits {
  int32_t vocab_size = 0;
  int64_t context_length = 0;
};

// What chat input needs. Null templates or encoder: chat is refused.
struct ChatInput {
  const chat::ModelChatTemplates* templates = nullptr;
  const chat::ChatPromptEncoder* encoder = nullptr;  // over the tokenizer
  absl::Time now = absl::UnixEpoch();  // what strftime_now formats
};

// `seed` is used when the request names none (the server's random pick).
// `grammars` compiles sampling.constraint (structured output) for the
// request's tenant; null: a request with a constraint is
// FailedPrecondition. A constraint that does not compile (a bad schema, a
// keyword not supported, past the compile limits) is InvalidArgument
// naming sampling.constraint.<kind> with the compiler's message. Tool calls
// (sampling.constraint.tool_calls) take their syntax from the chat
// template when they name none (tool_call_constraint.h).
absl::StatusOr<BuiltRequest> BuildRequest(
    const v1::GenerateRequest& request, const TenantPolicy& tenant,
    const engine::Tokenizer& tokenizer, const ModelLimits& model, uint64_t seed,
    const ChatInput& chat = {},
    engine::grammar::GrammarCache* grammars = nullptr);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_REQUEST_BUILDER_H_
