#include "engine/cpu/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/status_macros.h"
#include "engine/cpu/ops.h"

namespace paceline::engine::cpu {
namespace {

// The routing order: higher logit first, the lower index on a tie; NaN
// counts as -inf.
struct RouteKey {
  float logit;
  int64_t index;
  bool Before(const RouteKey& o) const {
    return logit > o.logit || (logit == o.logit && index < o.index);
  }
};

float Sane(float x) {
  return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
}

// Writes the k first experts of one token's order, by k passes: the j-th
// is the first of those after the (j-1)-th. O(k * n_expert), no scratch.
void TopK(const float* logits, int64_t n_expert, int64_t k, int32_t* out) {
  RouteKey prev{std::numeric_limits<float>::infinity(), -1};
  for (int64_t j = 0; j < k; ++j) {
    RouteKey best{0, -1};
    for (int64_t e = 0; e < n_expert; ++e) {
      const RouteKey key{Sane(logits[e]), e};
      if (j > 0 && !prev.Before(key)) continue;
      if (best.index < 0 || key.Before(best)) best = key;
    }
    out[j] = static_cast<int32_t>(best.index);
    prev = best;
  }
}

}  // namespace

void RouteTokens(const float* logits, int64_t n_tokens, int64_t n_expert,
                 int64_t k, int32_t* experts, float* weights) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* l = logits + t * n_expert;
    int32_t* ex = experts + t * k;
    float* w = weights + t * k;
    TopK(l, n_expert, k, ex);
    // The softmax's normaliser cancels in the renormalisation.
    const double top = Sane(l[ex[0]]);
    const auto unnormalised = [&](int64_t j) {
      return std::isfinite(top) ? std::exp(Sane(l[ex[j]]) - top) : 1.0;
    };
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += unnormalised(j);
    for (int64_t j = 0; j < k; ++j) {
      w[j] = static_cast<float>(unnormalised(j) / sum);
    }
  }
}

MoeFfn::MoeFfn(const ModelConfig& config, int64_t max_tokens)
    : n_embd_(config.n_embd),
      n_expert_(config.n_expert),
      k_(config.n_expert_used),
      n_ff_exp_(config.n_ff_exp),
      activation_(config.ffn_activation) {
  const size_t t = static_cast<size_t>(max_tokens);
  const size_t rows = t * static_cast<size_t>(k_);
  logits_.resize(t * n_expert_);
  experts_.resize(rows);
  weights_.resize(rows);
  counts_.resize(n_expert_);
  offsets_.resize(n_expert_ + 1);
  row_token_.resize(rows);
  row_of_.resize(rows);
  x_.resize(rows * n_embd_);
  gate_.resize(rows * n_ff_exp_);
  up_.resize(rows * n_ff_exp_);
  y_.resize(rows * n_embd_);
}

void MoeFfn::GroupByExpert(int64_t n) {
  std::fill(counts_.begin(), counts_.end(), 0);
  for (int64_t i = 0; i < n * k_; ++i) ++counts_[experts_[i]];
  offsets_[0] = 0;
  for (int64_t e = 0; e < n_expert_; ++e) {
    offsets_[e + 1] = offsets_[e] + counts_[e];
  }
  std::fill(counts_.begin(), counts_.end(), 0);  // reused as fill levels
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k_; ++j) {
      const int32_t e = experts_[t * k_ + j];
      const int64_t row = offsets_[e] + counts_[e]++;
      row_token_[row] = static_cast<int32_t>(t);
      row_of_[t * k_ + j] = row;
    }
  }
}

namespace {

// Adds `bias` (cols) to each of `rows` rows; nothing when it is null.
void AddRowBias(const float* bias, int64_t rows, int64_t cols, float* x) {
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) AddInPlace(x + r * cols, bias, cols);
}

// Expert e's slice of a stacked bias of `width` per expert (null stays).
const float* ExpertBias(const float* stacked, int64_t e, int64_t width) {
  return stacked == nullptr ? nullptr : stacked + e * width;
}

}  // namespace

absl::Status MoeFfn::RunExpert(const ExpertWeights& e, const MoeBiases& biases,
                               int64_t expert, int64_t begin, int64_t rows,
                               ThreadPool& pool, MatMulScratch& scratch) {
  const float* x = &x_[begin * n_embd_];
  float* gate = &gate_[begin * n_ff_exp_];
  float* up = &up_[begin * n_ff_exp_];
  if (e.gate.type == e.up.type) {
    const WeightView ws[] = {e.gate, e.up};
    float* const ys[] = {gate, up};
    RETURN_IF_ERROR(MatMulShared(ws, x, rows, ys, pool, scratch));
  } else {
    RETURN_IF_ERROR(MatMul(e.gate, x, rows, gate, pool, scratch));
    RETURN_IF_ERROR(MatMul(e.up, x, rows, up, pool, scratch));
  }
  AddRowBias(ExpertBias(biases.gate, expert, n_ff_exp_), rows, n_ff_exp_, gate);
  AddRowBias(ExpertBias(biases.up, expert, n_ff_exp_), rows, n_ff_exp_, up);
  GatedActivation(activation_, gate, up, rows * n_ff_exp_, gate);
  float* y = &y_[begin * n_embd_];
  RETURN_IF_ERROR(MatMul(e.down, gate, rows, y, pool, scratch));
  AddRowBias(ExpertBias(biases.down, expert, n_embd_), rows, n_embd_, y);
  return absl::OkStatus();
}

absl::Status MoeFfn::Run(const MoeLayerMatrices& m, const MoeBiases& biases,
                         const float* h, int64_t n, float* out,
                         ThreadPool& pool, MatMulScratch& scratch) {
  const auto bytes = [](const WeightView& w) {
    return static_cast<uint64_t>(w.rows) * w.row_bytes;
  };
  RETURN_IF_ERROR(MatMul(m.router, h, n, logits_.data(), pool, scratch));
  AddRowBias(biases.router, n, n_expert_, logits_.data());
  RouteTokens(logits_.data(), n, n_expert_, k_, experts_.data(),
              weights_.data());
  GroupByExpert(n);
  const size_t row_bytes = static_cast<size_t>(n_embd_) * sizeof(float);
  for (int64_t row = 0; row < n * k_; ++row) {
    std::memcpy(&x_[row * n_embd_], h + row_token_[row] * n_embd_, row_bytes);
  }
  last_run_bytes_ = bytes(m.router);
  last_run_experts_ = 0;
  for (int64_t e = 0; e < n_expert_; ++e) {
    const int64_t rows = offsets_[e + 1] - offsets_[e];
    if (rows == 0) continue;
    const ExpertWeights& ew = m.experts[e];
    RETURN_IF_ERROR(
        RunExpert(ew, biases, e, offsets_[e], rows, pool, scratch));
    last_run_bytes_ += bytes(ew.gate) + bytes(ew.up) + bytes(ew.down);
    ++last_run_experts_;
  }
  // Each token's outputs in its own rank order: batch-invariant sums.
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * n_embd_;
    for (int64_t j = 0; j < k_; ++j) {
      const float w = weights_[t * k_ + j];
      const float* y = &y_[row_of_[t * k_ + j] * n_embd_];
      if (j == 0) {
        for (int64_t i = 0; i < n_embd_; ++i) o[i] = w * y[i];
      } else {
        for (int64_t i = 0; i < n_embd_; ++i) o[i] += w * y[i];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace paceline::engine::cpu
