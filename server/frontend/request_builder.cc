#include "server/frontend/request_builder.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "chat/request_context.h"
#include "common/status_macros.h"
#include "engine/sampling/sampler.h"
#include "scheduler/context_limit.h"
#include "server/frontend/tool_call_constraint.h"

namespace paceline::server {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// " (tenant <limit>)" when the tenant sets the limit, else " (model
// context)".
std::string LimitSource(bool from_tenant, absl::string_view tenant_field) {
  return from_tenant ? absl::StrCat(" (tenant ", tenant_field, ")")
                     : std::string(" (model context)");
}

// --- Input ------------------------------------------------------------------

absl::StatusOr<std::vector<int32_t>> EncodeText(
    const v1::GenerateRequest& request, const engine::Tokenizer& tokenizer) {
  if (request.text().empty()) return Invalid("text", "is empty");
  engine::EncodeOptions encode;
  encode.add_bos = request.has_add_special_tokens()
                       ? request.add_special_tokens() && tokenizer.add_bos()
                       : tokenizer.add_bos();
  std::vector<int32_t> prompt = tokenizer.Encode(request.text(), encode);
  if (prompt.empty()) return Invalid("text", "encodes to no tokens");
  return prompt;
}

absl::StatusOr<std::vector<int32_t>> CheckTokenIds(
    const v1::GenerateRequest& request, const ModelLimits& model) {
  const auto& ids = request.token_ids().ids();
  if (ids.empty()) return Invalid("token_ids.ids", "is empty");
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= model.vocab_size) {
      return Invalid(
          absl::StrCat("token_ids.ids[", i, "]"),
          absl::StrCat("must be in [0, ", model.vocab_size, "), got ", ids[i]));
    }
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

// The prompt's tokens and, for chat, how to split the output.
struct Prompt {
  std::vector<int32_t> tokens;
  std::optional<chat::ChatOutputFormat> chat_output;
};

// The chat rendered by the model's template and tokenized. The output is
// split by the template's format, tool calls only when the request gives
// tools, starting inside reasoning when the prompt opened it.
absl::StatusOr<Prompt> EncodeChat(const v1::Chat& chat,
                                  const engine::Tokenizer& tokenizer,
                                  const ChatInput& input) {
  const chat::ChatTemplate* chat_template =
      input.templates == nullptr ? nullptr
                                 : input.templates->For(chat.tools_size() > 0);
  if (chat_template == nullptr || input.encoder == nullptr) {
    return absl::FailedPreconditionError(
        "the model has no chat template; set model.chat_template_file or "
        "send text");
  }
  ASSIGN_OR_RETURN(
      const nlohmann::ordered_json context,
      chat::BuildChatContext(chat, tokenizer.TokenText(tokenizer.bos_id()),
                             tokenizer.TokenText(tokenizer.eos_id())));
  chat::ChatRenderOptions options;
  options.now = input.now;
  absl::StatusOr<chat::ChatPrompt> prompt =
      input.encoder->Render(*chat_template, context, options);
  if (!prompt.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chat: ", prompt.status().message()));
  }
  if (prompt->tokens.empty()) return Invalid("chat", "renders to no tokens");
  chat::ChatOutputFormat format = input.templates->output;
  if (chat.tools_size() == 0) format.tool_calls = chat::ToolCallFormat::kNone;
  if (format.tool_calls != chat::ToolCallFormat::kNone) {
    format.parameter_types = chat::ToolParameterTypes::FromChat(chat);
  }
  format.starts_in_reasoning = chat::PromptOpensReasoning(prompt->text, format);
  format.prompt_closed_reasoning =
      chat::PromptClosesReasoning(prompt->text, format);
  return Prompt{std::move(prompt->tokens), std::move(format)};
}

// The prompt's tokens: the text encoded, the ids checked, or the chat
// rendered.
absl::StatusOr<Prompt> ReadInput(const v1::GenerateRequest& request,
                                 const engine::Tokenizer& tokenizer,
                                 const ModelLimits& model,
                                 const ChatInput& chat) {
  switch (request.input_case()) {
    case v1::GenerateRequest::kText: {
      ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                       EncodeText(request, tokenizer));
      return Prompt{std::move(ids), std::nullopt};
    }
    case v1::GenerateRequest::kTokenIds: {
      ASSIGN_OR_RETURN(std::vector<int32_t> ids, CheckTokenIds(request, model));
      return Prompt{std::move(ids), std::nullopt};
    }
    case v1::GenerateRequest::kChat:
      return EncodeChat(request.chat(), tokenizer, chat);
    default:
      return Invalid("input", "is missing: set text, token_ids or chat");
  }
}

