#include "engine/embedding_pooler.h"

#include <algorithm>
#include <cmath>

namespace paceline::engine {

EmbeddingPooler::EmbeddingPooler(PoolingType pooling, int64_t width)
    : pooling_(pooling), width_(width), sum_(static_cast<size_t>(width)) {}

int32_t EmbeddingPooler::RowsNeeded(PoolingType pooling, int32_t position_begin,
                                    int32_t token_count,
                                    int32_t prompt_tokens) {
  switch (pooling) {
    case PoolingType::kNone:
      return 0;
    case PoolingType::kMean:
      return token_count;
    case PoolingType::kCls:
      return position_begin == 0 ? token_count : 0;
    case PoolingType::kLast:
      return position_begin + token_count == prompt_tokens ? 1 : 0;
  }
  return 0;
}

void EmbeddingPooler::Add(int32_t last_position, absl::Span<const float> rows) {
  const int64_t n = static_cast<int64_t>(rows.size()) / width_;
  if (n == 0) return;
  const int64_t first_position = last_position + 1 - n;
  if (pooling_ == PoolingType::kMean) {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < width_; ++i) sum_[i] += rows[r * width_ + i];
    }
    count_ += n;
    return;
  }
  // cls: the row of position 0; last: the final row given.
  const int64_t r = pooling_ == PoolingType::kCls ? -first_position : n - 1;
  if (r < 0 || r >= n) return;
  for (int64_t i = 0; i < width_; ++i) sum_[i] = rows[r * width_ + i];
  count_ = 1;
}

void EmbeddingPooler::Reset() {
  std::fill(sum_.begin(), sum_.end(), 0.0);
  count_ = 0;
}

std::vector<float> EmbeddingPooler::Finish() const {
  std::vector<float> out(sum_.size());
  const double scale = count_ > 0 ? 1.0 / static_cast<double>(count_) : 0.0;
  for (size_t i = 0; i < sum_.size(); ++i) {
    out[i] = static_cast<float>(sum_[i] * scale);
  }
  NormalizeL2(absl::MakeSpan(out));
  return out;
}

void NormalizeL2(absl::Span<float> x) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  if (ss <= 0) return;
  const double inv = 1.0 / std::sqrt(ss);
  for (float& v : x) v = static_cast<float>(v * inv);
}

}  // namespace paceline::engine
