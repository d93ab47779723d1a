#ifndef PACELINE_SERVER_FRONTEND_EMBEDDING_CALL_H_
#define PACELINE_SERVER_FRONTEND_EMBEDDING_CALL_H_

// What Frontend::Embed hands back: the vectors of an embedding call, one
// per input, each the model's pooled embedding of its prompt, L2-normalized
// (engine/embedding_pooler.h). The scheduler runs each input as a
// prefill-only request (scheduler/request.h, RequestSpec::embed); the
// sinks here collect their FinishInfo::embedding on the engine thread and
// hand the finished call to the intake pool, where `done` runs.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"

namespace paceline::server {

struct EmbeddingsResult {
  std::vector<std::vector<float>> vectors;  // (inputs, n_embd), input order
  int64_t prompt_tokens = 0;                // over every input
};

// Called exactly once, on the intake pool: the result, or why the call
// failed (the first of its requests to fail, or an abort: a drain, the
// call's lifetime).
using EmbeddingsDone = std::function<void(absl::StatusOr<EmbeddingsResult>)>;

}  // namespace paceline::server

#endif  // PACELINE_SERVER_FRONTEND_EMBEDDING_CALL_H_