// A prompt over its limit: when the limit is the model's context (no
// tenant limit), marked as such (scheduler/context_limit.h).
absl::Status OverContext(bool tenant_limit, absl::Status status) {
  return tenant_limit ? status : scheduler::MarkContextExceeded(status);
}

// The prompt, within the tenant's prompt limit (else the model's context).
absl::StatusOr<Prompt> BuildPrompt(const v1::GenerateRequest& request,
                                   const TenantPolicy& tenant,
                                   const engine::Tokenizer& tokenizer,
                                   const ModelLimits& model,
                                   const ChatInput& chat) {
  const bool tenant_limit = tenant.max_prompt_tokens > 0;
  const int64_t max_prompt =
      tenant_limit ? tenant.max_prompt_tokens : model.context_length;
  // Refused by size before any encoding work: a 3 MB text is over any
  // limit long before its tokens are counted.
  const uint64_t max_text_bytes =
      static_cast<uint64_t>(max_prompt) * tokenizer.max_token_bytes();
  if (request.input_case() == v1::GenerateRequest::kText &&
      request.text().size() > max_text_bytes) {
    return OverContext(
        tenant_limit,
        Invalid("input",
                absl::StrCat("has ", request.text().size(),
                             " bytes, more than the limit of ", max_prompt,
                             " tokens can hold (at most ",
                             tokenizer.max_token_bytes(), " bytes per token)",
                             LimitSource(tenant_limit, "max_prompt_tokens"))));
  }
  if (request.input_case() == v1::GenerateRequest::kTokenIds &&
      request.token_ids().ids_size() > max_prompt) {
    return OverContext(
        tenant_limit,
        Invalid("input",
                absl::StrCat("has ", request.token_ids().ids_size(),
                             " tokens, over the limit of ", max_prompt,
                             LimitSource(tenant_limit, "max_prompt_tokens"))));
  }
  ASSIGN_OR_RETURN(Prompt prompt, ReadInput(request, tokenizer, model, chat));
  if (static_cast<int64_t>(prompt.tokens.size()) > max_prompt) {
    return OverContext(
        tenant_limit,
        Invalid("input",
                absl::StrCat("has ", prompt.tokens.size(),
                             " tokens, over the limit of ", max_prompt,
                             LimitSource(tenant_limit, "max_prompt_tokens"))));
  }
  return prompt;
}

// --- Sampling ---------------------------------------------------------------

// The GenerateRequest field a sampler field comes from.
std::string ProtoField(engine::SamplingField field) {
  if (field == engine::SamplingField::kTopLogprobs) return "logprobs.top_n";
  return absl::StrCat("sampling.", engine::SamplingFieldName(field));
}

// Set fields over the defaults; `seed` when the request names none.
engine::SamplingParams SamplingFrom(const v1::GenerateRequest& request,
                                    uint64_t seed) {
  const v1::SamplingOptions& s = request.sampling();
  engine::SamplingParams p;
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_k()) p.top_k = s.top_k();
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) p.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) p.frequency_penalty = s.frequency_penalty();
  p.seed = s.has_seed() ? s.seed() : seed;
  p.logit_bias.assign(s.logit_bias().begin(), s.logit_bias().end());
  p.logprobs = request.logprobs().enabled();
  p.top_logprobs = request.logprobs().top_n();
  return p;
}

