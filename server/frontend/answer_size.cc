#include "server/frontend/answer_size.h"

#include "absl/strings/str_cat.h"

namespace paceline::server {

int64_t AnswerBytesPerToken(const scheduler::RequestSpec& spec) {
  int64_t bytes = kAnswerTextBytesPerToken;
  if (spec.sampling.logprobs) {
    bytes += kAnswerLogprobBytes +
             kAnswerTopLogprobBytes * int64_t{spec.sampling.top_logprobs};
  }
  return bytes;
}

int64_t EstimatedAnswerBytes(const scheduler::RequestSpec& spec) {
  return int64_t{spec.stop.max_tokens} * AnswerBytesPerToken(spec);
}

std::optional<std::string> AnswerOverLimit(int64_t choices,
                                           const scheduler::RequestSpec& spec,
                                           int64_t limit) {
  const int64_t estimate = choices * EstimatedAnswerBytes(spec);
  if (limit <= 0 || estimate <= limit) return std::nullopt;
  return absl::StrCat("the answer could take ", estimate, " bytes (",
                      choices, " choice(s) x ", spec.stop.max_tokens,
                      " tokens x up to ", AnswerBytesPerToken(spec),
                      " bytes a token), over the server's "
                      "max_response_bytes ",
                      limit);
}

}  // namespace paceline::server
