// The CPU mixture-of-experts FFN (engine/cpu/moe_ffn.h): routing against a
// plain softmax / sort / renormalise written here, the expert sum against
// float loops over DequantizeRow'd weights, and batch invariance (a token
// alone and in a batch give the same bits, in MoeFfn and through the
// engine).

#include "engine/cpu/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/cpu/cpu_engine.h"
#include "engine/cpu/cpu_features.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/weights.h"
#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

// The textbook routing: softmax over all experts (double), experts sorted
// by probability (stable, so ties keep the lower index first), the first k
// kept, their probabilities divided by their sum.
void ReferenceRoute(const float* logits, int64_t n_expert, int64_t k,
                    std::vector<int32_t>* experts,
                    std::vector<double>* weights) {
  double max = logits[0];
  for (int64_t e = 1; e < n_expert; ++e) max = std::max<double>(max, logits[e]);
  std::vector<double> p(n_expert);
  double z = 0;
  for (int64_t e = 0; e < n_expert; ++e) z += p[e] = std::exp(logits[e] - max);
  for (double& v : p) v /= z;
  std::vector<int32_t> order(n_expert);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  experts->assign(order.begin(), order.begin() + k);
  double sum = 0;
  for (int32_t e : *experts) sum += p[e];
  weights->clear();
  for (int32_t e : *experts) weights->push_back(p[e] / sum);
}

void ExpectRoutesLikeReference(const std::vector<float>& logits,
                               int64_t n_tokens, int64_t n_expert, int64_t k) {
  std::vector<int32_t> experts(n_tokens * k);
  std::vector<float> weights(n_tokens * k);
  RouteTokens(logits.data(), n_tokens, n_expert, k, experts.data(),
              weights.data());
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<int32_t> want_e;
    std::vector<double> want_w;
    ReferenceRoute(&logits[t * n_expert], n_expert, k, &want_e, &want_w);
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(experts[t * k + j], want_e[j])
          << "token " << t << " rank " << j;
      EXPECT_NEAR(weights[t * k + j], want_w[j], 1e-6)
          << "token " << t << " rank " << j;
    }
  }
}

TEST(RouteTokensTest, MatchesSoftmaxTopKRenormalised) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 2);
  for (const auto& [n_expert, k] : std::vector<std::pair<int64_t, int64_t>>{
           {8, 2}, {16, 4}, {5, 5}, {64, 8}, {3, 1}}) {
    SCOPED_TRACE(testing::Message() << n_expert << " experts, k " << k);
    const int64_t n_tokens = 40;
    std::vector<float> logits(n_tokens * n_expert);
    for (float& l : logits) l = normal(rng);
    ExpectRoutesLikeReference(logits, n_tokens, n_expert, k);
  }
}

