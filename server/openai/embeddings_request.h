#ifndef PACELINE_SERVER_OPENAI_EMBEDDINGS_REQUEST_H_
#define PACELINE_SERVER_OPENAI_EMBEDDINGS_REQUEST_H_

// OpenAI's embeddings API, its pure parts: the body of POST /v1/embeddings
// and the CreateEmbeddingResponse answer.
//
// As the official client types it (openai-node src/resources/embeddings.ts,
// EmbeddingCreateParams / CreateEmbeddingResponse):
//   request   input: string | string[] | number[] | number[][] (texts, or
//               token ids; not an empty string, arrays of at most 2048),
//             model: string, dimensions?: number (text-embedding-3 and
//             later), encoding_format?: 'float' | 'base64', user?: string
//   answer    {object: "list", data: [{object: "embedding", index,
//               embedding: number[]}], model, usage: {prompt_tokens,
//               total_tokens}}
// With encoding_format base64 each embedding is the base64 of its
// little-endian float32 bytes; the client asks for base64 whenever the
// caller names no format, and decodes it itself (openai-node 5.x,
// resources/embeddings.js create).
//
// dimensions (Matryoshka truncation) needs a model that says it was
// trained for it; no GGUF key says so, so only the model's own width is
// accepted and any other value is refused (INVALID_ARGUMENT, param
// "dimensions").

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/openai/openai_json.h"

namespace paceline::server::openai {

// The most inputs one request may carry (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingsRequest {
  std::string model;  // "" when absent
  // The inputs: texts (string, string[]) or token ids (number[],
  // number[][]); exactly one of the two is non-empty.
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> token_inputs;
  bool base64 = false;  // encoding_format "base64"
  std::optional<int64_t> dimensions;
};

// InvalidParam naming the field for a body that does not parse, a missing
// or empty input, a wrong type, more than kMaxEmbeddingInputs inputs, a
// negative token id, an encoding_format other than float / base64, or
// dimensions < 1.
absl::StatusOr<EmbeddingsRequest> ParseEmbeddingsRequest(
    absl::string_view body);

// dimensions against a model of width `n_embd` (see the top).
absl::Status CheckDimensions(const EmbeddingsRequest& request, int64_t n_embd);

// The base64 of `v`'s little-endian float32 bytes.
std::string Float32Base64(absl::Span<const float> v);

// CreateEmbeddingResponse for `vectors` (input order).
Json EmbeddingsJson(const std::vector<std::vector<float>>& vectors,
                    int64_t prompt_tokens, absl::string_view model,
                    bool base64);

}  // namespace paceline::server::openai

#endif  // PACELINE_SERVER_OPENAI_EMBEDDINGS_REQUEST_H_
