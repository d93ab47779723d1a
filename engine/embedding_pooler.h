#ifndef PACELINE_ENGINE_EMBEDDING_POOLER_H_
#define PACELINE_ENGINE_EMBEDDING_POOLER_H_

// One sequence's embedding, pooled from the hidden rows (engine.h,
// SequenceSlice::num_hidden) of its prompt as the steps compute it, chunk
// by chunk: mean over every prompt token, the first token's (cls), or the
// last token's, as the model's pooling type says (model_config.h). The
// result is L2-normalized, as llama.cpp's server answers OpenAI's
// /v1/embeddings (its embd_normalize default, 2: Euclidean).
//
// Mean and cls need the hidden rows of the prompt from position 0, so a
// sequence pooled that way must compute its whole prompt (no cached
// prefix); last needs only the prompt's final token.
//
// Thread-compatible: a value owned by one request.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/model/model_config.h"

namespace paceline::engine {

class EmbeddingPooler {
 public:
  // `pooling` must not be kNone; `width` is n_embd.
  EmbeddingPooler(PoolingType pooling, int64_t width);

  // Hidden rows (its last ones) a slice over prompt positions
  // [position_begin, +token_count) of a prompt of `prompt_tokens` tokens
  // must ask for; 0 when pooling needs none of them.
  static int32_t RowsNeeded(PoolingType pooling, int32_t position_begin,
                            int32_t token_count, int32_t prompt_tokens);
  // Whether pooling needs the prompt computed from position 0.
  static bool NeedsWholePrompt(PoolingType pooling) {
    return pooling == PoolingType::kMean || pooling == PoolingType::kCls;
  }

  // Adds the rows a slice asked for (RowsNeeded of it): `rows` holds
  // (n, width) floats for positions [last_position + 1 - n, last_position].
  void Add(int32_t last_position, absl::Span<const float> rows);
  PoolingType pooling() const { return pooling_; }
  // Forgets what was added (the sequence is recomputed after preemption).
  void Reset();
  // The pooled vector, L2-normalized (all zeros stays zeros).
  std::vector<float> Finish() const;

 private:
  const PoolingType pooling_;
  const int64_t width_;
  std::vector<double> sum_;  // (width) mean: the sum; cls / last: the row
  int64_t count_ = 0;        // rows summed (mean)
};

// x / |x|_2 in place (left alone when |x| is 0).
void NormalizeL2(absl::Span<float> x);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_EMBEDDING_POOLER_H_