TEST(RouteTokensTest, TiesGoToTheLowerExpert) {
  // Three experts tied for first: the two lowest win, equally weighted.
  const std::vector<float> logits = {1, 3, 3, 0, 3, -2};
  ExpectRoutesLikeReference(logits, 1, 6, 2);
  std::vector<int32_t> experts(2);
  std::vector<float> weights(2);
  RouteTokens(logits.data(), 1, 6, 2, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(weights, (std::vector<float>{0.5f, 0.5f}));
  // All equal: experts 0..k-1, each 1/k.
  const std::vector<float> flat(8, 0.25f);
  std::vector<int32_t> e3(3);
  std::vector<float> w3(3);
  RouteTokens(flat.data(), 1, 8, 3, e3.data(), w3.data());
  EXPECT_EQ(e3, (std::vector<int32_t>{0, 1, 2}));
  for (float w : w3) EXPECT_FLOAT_EQ(w, 1.0f / 3);
}

TEST(RouteTokensTest, OneExpertGetsTheWholeWeight) {
  const std::vector<float> logits = {0.1f, -4, 7, 6.9f};
  std::vector<int32_t> e(1);
  std::vector<float> w(1);
  RouteTokens(logits.data(), 1, 4, 1, e.data(), w.data());
  EXPECT_EQ(e[0], 2);
  EXPECT_EQ(w[0], 1.0f);
}

// A small qwen3moe shape: 6 experts, 2 used.
ModelConfig SmallMoeConfig() {
  ModelConfig c;
  c.architecture = "qwen3moe";
  c.name = "small-moe";
  c.n_layers = 2;
  c.n_embd = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.n_ff = 32;
  c.n_vocab = 200;
  c.context_length = 256;
  c.rope_layout = RopeLayout::kNeoxHalves;
  c.rope_dim = 16;
  c.rope_freq_base = 1e6;
  c.rms_norm_eps = 1e-6;
  c.tied_output = true;
  c.qk_norm = true;
  c.n_expert = 6;
  c.n_expert_used = 2;
  c.n_ff_exp = 32;
  return c;
}

// y = W x with W's rows dequantized, in double.
std::vector<double> RefMatVec(const WeightView& w,
                              const std::vector<double>& x) {
  std::vector<float> row(w.cols);
  std::vector<double> y(w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    const auto* bytes = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
    EXPECT_TRUE(DequantizeRow(w.type, bytes, row.data(), w.cols).ok());
    double s = 0;
    for (int64_t c = 0; c < w.cols; ++c) s += row[c] * x[c];
    y[r] = s;
  }
  return y;
}

// One token's MoE FFN from the layer's weights, in double.
std::vector<double> RefMoe(const LayerWeights& l, const ModelConfig& c,
                           const float* h, std::set<int32_t>* used) {
  const std::vector<double> x(h, h + c.n_embd);
  const std::vector<double> logits_d = RefMatVec(l.ffn_gate_inp, x);
  const std::vector<float> logits(logits_d.begin(), logits_d.end());
  std::vector<int32_t> experts;
  std::vector<double> weights;
  ReferenceRoute(logits.data(), c.n_expert, c.n_expert_used, &experts,
                 &weights);
  std::vector<double> out(c.n_embd, 0.0);
  for (size_t j = 0; j < experts.size(); ++j) {
    used->insert(experts[j]);
    const ExpertWeights& e = l.experts[experts[j]];
    const std::vector<double> g = RefMatVec(e.gate, x);
    const std::vector<double> u = RefMatVec(e.up, x);
    std::vector<double> a(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    const std::vector<double> y = RefMatVec(e.down, a);
    for (int64_t i = 0; i < c.n_embd; ++i) out[i] += weights[j] * y[i];
  }
  return out;
}

MoeLayerMatrices MatricesOf(const LayerWeights& l) {
  return {l.ffn_gate_inp, l.experts};
}

std::vector<float> RandomRows(int64_t n, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> h(n * dim);
  for (float& v : h) v = normal(rng);
  return h;
}

class MoeFfnTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MoeFfnTest, MatchesPerTokenReferenceAndReadsTheUnionOfExperts) {
  const ModelConfig c = SmallMoeConfig();
  auto weights = ModelWeights::Dummy(c, GetParam(), 9);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const LayerWeights& l = (*weights)->layers()[0];
  const int64_t n = 12;
  const std::vector<float> h = RandomRows(n, c.n_embd, 4);
  ThreadPool pool(2);
  MatMulScratch scratch;
  MoeFfn moe(c, 32);
  std::vector<float> out(n * c.n_embd);
  ASSERT_TRUE(moe.Run(MatricesOf(l), MoeBiases{}, h.data(), n, out.data(), pool,
                      scratch)
                  .ok());
  std::set<int32_t> used;
  // Quantized weights multiply 8-bit activations (matmul.h): looser.
  const double tol = GetParam() == GgmlType::kF32 ? 1e-5 : 2e-2;
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<double> want = RefMoe(l, c, &h[t * c.n_embd], &used);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (int64_t i = 0; i < c.n_embd; ++i) {
      ASSERT_NEAR(out[t * c.n_embd + i], want[i], tol * scale)
          << "token " << t << " dim " << i;
    }
  }
  EXPECT_EQ(moe.last_run_experts(), static_cast<int64_t>(used.size()));
  const auto bytes = [](const WeightView& w) { return w.rows * w.row_bytes; };
  EXPECT_EQ(moe.last_run_bytes(),
            bytes(l.ffn_gate_inp) + used.size() * (*weights)->ExpertBytes(0));
}

