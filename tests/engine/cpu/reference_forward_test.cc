#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "gtest/gtest.h"
#include "tests/engine/cpu/engine_test_util.h"

// The engine's forward pass against a naive one written here from the
// architectures' definitions: one sequence, no paging, no batching, every
// sum in double, weights read through DequantizeRow. Small random models
// of each architecture (llama with adjacent-pair RoPE, qwen2 with QKV bias
// and NeoX RoPE, qwen3 with per-head Q/K RMSNorm and an explicit head size,
// GQA everywhere).

namespace paceline::engine::cpu {
namespace {

using Vec = std::vector<double>;

// A weight matrix as doubles, row = output feature.
struct Matrix {
  int64_t rows = 0, cols = 0;
  Vec w;  // (rows, cols)
};

Matrix Load(const WeightView& v) {
  Matrix m{v.rows, v.cols, Vec(v.rows * v.cols)};
  std::vector<float> row(v.cols);
  for (int64_t r = 0; r < v.rows; ++r) {
    EXPECT_TRUE(
        DequantizeRow(v.type,
                      static_cast<const uint8_t*>(v.data) + r * v.row_bytes,
                      row.data(), v.cols)
            .ok());
    for (int64_t c = 0; c < v.cols; ++c) m.w[r * v.cols + c] = row[c];
  }
  return m;
}

Vec Apply(const Matrix& m, const Vec& x) {
  Vec y(m.rows, 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) y[r] += m.w[r * m.cols + c] * x[c];
  }
  return y;
}

Vec RmsNorm(const Vec& x, const std::vector<float>& w, double eps,
            int64_t offset = 0, int64_t n = -1) {
  if (n < 0) n = static_cast<int64_t>(x.size());
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[offset + i] * x[offset + i];
  const double scale = 1.0 / std::sqrt(ss / n + eps);
  Vec y(x);
  for (int64_t i = 0; i < n; ++i) y[offset + i] = x[offset + i] * scale * w[i];
  return y;
}

void Rope(Vec& x, int64_t n_heads, const ModelConfig& c, int64_t pos) {
  const int64_t half = c.rope_dim / 2;
  const double scale = c.rope_scaling == RopeScaling::kLinear
                           ? 1.0 / c.rope_scaling_factor
                           : 1.0;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* v = &x[h * c.head_dim];
    for (int64_t i = 0; i < half; ++i) {
      const double theta =
          pos * scale * std::pow(c.rope_freq_base, -2.0 * i / c.rope_dim);
      const bool adjacent = c.rope_layout == RopeLayout::kAdjacentPairs;
      const int64_t a = adjacent ? 2 * i : i;
      const int64_t b = adjacent ? 2 * i + 1 : i + half;
      const double x0 = v[a], x1 = v[b];
      v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  }
}

// Logits after every position of `tokens`.
std::vector<Vec> ReferenceForward(const ModelWeights& weights,
                                  const std::vector<int32_t>& tokens) {
  const ModelConfig& c = weights.config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t group = c.n_heads / c.n_kv_heads;
  std::vector<Vec> x(n);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> row(c.n_embd);
    EXPECT_TRUE(weights.Embed(tokens[t], row.data()).ok());
    x[t].assign(row.begin(), row.end());
  }
  for (const LayerWeights& l : weights.layers()) {
    const Matrix wq = Load(l.attn_q), wk = Load(l.attn_k), wv = Load(l.attn_v),
                 wo = Load(l.attn_output), wg = Load(l.ffn_gate),
                 wu = Load(l.ffn_up), wd = Load(l.ffn_down);
    std::vector<Vec> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const Vec h = RmsNorm(x[t], l.attn_norm, c.rms_norm_eps);
      q[t] = Apply(wq, h);
      k[t] = Apply(wk, h);
      v[t] = Apply(wv, h);
      if (c.qkv_bias) {
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += l.q_bias[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += l.k_bias[i];
        for (size_t i = 0; i < v[t].size(); ++i) v[t][i] += l.v_bias[i];
      }
      if (c.qk_norm) {
        for (int64_t hd = 0; hd < c.n_heads; ++hd) {
          q[t] = RmsNorm(q[t], l.q_norm, c.rms_norm_eps, hd * c.head_dim,
                         c.head_dim);
        }
        for (int64_t hd = 0; hd < c.n_kv_heads; ++hd) {
          k[t] = RmsNorm(k[t], l.k_norm, c.rms_norm_eps, hd * c.head_dim,
                         c.head_dim);
        }
      }
      Rope(q[t], c.n_heads, c, t);
      Rope(k[t], c.n_kv_heads, c, t);
    }
    for (int64_t t = 0; t < n; ++t) {
      Vec att(c.n_heads * c.head_dim, 0.0);
      for (int64_t hd = 0; hd < c.n_heads; ++hd) {
        const int64_t kvh = hd / group;
        Vec s(t + 1);
        double max = -1e300;
        for (int64_t p = 0; p <= t; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < c.head_dim; ++i) {
            dot += q[t][hd * c.head_dim + i] * k[p][kvh * c.head_dim + i];
          }
          s[p] = dot / std::sqrt(double(c.head_dim));
          max = std::max(max, s[p]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - max));
        for (int64_t p = 0; p <= t; ++p) {
          for (int64_t i = 0; i < c.head_dim; ++i) {
            att[hd * c.head_dim + i] += s[p] / sum * v[p][kvh * c.head_dim + i];
          }
        }
      }
      const Vec o = Apply(wo, att);
      for (int64_t i = 0; i < c.n_embd; ++i) x[t][i] += o[i];
      const Vec h = RmsNorm(x[t], l.ffn_norm, c.rms_norm_eps);
      Vec g = Apply(wg, h);
      const Vec u = Apply(wu, h);
      for (size_t i = 0; i < g.size(); ++i)
        g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const Vec d = Apply(wd, g);
      for (int64_t i = 0; i < c.n_embd; ++i) x[t][i] += d[i];
    }
  }
  const Matrix out = Load(weights.output());
  std::vector<Vec> logits(n);
  for (int64_t t = 0; t < n; ++t) {
    logits[t] =
        Apply(out, RmsNorm(x[t], weights.output_norm(), c.rms_norm_eps));
  }
  return logits;
}

