#ifndef PACELINE_SERVER_OPENAI_OPENAI_OPENAI_OPTIONS_H_
#define PACELINE_SERVER_OPENAI_OPENAI_OPENAI_OPTIONS_H_

// The options both endpoints share (sampling, stopping, logprobs, delivery,
// priority, stream, n, model, the refused features), read from a parsed
// body into a template GenerateRequest (everything but the input) and the
// transport options. Internal to server/openai; facts and ranges are in
// openai_request.h.

#include "absl/status/status.h"
#include "paceline/v1/paceline.pb.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_request.h"

namespace paceline::server::openai {

enum class Endpoint { kCompletions, kChat };

absl::Status ParseSharedOptions(const Json& body, Endpoint endpoint,
                                OpenAiRequest* out, v1::GenerateRequest* base);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_OPENAI_OPTIONS_H_