// sampling.constraint as the grammar engine's Constraint.
absl::StatusOr<engine::grammar::Constraint> ConstraintFrom(
    const v1::Constraint& c) {
  using Kind = engine::grammar::Constraint::Kind;
  engine::grammar::Constraint out;
  out.flexible_whitespace = c.flexible_whitespace();
  switch (c.kind_case()) {
    case v1::Constraint::kJsonSchema:
      out.kind = Kind::kJsonSchema;
      out.text = c.json_schema();
      break;
    case v1::Constraint::kJsonObject:
      if (!c.json_object()) {
        return Invalid("sampling.constraint.json_object", "must be true");
      }
      out.kind = Kind::kJsonObject;
      break;
    case v1::Constraint::kRegex:
      out.kind = Kind::kRegex;
      out.text = c.regex();
      break;
    case v1::Constraint::kChoice:
      out.kind = Kind::kChoice;
      out.choices.assign(c.choice().values().begin(),
                         c.choice().values().end());
      if (out.choices.empty()) {
        return Invalid("sampling.constraint.choice",
                       "needs at least one value");
      }
      break;
    case v1::Constraint::kGrammar:
      out.kind = Kind::kGbnf;
      out.text = c.grammar();
      break;
    case v1::Constraint::kToolCalls:  // BuildToolCallMask's
    case v1::Constraint::KIND_NOT_SET:
      return Invalid("sampling.constraint",
                     "set one of json_schema, json_object, regex, choice, "
                     "grammar, tool_calls");
  }
  return out;
}