// Every token's output bit for bit the same alone as in the batch, at every
// ISA level.
TEST_P(MoeFfnTest, TokenAloneEqualsTokenInBatch) {
  const ModelConfig c = SmallMoeConfig();
  auto weights = ModelWeights::Dummy(c, GetParam(), 9);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const MoeLayerMatrices m = MatricesOf((*weights)->layers()[1]);
  const int64_t n = 20;
  const std::vector<float> h = RandomRows(n, c.n_embd, 8);
  ThreadPool pool(2);
  MatMulScratch scratch;
  MoeFfn moe(c, n);
  for (int l = static_cast<int>(GetCpuFeatures().max_level); l >= 0; --l) {
    SetIsaLevelCap(static_cast<IsaLevel>(l));
    SCOPED_TRACE(IsaLevelName(static_cast<IsaLevel>(l)));
    std::vector<float> batch(n * c.n_embd);
    ASSERT_TRUE(
        moe.Run(m, MoeBiases{}, h.data(), n, batch.data(), pool, scratch).ok());
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> alone(c.n_embd);
      ASSERT_TRUE(moe.Run(m, MoeBiases{}, &h[t * c.n_embd], 1, alone.data(),
                          pool, scratch)
                      .ok());
      EXPECT_EQ(moe.last_run_experts(), c.n_expert_used);
      ASSERT_TRUE(
          std::equal(alone.begin(), alone.end(), batch.begin() + t * c.n_embd))
          << "token " << t;
    }
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
}

INSTANTIATE_TEST_SUITE_P(Types, MoeFfnTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kQ8_0,
                                           GgmlType::kQ4_0, GgmlType::kBF16),
                         [](const ::testing::TestParamInfo<GgmlType>& info) {
                           return std::string(
                               GetGgmlTypeTraits(info.param).name);
                         });

// Through the engine: three prompts in one step give each prompt's logits
// of a step of its own, bit for bit, and a step reads each selected expert
// once (fewer bytes than one token's worth times the tokens).
TEST(CpuEngineMoeTest, BatchedStepMatchesEachPromptAlone) {
  const ModelConfig c = SmallMoeConfig();
  auto weights = ModelWeights::Dummy(c, GgmlType::kQ8_0, 21);
  ASSERT_TRUE(weights.ok()) << weights.status();
  const uint64_t per_token = (*weights)->MatMulBytesPerToken();
  CpuEngineOptions options;
  options.num_blocks = 32;
  options.max_tokens_per_step = 64;
  options.num_threads = 2;
  auto engine = CpuEngine::Create(std::move(*weights), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mt19937 rng(2);
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 3, 99, 150, 2, 8, 8, 31}, {44}, {7, 7, 120, 13, 60}};
  const int64_t v = c.n_vocab;
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> blocks = {static_cast<int32_t>(i)};
    ForwardBatch b;
    b.tokens = prompts[i];
    b.sequences.push_back(
        {.token_begin = 0,
         .token_count = static_cast<int32_t>(prompts[i].size()),
         .position_begin = 0,
         .block_table = blocks,
         .num_logits = 1});
    alone.emplace_back(v);
    ASSERT_TRUE((*engine)->Forward(b, absl::MakeSpan(alone.back())).ok());
  }
  ForwardBatch batch;
  std::vector<std::vector<int32_t>> tables;
  for (size_t i = 0; i < prompts.size(); ++i) {
    tables.push_back({static_cast<int32_t>(10 + i)});
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    batch.sequences.push_back(
        {.token_begin = static_cast<int32_t>(batch.tokens.size()),
         .token_count = static_cast<int32_t>(prompts[i].size()),
         .position_begin = 0,
         .block_table = tables[i],
         .num_logits = 1});
    batch.tokens.insert(batch.tokens.end(), prompts[i].begin(),
                        prompts[i].end());
  }
  std::vector<float> logits(prompts.size() * v);
  ASSERT_TRUE((*engine)->Forward(batch, absl::MakeSpan(logits)).ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(
        std::equal(alone[i].begin(), alone[i].end(), logits.begin() + i * v))
        << "prompt " << i;
  }
  const uint64_t step = (*engine)->last_step_weight_bytes();
  EXPECT_LT(step, batch.tokens.size() * per_token);
  EXPECT_GE(step, per_token);
}

}  // namespace
}  // namespace paceline::engine::cpu