struct RefCase {
  std::string name;
  std::string arch;
  GgmlType type;
  int64_t rope_dim;       // 0: head_dim
  double linear_scaling;  // 1: none
  double atol, rtol;
};

ModelConfig Config(const RefCase& rc) {
  ModelConfig c;
  c.architecture = rc.arch;
  c.name = rc.name;
  c.n_layers = 2;
  c.n_embd = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = rc.arch == "qwen3" ? 32 : 16;
  c.n_ff = 160;
  c.n_vocab = 320;
  c.context_length = 256;
  c.rope_layout =
      rc.arch == "llama" ? RopeLayout::kAdjacentPairs : RopeLayout::kNeoxHalves;
  c.rope_dim = rc.rope_dim > 0 ? rc.rope_dim : c.head_dim;
  c.rope_freq_base = rc.arch == "llama" ? 10000.0 : 1e6;
  if (rc.linear_scaling != 1) {
    c.rope_scaling = RopeScaling::kLinear;
    c.rope_scaling_factor = rc.linear_scaling;
  }
  c.rms_norm_eps = 1e-6;
  c.tied_output = rc.arch != "llama";
  c.qkv_bias = rc.arch == "qwen2";
  c.qk_norm = rc.arch == "qwen3";
  return c;
}

class ReferenceForwardTest : public ::testing::TestWithParam<RefCase> {};

TEST_P(ReferenceForwardTest, LogitsMatchNaiveForward) {
  const RefCase& rc = GetParam();
  auto weights = ModelWeights::Dummy(Config(rc), rc.type, 2024);
  ASSERT_TRUE(weights.ok()) << weights.status();
  std::shared_ptr<const ModelWeights> shared = std::move(*weights);
  std::mt19937 rng(9);
  std::vector<int32_t> tokens(21);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 320);
  const std::vector<Vec> ref = ReferenceForward(*shared, tokens);

  CpuEngineOptions options;

  options.kv_type = GgmlType::kF32;  // the naive forward's exact K/V
  options.block_size = 4;  // several blocks even for 21 positions
  options.num_blocks = 16;
  options.max_tokens_per_step = 32;
  options.num_threads = 2;
  auto engine = CpuEngine::Create(shared, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<int32_t> table = {3, 14, 0, 9, 6, 11};  // scattered

  // Token by token, logits at every position.
  std::vector<float> logits(320);
  ForwardBatch batch;
  batch.sequences.resize(1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    batch.tokens = {tokens[t]};
    batch.sequences[0] =
        SequenceSlice{.token_begin = 0,
                      .token_count = 1,
                      .position_begin = static_cast<int32_t>(t),
                      .block_table = table,
                      .num_logits = 1};
    ASSERT_TRUE((*engine)->Forward(batch, absl::MakeSpan(logits)).ok());
    double max_ref = 0;
    for (double r : ref[t]) max_ref = std::max(max_ref, std::fabs(r));
    for (int64_t i = 0; i < 320; ++i) {
      ASSERT_LE(std::fabs(logits[i] - ref[t][i]),
                rc.atol * max_ref + rc.rtol * std::fabs(ref[t][i]))
          << "position " << t << " logit " << i << ": got " << logits[i]
          << ", want " << ref[t][i];
    }
  }
  // The whole sequence in one step: its last logits too.
  batch.tokens = tokens;
  batch.sequences[0].token_count = static_cast<int32_t>(tokens.size());
  batch.sequences[0].position_begin = 0;
  ASSERT_TRUE((*engine)->Forward(batch, absl::MakeSpan(logits)).ok());
  double max_ref = 0;
  for (double r : ref.back()) max_ref = std::max(max_ref, std::fabs(r));
  for (int64_t i = 0; i < 320; ++i) {
    ASSERT_LE(std::fabs(logits[i] - ref.back()[i]),
              rc.atol * max_ref + rc.rtol * std::fabs(ref.back()[i]))
        << "one-shot logit " << i;
  }
}

// atol is relative to the row's largest |logit| (random models have small
// logits); rtol to each logit. Q8_0 also quantizes the activations to int8,
// hence its looser bounds.
INSTANTIATE_TEST_SUITE_P(
    Archs, ReferenceForwardTest,
    ::testing::Values(
        RefCase{"llama_f32", "llama", GgmlType::kF32, 0, 1, 1e-5, 1e-5},
        RefCase{"llama_partial_rope_linear", "llama", GgmlType::kF32, 8, 2.0,
                1e-5, 1e-5},
        RefCase{"qwen2_f32", "qwen2", GgmlType::kF32, 0, 1, 1e-5, 1e-5},
        RefCase{"qwen2_f16", "qwen2", GgmlType::kF16, 0, 1, 1e-5, 1e-5},
        RefCase{"qwen3_f32", "qwen3", GgmlType::kF32, 0, 1, 1e-5, 1e-5},
        RefCase{"qwen3_bf16", "qwen3", GgmlType::kBF16, 0, 1, 1e-5, 1e-5},
        RefCase{"qwen3_q8_0", "qwen3", GgmlType::kQ8_0, 0, 1, 0.05, 0.05}),
    [](const ::testing::TestParamInfo<RefCase>& info) {
      return info.param.name;
    });

}  // namespace
}  // namespace paceline::engine::cpu
