#ifndef PACELINE_SERVER_OPENAI_OPENAI_OPENAI_OPTIONS_H_
#define PACELINE_SERVER_OPENAI_OPENAI_OPENAI_OPTIONS_H_

// The options every endpoint shares (sampling, stopping, logprobs, delivery,
// priority, stream, n, model, the refused features), read from a parsed
// body into a template GenerateRequest (everything but the input) and the
// transport options. Internal to server/openai; facts and ranges are in
// openai_request.h.

#include "absl/status/status.h"
#include "paceline/v1/paceline.pb.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

// Which body: the Responses API reads `max_output_tokens`, `text.format`
// and `top_logprobs` (refused above 0) where chat reads `max_tokens` /
// `max_completion_tokens`, `response_format` and `logprobs`, and has no
// `n`.
enum class Endpoint { kCompletions, kChat, kResponses };

absl::Status ParseSharedOptions(const Json& body, Endpoint endpoint,
                                OpenAiRequest* out, v1::GenerateRequest* base);

// Parts of ParseSharedOptions for other APIs' bodies (server/anthropic).
// The sampling fields: temperature, top_p, top_k, min_p,
// repetition_penalty, presence_penalty, frequency_penalty, seed,
// logit_bias, fast_forward.
absl::Status ParseSampling(const Json& body, v1::SamplingOptions* sampling);
// Paceline's extensions: pace_tokens_per_s, burst_tokens, priority,
// speculation.
absl::Status ParsePacelineOptions(const Json& body, v1::GenerateRequest* base);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_OPENAI_OPTIONS_H_
