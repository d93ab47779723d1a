#include "server/answer_size.h"

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

}  // namespace paceline::server
