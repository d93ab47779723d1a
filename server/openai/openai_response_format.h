#ifndef PACELINE_SERVER_OPENAI_OPENAI_RESPONSE_FORMAT_H_
#define PACELINE_SERVER_OPENAI_OPENAI_RESPONSE_FORMAT_H_

// Structured output as the OpenAI-compatible APIs ask for it, into
// v1::SamplingOptions.constraint:
//   - OpenAI's `response_format`: {"type": "text"} (no constraint),
//     {"type": "json_object"} (any JSON object), {"type": "json_schema",
//     "json_schema": {"name", "schema", "strict", "description"}};
//     or, in the Responses API, `text.format` with the same types and the
//     json_schema fields beside `type` ({"type": "json_schema", "name",
//     "schema", "strict", "description"}: openai-node
//     src/resources/responses/responses.ts ResponseTextConfig,
//     ResponseFormatTextJSONSchemaConfig);
//   - vLLM's `structured_outputs`: {"json": schema (object or JSON text),
//     "regex", "choice", "grammar", "json_object"}, and its older
//     `guided_json` / `guided_regex` / `guided_choice` / `guided_grammar`;
//   - llama.cpp's `json_schema` (an object) and `grammar` (GBNF text).
// At most one of them may constrain a request (InvalidParam otherwise), so
// clients written for any of the three servers work unchanged.

#include "absl/status/status.h"
#include "paceline/v1/paceline.pb.h"
#include "server/openai/openai_json.h"

namespace paceline::server::openai {

// Where the body holds the API's own format: chat's `response_format`, the
// Responses API's `text.format`, or Anthropic's `output_config.format`
// ({"type": "json_schema", "schema": {...}}: @anthropic-ai/sdk
// resources/messages/messages.ts OutputConfig, JSONOutputFormat; also its
// beta's top-level `output_format` of the same shape). The others are
// then not read.
enum class FormatField { kResponseFormat, kTextFormat, kOutputConfig };

// Reads the fields above from `body` into `constraint` (left unset when
// none constrains). Errors name the field as OpenAI's `param`.
absl::Status ParseResponseFormat(
    const Json& body, v1::SamplingOptions* sampling,
    FormatField field = FormatField::kResponseFormat);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_OPENAI_RESPONSE_FORMAT_H_
