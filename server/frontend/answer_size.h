#ifndef PACELINE_SERVER_FRONTEND_ANSWER_SIZE_H_
#define PACELINE_SERVER_FRONTEND_ANSWER_SIZE_H_

// The bound on an answer assembled whole in memory before it is sent (a
// non-streamed OpenAI answer, gRPC's Complete): its size is estimated when
// the request is admitted, from what each choice may generate, and a
// request whose estimate passes max_response_bytes is refused before any
// work is done. A streamed answer is never held whole (max_unread_bytes
// bounds what a slow reader leaves behind) and is not checked.
//
// The estimate per generated token is a bound for ordinary text on either
// wire format (OpenAI's JSON, the CompleteResponse message): the text's
// bytes, then, with logprobs, the sampled token's entry and one per
// alternative, at their JSON sizes with a long token string.

#include <cstdint>
#include <optional>
#include <string>

#include "scheduler/request.h"

namespace paceline::server {

inline constexpr int64_t kAnswerTextBytesPerToken = 8;
inline constexpr int64_t kAnswerLogprobBytes = 64;      // the sampled token's
inline constexpr int64_t kAnswerTopLogprobBytes = 48;   // each alternative

// The bytes one generated token may add to an answer of `spec`.
int64_t AnswerBytesPerToken(const scheduler::RequestSpec& spec);

// The most bytes the choice `spec` may add to an answer: max_tokens times
// AnswerBytesPerToken.
int64_t EstimatedAnswerBytes(const scheduler::RequestSpec& spec);

// Why an answer of `choices` choices, each like `spec`, may not be held
// whole under `limit` (max_response_bytes; 0 = no limit): "the answer could
// take N bytes (...), over the server's max_response_bytes L"; nullopt when
// it fits. The caller adds what to lower and its API's status.
std::optional<std::string> AnswerOverLimit(int64_t choices,
                                           const scheduler::RequestSpec& spec,
                                           int64_t limit);

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_ANSWER_SIZE_H_