// The constraint's mask prototype, compiled (or cached) for the tenant.
// Tool calls take the vocabulary's marker tokens and the chat output's
// format (tool_call_constraint.h).
absl::Status AddConstraint(const v1::GenerateRequest& request,
                           const TenantPolicy& tenant,
                           const engine::Tokenizer& tokenizer,
                           const Prompt& prompt,
                           engine::grammar::GrammarCache* grammars,
                           engine::SamplingParams* p) {
  if (!request.sampling().has_constraint()) return absl::OkStatus();
  if (grammars == nullptr) {
    return absl::FailedPreconditionError(
        "sampling.constraint: structured output is not available for this "
        "model");
  }
  if (request.stopping().ignore_eos()) {
    return Invalid("stopping.ignore_eos",
                   "cannot be set with sampling.constraint (the constraint "
                   "ends the output)");
  }
  if (request.sampling().constraint().has_tool_calls()) {
    ASSIGN_OR_RETURN(p->mask, BuildToolCallMask(request.sampling().constraint(),
                                                prompt.chat_output, tokenizer,
                                                tenant, *grammars));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(engine::grammar::Constraint c,
                   ConstraintFrom(request.sampling().constraint()));
  absl::StatusOr<std::shared_ptr<const engine::TokenMask>> mask =
      grammars->Mask(c, tenant.name);
  if (!mask.ok()) {
    return Invalid(absl::StrCat("sampling.constraint.",
                                engine::grammar::ConstraintKindName(c.kind)),
                   std::string(mask.status().message()));
  }
  // The answer is constrained, not a reasoning model's thinking.
  p->mask = AfterReasoning(*std::move(mask), prompt.chat_output, tokenizer,
                           *grammars);
  return absl::OkStatus();
}

absl::StatusOr<engine::SamplingParams> BuildSampling(
    const v1::GenerateRequest& request, const TenantPolicy& tenant,
    const engine::Tokenizer& tokenizer, const ModelLimits& model,
    const Prompt& prompt, uint64_t seed,
    engine::grammar::GrammarCache* grammars) {
  engine::SamplingParams p = SamplingFrom(request, seed);
  RETURN_IF_ERROR(
      AddConstraint(request, tenant, tokenizer, prompt, grammars, &p));
  if (p.top_logprobs != 0 && !p.logprobs) {
    return Invalid("logprobs.top_n", "needs logprobs.enabled");
  }
  if (std::optional<engine::SamplingParamError> error =
          engine::CheckSamplingParams(p, model.vocab_size)) {
    return Invalid(ProtoField(error->field), error->reason);
  }
  return p;
}

// --- Stopping ---------------------------------------------------------------

// The request's max_tokens (>= 1, within the cap), or the tenant's default
// within the cap. The cap is the tenant's limit, else the model's context.
absl::StatusOr<int32_t> MaxTokens(const v1::StoppingOptions& stop,
                                  const TenantPolicy& tenant,
                                  const ModelLimits& model) {
  const bool tenant_limit = tenant.max_tokens_limit > 0;
  const int64_t cap =
      tenant_limit ? tenant.max_tokens_limit : model.context_length;
  if (!stop.has_max_tokens()) {
    return static_cast<int32_t>(
        std::min<int64_t>(tenant.default_max_tokens, cap));
  }
  if (stop.max_tokens() < 1) {
    return Invalid("stopping.max_tokens",
                   absl::StrCat("must be >= 1, got ", stop.max_tokens()));
  }
  if (stop.max_tokens() > cap) {
    return Invalid(
        "stopping.max_tokens",
        absl::StrCat("is ", stop.max_tokens(), ", over the limit of ", cap,
                     LimitSource(tenant_limit, "max_tokens_limit")));
  }
  return stop.max_tokens();
}

// Stop strings (each non-empty) and stop token ids (each in the
// vocabulary), within the tenant's bounds; counts are checked before
// anything is copied.
// The engine's stops (ids, max_tokens) and the text's (stop strings, which
// delivery matches).
struct Stopping {
  scheduler::StopConditions engine;
  engine::StopStrings text;
};

absl::Status AddStops(const v1::StoppingOptions& stop,
                      const TenantPolicy& tenant, const ModelLimits& model,
                      Stopping* out) {
  if (stop.stop_size() > tenant.max_stop_strings) {
    return Invalid(
        "stopping.stop",
        absl::StrCat("has ", stop.stop_size(), " strings, over the limit of ",
                     tenant.max_stop_strings, " (tenant max_stop_strings)"));
  }
  if (stop.stop_token_ids_size() > tenant.max_stop_token_ids) {
    return Invalid(
        "stopping.stop_token_ids",
        absl::StrCat("has ", stop.stop_token_ids_size(),
                     " ids, over the limit of ", tenant.max_stop_token_ids,
                     " (tenant max_stop_token_ids)"));
  }
  for (int i = 0; i < stop.stop_size(); ++i) {
    const std::string& s = stop.stop(i);
    if (s.empty()) {
      return Invalid(absl::StrCat("stopping.stop[", i, "]"), "is empty");
    }
    if (s.size() > static_cast<size_t>(tenant.max_stop_string_bytes)) {
      return Invalid(
          absl::StrCat("stopping.stop[", i, "]"),
          absl::StrCat("has ", s.size(), " bytes, over the limit of ",
                       tenant.max_stop_string_bytes,
                       " (tenant max_stop_string_bytes)"));
    }
    out->text.strings.push_back(s);
  }
  for (int i = 0; i < stop.stop_token_ids_size(); ++i) {
    const int32_t id = stop.stop_token_ids(i);
    if (id < 0 || id >= model.vocab_size) {
      return Invalid(
          absl::StrCat("stopping.stop_token_ids[", i, "]"),
          absl::StrCat("must be in [0, ", model.vocab_size, "), got ", id));
    }
    out->engine.stop_token_ids.push_back(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<Stopping> BuildStopping(const v1::StoppingOptions& stop,
                                       const TenantPolicy& tenant,
                                       const ModelLimits& model) {
  Stopping out;
  ASSIGN_OR_RETURN(out.engine.max_tokens, MaxTokens(stop, tenant, model));
  out.engine.ignore_eos = stop.ignore_eos();
  out.text.include = stop.include_stop_str();
  RETURN_IF_ERROR(AddStops(stop, tenant, model, &out));
  return out;
}

// --- Priority and delivery --------------------------------------------------

// The class asked for (unset: standard), lowered to the tenant's
// max_priority when it is higher.
absl::StatusOr<scheduler::PriorityClass> BuildPriority(
    v1::Priority p, const TenantPolicy& tenant) {
  if (!v1::Priority_IsValid(p)) {
    return Invalid("priority",
                   absl::StrCat("is not a known value: ", static_cast<int>(p)));
  }
  scheduler::PriorityClass asked = scheduler::PriorityClass::kStandard;
  if (p == v1::PRIORITY_INTERACTIVE) {
    asked = scheduler::PriorityClass::kInteractive;
  } else if (p == v1::PRIORITY_BATCH) {
    asked = scheduler::PriorityClass::kBatch;
  }
  // Later classes are lower priorities.
  return std::max(asked, tenant.max_priority);
}

// The request's pace (finite, >= 0) or the tenant's default, then the
// tenant's cap (unpaced counts as fastest).
absl::StatusOr<double> Pace(const v1::DeliveryOptions& d,
                            const TenantPolicy& tenant) {
  double pace = tenant.default_pace;
  if (d.has_pace_tokens_per_s()) {
    pace = d.pace_tokens_per_s();
    if (!std::isfinite(pace) || pace < 0) {
      return Invalid("delivery.pace_tokens_per_s",
                     absl::StrCat("must be >= 0, got ", pace));
    }
    if (pace > 0 && pace < tenant.min_pace) {
      return Invalid(
          "delivery.pace_tokens_per_s",
          absl::StrCat("must be 0 (unpaced) or at least ", tenant.min_pace,
                       " (tenant min_pace_tokens_per_s), got ", pace));
    }
  }
  if (tenant.max_pace > 0 && (pace == 0 || pace > tenant.max_pace)) {
    pace = tenant.max_pace;
  }
  return pace;
}

absl::StatusOr<DeliveryOptions> BuildDelivery(const v1::DeliveryOptions& d,
                                              const TenantPolicy& tenant) {
  DeliveryOptions out;
  ASSIGN_OR_RETURN(out.pace_tokens_per_s, Pace(d, tenant));
  out.burst_tokens = tenant.default_burst;
  if (d.has_burst_tokens()) {
    out.burst_tokens = d.burst_tokens();
    if (out.burst_tokens < 1) {
      return Invalid("delivery.burst_tokens",
                     absl::StrCat("must be >= 1, got ", out.burst_tokens));
    }
  }
  return out;
}

absl::StatusOr<int32_t> BuildSpeculation(const v1::SpeculationOptions& s,
                                         const TenantPolicy& tenant) {
  if (!s.has_max_draft_tokens()) return tenant.default_max_draft_tokens;
  if (s.max_draft_tokens() < 0 ||
      s.max_draft_tokens() > scheduler::kMaxDraftTokens) {
    return Invalid("speculation.max_draft_tokens",
                   absl::StrCat("must be in [0, ", scheduler::kMaxDraftTokens,
                                "], got ", s.max_draft_tokens()));
  }
  return s.max_draft_tokens();
}

// Fast-forward for a constrained request unless it is off or logprobs
// are asked for (forced tokens have none).
int32_t ForcedTokens(const v1::GenerateRequest& request,
                     const engine::SamplingParams& sampling) {
  const v1::SamplingOptions& s = request.sampling();
  const bool on = sampling.mask != nullptr && !sampling.logprobs &&
                  (!s.has_fast_forward() || s.fast_forward());
  return on ? scheduler::kMaxForcedTokens : 0;
}

}  // namespace

absl::StatusOr<BuiltRequest> BuildRequest(
    const v1::GenerateRequest& request, const TenantPolicy& tenant,
    const engine::Tokenizer& tokenizer, const ModelLimits& model, uint64_t seed,
    const ChatInput& chat, engine::grammar::GrammarCache* grammars) {
  BuiltRequest out;
  scheduler::RequestSpec& spec = out.spec;
  spec.tenant = tenant.name;
  spec.cache_salt = tenant.cache_salt;  // request.cache_salt is ignored
  ASSIGN_OR_RETURN(Prompt prompt,
                   BuildPrompt(request, tenant, tokenizer, model, chat));
  ASSIGN_OR_RETURN(spec.sampling, BuildSampling(request, tenant, tokenizer,
                                                model, prompt, seed, grammars));
  spec.prompt = std::move(prompt.tokens);
  ASSIGN_OR_RETURN(Stopping stopping,
                   BuildStopping(request.stopping(), tenant, model));
  spec.stop = std::move(stopping.engine);
  ASSIGN_OR_RETURN(spec.priority, BuildPriority(request.priority(), tenant));
  ASSIGN_OR_RETURN(out.delivery, BuildDelivery(request.delivery(), tenant));
  out.delivery.tokenizer = &tokenizer;
  out.delivery.stop = std::move(stopping.text);
  spec.pace_tokens_per_s = out.delivery.pace_tokens_per_s;
  ASSIGN_OR_RETURN(spec.max_draft_tokens,
                   BuildSpeculation(request.speculation(), tenant));
  spec.max_forced_tokens = ForcedTokens(request, spec.sampling);
  if (prompt.chat_output.has_value()) {  // markers reach the parser as text
    out.delivery.control_token_text = true;
    out.delivery.chat_output = std::move(prompt.chat_output);
    out.delivery.tool_call_id_seed = spec.sampling.seed;
  }
  return out;
}

}  // namespace paceline::server
