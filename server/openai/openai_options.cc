#include "server/openai/openai_options.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/sampling/sampler.h"
#include "scheduler/request.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_response_format.h"

namespace paceline::server::openai {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

absl::Status OutOfRange(absl::string_view param, absl::string_view range,
                        double got) {
  return InvalidParam(
      param, absl::StrCat("'", param, "' must be ", range, ", got ", got));
}

// A number field checked by `ok`, stored by `set`.
template <typename Ok, typename Set>
absl::Status Number(const Json& body, const char* key, absl::string_view range,
                    Ok ok, Set set) {
  const Json* v = Find(body, key);
  if (v == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const double x, AsNumber(*v, key));
  // Stored as a float: a finite double past float's range is refused too.
  if (!ok(x) || std::fabs(x) > std::numeric_limits<float>::max()) {
    return OutOfRange(key, range, x);
  }
  set(static_cast<float>(x));
  return absl::OkStatus();
}

// OpenAI's logit_bias: {"<token id>": bias in [-100, 100], ...}. Whether
// each id is in the vocabulary is the request builder's check.
absl::Status LogitBias(const Json& body, v1::SamplingOptions* s) {
  const Json* v = Find(body, "logit_bias");
  if (v == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectObject(*v, "logit_bias"));
  for (const auto& [key, value] : v->items()) {
    int32_t token = 0;
    if (!absl::SimpleAtoi(key, &token) || token < 0 ||
        absl::StrCat(token) != key) {
      return InvalidParam(
          "logit_bias",
          absl::StrCat("'logit_bias' keys must be token ids, got \"", key,
                       "\""));
    }
    const std::string param = absl::StrCat("logit_bias.", key);
    ASSIGN_OR_RETURN(const double bias, AsNumber(value, param));
    if (!(std::fabs(bias) <= engine::kMaxLogitBias)) {
      return OutOfRange(param, "in [-100, 100]", bias);
    }
    (*s->mutable_logit_bias())[token] = static_cast<float>(bias);
  }
  return absl::OkStatus();
}

absl::Status Sampling(const Json& body, v1::SamplingOptions* s) {
  RETURN_IF_ERROR(LogitBias(body, s));
  RETURN_IF_ERROR(Number(
      body, "temperature", ">= 0", [](double x) { return x >= 0; },
      [s](float x) { s->set_temperature(x); }));
  RETURN_IF_ERROR(Number(
      body, "top_p", "in (0, 1]", [](double x) { return x > 0 && x <= 1; },
      [s](float x) { s->set_top_p(x); }));
  RETURN_IF_ERROR(Number(
      body, "min_p", "in [0, 1]", [](double x) { return x >= 0 && x <= 1; },
      [s](float x) { s->set_min_p(x); }));
  RETURN_IF_ERROR(Number(
      body, "repetition_penalty", "in [0.1, 10]",
      [](double x) {
        return x >= engine::kMinRepetitionPenalty &&
               x <= engine::kMaxRepetitionPenalty;
      },
      [s](float x) { s->set_repetition_penalty(x); }));
  auto penalty = [](double x) { return x >= -2 && x <= 2; };
  RETURN_IF_ERROR(Number(body, "presence_penalty", "in [-2, 2]", penalty,
                         [s](float x) { s->set_presence_penalty(x); }));
  RETURN_IF_ERROR(Number(body, "frequency_penalty", "in [-2, 2]", penalty,
                         [s](float x) { s->set_frequency_penalty(x); }));
  if (const Json* v = Find(body, "top_k")) {
    // vLLM's -1 and OpenAI-style 0 both mean off.
    ASSIGN_OR_RETURN(const int64_t k, AsInt(*v, "top_k", -1, kInt32Max));
    if (k > 0) s->set_top_k(static_cast<int32_t>(k));
  }
  if (const Json* v = Find(body, "seed")) {
    // OpenAI's seed is any 64-bit integer; a negative one keeps its bits.
    if (v->is_number_unsigned()) {
      s->set_seed(v->get<uint64_t>());
    } else {
      ASSIGN_OR_RETURN(const int64_t seed,
                       AsInt(*v, "seed", std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max()));
      s->set_seed(static_cast<uint64_t>(seed));
    }
  }
  // Paceline's extension: structured output's fast-forward (default on).
  if (const Json* v = Find(body, "fast_forward")) {
    ASSIGN_OR_RETURN(const bool on, AsBool(*v, "fast_forward"));
    s->set_fast_forward(on);
  }
  return absl::OkStatus();
}

absl::Status Stop(const Json& v, v1::StoppingOptions* stop) {
  if (v.is_string()) {
    const std::string text = v.get<std::string>();
    if (text.empty()) return InvalidParam("stop", "'stop' must not be empty");
    stop->add_stop(text);
    return absl::OkStatus();
  }
  if (!v.is_array()) {
    return InvalidParam("stop", absl::StrCat("'stop' must be a string or an "
                                             "array of strings, got ",
                                             TypeName(v)));
  }
  if (v.size() > kMaxStopSequences) {
    return InvalidParam("stop",
                        absl::StrCat("'stop' holds at most ", kMaxStopSequences,
                                     " sequences, got ", v.size()));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string param = Index("stop", i);
    ASSIGN_OR_RETURN(std::string text, AsString(v[i], param));
    if (text.empty()) {
      return InvalidParam(param, absl::StrCat("'", param, "' is empty"));
    }
    stop->add_stop(std::move(text));
  }
  return absl::OkStatus();
}

absl::Status Stopping(const Json& body, Endpoint endpoint,
                      v1::StoppingOptions* stop) {
  // Chat: max_completion_tokens wins over the deprecated max_tokens; the
  // Responses API has max_output_tokens alone.
  std::vector<const char*> keys;
  if (endpoint == Endpoint::kResponses) {
    keys = {"max_output_tokens"};
  } else {
    if (endpoint == Endpoint::kChat) keys.push_back("max_completion_tokens");
    keys.push_back("max_tokens");
  }
  for (const char* key : keys) {
    const Json* v = Find(body, key);
    if (v == nullptr) continue;
    ASSIGN_OR_RETURN(const int64_t max, AsInt(*v, key, 1, kInt32Max));
    stop->set_max_tokens(static_cast<int32_t>(max));
    break;
  }
  if (const Json* v = Find(body, "stop")) RETURN_IF_ERROR(Stop(*v, stop));
  if (const Json* v = Find(body, "stop_token_ids")) {
    RETURN_IF_ERROR(ExpectArray(*v, "stop_token_ids"));
    for (size_t i = 0; i < v->size(); ++i) {
      ASSIGN_OR_RETURN(
          const int64_t id,
          AsInt((*v)[i], Index("stop_token_ids", i), 0, kInt32Max));
      stop->add_stop_token_ids(static_cast<int32_t>(id));
    }
  }
  if (const Json* v = Find(body, "ignore_eos")) {
    ASSIGN_OR_RETURN(const bool ignore, AsBool(*v, "ignore_eos"));
    stop->set_ignore_eos(ignore);
  }
  return absl::OkStatus();
}

absl::Status CompletionLogprobs(const Json& body, OpenAiRequest* out) {
  const Json* v = Find(body, "logprobs");
  if (v == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int64_t n, AsInt(*v, "logprobs", 0, 20));
  out->logprobs = true;
  out->top_logprobs = static_cast<int>(n);
  return absl::OkStatus();
}

absl::Status ChatLogprobs(const Json& body, OpenAiRequest* out) {
  if (const Json* v = Find(body, "logprobs")) {
    ASSIGN_OR_RETURN(out->logprobs, AsBool(*v, "logprobs"));
  }
  if (const Json* v = Find(body, "top_logprobs")) {
    ASSIGN_OR_RETURN(const int64_t n, AsInt(*v, "top_logprobs", 0, 20));
    if (n > 0 && !out->logprobs) {
      return InvalidParam("top_logprobs",
                          "'top_logprobs' needs 'logprobs' set to true");
    }
    out->top_logprobs = static_cast<int>(n);
  }
  return absl::OkStatus();
}

absl::Status Delivery(const Json& body, v1::GenerateRequest* base) {
  v1::DeliveryOptions* d = base->mutable_delivery();
  if (const Json* v = Find(body, "pace_tokens_per_s")) {
    ASSIGN_OR_RETURN(const double pace, AsNumber(*v, "pace_tokens_per_s"));
    if (pace < 0) return OutOfRange("pace_tokens_per_s", ">= 0", pace);
    d->set_pace_tokens_per_s(pace);
  }
  if (const Json* v = Find(body, "burst_tokens")) {
    ASSIGN_OR_RETURN(const int64_t burst,
                     AsInt(*v, "burst_tokens", 1, kInt32Max));
    d->set_burst_tokens(static_cast<int32_t>(burst));
  }
  if (const Json* v = Find(body, "priority")) {
    ASSIGN_OR_RETURN(const std::string p, AsString(*v, "priority"));
    if (p == "interactive") {
      base->set_priority(v1::PRIORITY_INTERACTIVE);
    } else if (p == "standard") {
      base->set_priority(v1::PRIORITY_STANDARD);
    } else if (p == "batch") {
      base->set_priority(v1::PRIORITY_BATCH);
    } else {
      return InvalidParam("priority",
                          absl::StrCat("'priority' must be \"interactive\", "
                                       "\"standard\" or \"batch\", got \"",
                                       p, "\""));
    }
  }
  return absl::OkStatus();
}

// Paceline's extension: "speculation": {"max_draft_tokens": N}
// (GenerateRequest.speculation).
absl::Status Speculation(const Json& body, v1::GenerateRequest* base) {
  const Json* v = Find(body, "speculation");
  if (v == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectObject(*v, "speculation"));
  if (const Json* n = Find(*v, "max_draft_tokens")) {
    ASSIGN_OR_RETURN(const int64_t drafts,
                     AsInt(*n, "speculation.max_draft_tokens", 0,
                           scheduler::kMaxDraftTokens));
    base->mutable_speculation()->set_max_draft_tokens(
        static_cast<int32_t>(drafts));
  }
  return absl::OkStatus();
}

// The Responses API's logprobs come as `top_logprobs` on output_text,
// which Paceline does not write: refused rather than dropped.
absl::Status ResponsesLogprobs(const Json& body) {
  if (const Json* v = Find(body, "top_logprobs")) {
    ASSIGN_OR_RETURN(const int64_t n, AsInt(*v, "top_logprobs", 0, 20));
    if (n > 0) {
      return InvalidParam("top_logprobs",
                          "'top_logprobs' is not supported by Paceline's "
                          "Responses API; use /v1/chat/completions");
    }
  }
  return absl::OkStatus();
}

absl::Status Transport(const Json& body, Endpoint endpoint,
                       OpenAiRequest* out) {
  if (const Json* v = Find(body, "model")) {
    ASSIGN_OR_RETURN(out->model, AsString(*v, "model"));
  }
  if (const Json* v = Find(body, "stream")) {
    ASSIGN_OR_RETURN(out->stream, AsBool(*v, "stream"));
  }
  if (const Json* v = Find(body, "stream_options")) {
    RETURN_IF_ERROR(ExpectObject(*v, "stream_options"));
    if (!out->stream) {
      return InvalidParam("stream_options",
                          "'stream_options' is only allowed when 'stream' is "
                          "true");
    }
    if (endpoint == Endpoint::kResponses) {
      // {include_obfuscation}: padding against length side channels on
      // OpenAI's network; nothing to do here.
    } else if (const Json* u = Find(*v, "include_usage")) {
      ASSIGN_OR_RETURN(out->include_usage,
                       AsBool(*u, "stream_options.include_usage"));
    }
  }
  const Json* n_field =
      endpoint == Endpoint::kResponses ? nullptr : Find(body, "n");
  if (const Json* v = n_field) {
    ASSIGN_OR_RETURN(const int64_t n, AsInt(*v, "n", 1, kMaxChoices));
    out->n = static_cast<int>(n);
  }
  return absl::OkStatus();
}

absl::Status NotSupported(absl::string_view param, absl::string_view what) {
  return InvalidParam(param, absl::StrCat(what, " is not supported"));
}

// Features Paceline lacks: refused, never silently ignored.
absl::Status Refused(const Json& body, const OpenAiRequest& out) {
  if (const Json* v = Find(body, "echo")) {
    ASSIGN_OR_RETURN(const bool echo, AsBool(*v, "echo"));
    if (echo) return NotSupported("echo", "'echo': true");
  }
  if (const Json* v = Find(body, "best_of")) {
    ASSIGN_OR_RETURN(const int64_t best_of, AsInt(*v, "best_of", 1, 128));
    if (best_of != out.n)
      return NotSupported("best_of", "'best_of' other than n");
  }
  if (const Json* v = Find(body, "suffix")) {
    ASSIGN_OR_RETURN(const std::string suffix, AsString(*v, "suffix"));
    if (!suffix.empty()) return NotSupported("suffix", "'suffix'");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseSharedOptions(const Json& body, Endpoint endpoint,
                                OpenAiRequest* out, v1::GenerateRequest* base) {
  RETURN_IF_ERROR(Transport(body, endpoint, out));
  RETURN_IF_ERROR(Refused(body, *out));
  RETURN_IF_ERROR(Sampling(body, base->mutable_sampling()));
  RETURN_IF_ERROR(ParseResponseFormat(body, base->mutable_sampling(),
                                      endpoint == Endpoint::kResponses
                                          ? FormatField::kTextFormat
                                          : FormatField::kResponseFormat));
  RETURN_IF_ERROR(Stopping(body, endpoint, base->mutable_stopping()));
  switch (endpoint) {
    case Endpoint::kCompletions:
      RETURN_IF_ERROR(CompletionLogprobs(body, out));
      break;
    case Endpoint::kChat:
      RETURN_IF_ERROR(ChatLogprobs(body, out));
      break;
    case Endpoint::kResponses:
      RETURN_IF_ERROR(ResponsesLogprobs(body));
      break;
  }
  base->mutable_logprobs()->set_enabled(out->logprobs);
  base->mutable_logprobs()->set_top_n(out->top_logprobs);
  RETURN_IF_ERROR(Delivery(body, base));
  RETURN_IF_ERROR(Speculation(body, base));
  base->set_model(out->model);
  return absl::OkStatus();
}

absl::Status ParseSampling(const Json& body, v1::SamplingOptions* sampling) {
  return Sampling(body, sampling);
}

absl::Status ParsePacelineOptions(const Json& body, v1::GenerateRequest* base) {
  RETURN_IF_ERROR(Delivery(body, base));
  return Speculation(body, base);
}

}  // namespace paceline::server::openai
