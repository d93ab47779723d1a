#include "engine/cpu/ops.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/cpu/cpu_features.h"
#include "engine/model/model_config.h"
#include "gtest/gtest.h"

// Each op against a plain reference written here in double, on random
// inputs, within atol + rtol * |ref|.

namespace paceline::engine::cpu {
namespace {

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

void ExpectClose(const std::vector<float>& got,
                 const std::vector<double>& ref) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(std::fabs(got[i] - ref[i]), kAtol + kRtol * std::fabs(ref[i]))
        << "element " << i << ": got " << got[i] << ", want " << ref[i];
  }
}

TEST(RmsNormTest, MatchesReference) {
  constexpr int64_t kRows = 5, kDim = 96;
  const float eps = 1e-5f;
  const std::vector<float> x = Random(kRows * kDim, 1, 3.0f);
  const std::vector<float> w = Random(kDim, 2);
  std::vector<double> ref(kRows * kDim);
  for (int64_t r = 0; r < kRows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < kDim; ++i)
      ss += double{x[r * kDim + i]} * x[r * kDim + i];
    const double scale = 1.0 / std::sqrt(ss / kDim + eps);
    for (int64_t i = 0; i < kDim; ++i) {
      ref[r * kDim + i] = x[r * kDim + i] * scale * w[i];
    }
  }
  std::vector<float> out(kRows * kDim);
  RmsNorm(x.data(), w.data(), kRows, kDim, eps, out.data());
  ExpectClose(out, ref);
  // In place gives the same bits.
  std::vector<float> in_place = x;
  RmsNorm(in_place.data(), w.data(), kRows, kDim, eps, in_place.data());
  EXPECT_EQ(in_place, out);
}

// Reference RoPE: pair i of a head at position p rotates by p * freq[i]
// and is scaled by mscale; the pair's two members are (2i, 2i + 1) for
// adjacent pairs and (i, i + rope_dim / 2) for NeoX.
std::vector<double> RefRope(const std::vector<float>& x, int64_t n_tokens,
                            int64_t n_heads, int64_t head_dim,
                            const std::vector<int32_t>& pos, RopeLayout layout,
                            const std::vector<double>& freq, double mscale) {
  std::vector<double> out(x.begin(), x.end());
  const int64_t half = static_cast<int64_t>(freq.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      double* v = out.data() + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double theta = pos[t] * freq[i];
        const int64_t a = layout == RopeLayout::kAdjacentPairs ? 2 * i : i;
        const int64_t b =
            layout == RopeLayout::kAdjacentPairs ? 2 * i + 1 : i + half;
        const double x0 = v[a], x1 = v[b];
        v[a] = mscale * (x0 * std::cos(theta) - x1 * std::sin(theta));
        v[b] = mscale * (x0 * std::sin(theta) + x1 * std::cos(theta));
      }
    }
  }
  return out;
}

struct RopeCase {
  RopeLayout layout;
  int64_t head_dim;
  int64_t rope_dim;
  double base;
  double linear_factor;  // 1: no scaling
};

ModelConfig RopeConfig(const RopeCase& c) {
  ModelConfig config;
  config.rope_layout = c.layout;
  config.rope_dim = c.rope_dim;
  config.rope_freq_base = c.base;
  config.rope_scaling =
      c.linear_factor == 1 ? RopeScaling::kNone : RopeScaling::kLinear;
  config.rope_scaling_factor = c.linear_factor;
  return config;
}

// Rotates random heads with `p` and compares with RefRope(freq, mscale).
void ExpectRope(const RopeParams& p, int64_t head_dim,
                const std::vector<double>& freq, double mscale) {
  constexpr int64_t kTokens = 7, kHeads = 3;
  const std::vector<int32_t> pos = {0, 1, 2, 17, 100, 511, 4000};
  std::vector<float> x = Random(kTokens * kHeads * head_dim, 3);
  const std::vector<double> ref =
      RefRope(x, kTokens, kHeads, head_dim, pos, p.layout, freq, mscale);
  std::vector<float> cos(kTokens * p.rope_dim / 2),
      sin(kTokens * p.rope_dim / 2);
  RopeAngles(pos.data(), kTokens, p, cos.data(), sin.data());
  ApplyRope(x.data(), kTokens, kHeads, head_dim, p, cos.data(), sin.data());
  // Angles up to 4000 rad lose ~4000 * 2^-24 in float: a looser atol.
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(x[i] - ref[i]), 1e-5 + kRtol * std::fabs(ref[i]))
        << "element " << i;
  }
}

class RopeTest : public testing::TestWithParam<RopeCase> {};

// The published RoPE (and linear scaling: positions divided by the
// factor), computed here.
TEST_P(RopeTest, MatchesReference) {
  const RopeCase c = GetParam();
  std::vector<double> freq(c.rope_dim / 2);
  for (size_t i = 0; i < freq.size(); ++i) {
    freq[i] = std::pow(c.base, -2.0 * i / c.rope_dim) / c.linear_factor;
  }
  ExpectRope(RopeParamsFromConfig(RopeConfig(c)), c.head_dim, freq, 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RopeTest,
    testing::Values(RopeCase{RopeLayout::kAdjacentPairs, 8, 8, 10000, 1},
                    RopeCase{RopeLayout::kAdjacentPairs, 64, 64, 500000, 1},
                    RopeCase{RopeLayout::kNeoxHalves, 64, 64, 1e6, 1},
                    RopeCase{RopeLayout::kNeoxHalves, 128, 128, 1e6, 4},
                    // Partial rotation: dims past rope_dim pass through.
                    RopeCase{RopeLayout::kAdjacentPairs, 32, 16, 10000, 1},
                    RopeCase{RopeLayout::kNeoxHalves, 32, 16, 10000, 2}));

// YaRN and frequency factors reach the rotation through the table: its
// per-pair frequencies and its magnitude (rope_table_test checks the
// table itself against the published formulas).
TEST(RopeTest, AppliesTheTableFrequenciesAndMagnitude) {
  ModelConfig c = RopeConfig({RopeLayout::kNeoxHalves, 64, 64, 1e6, 4});
  c.rope_scaling = RopeScaling::kYarn;
  c.rope_original_context = 1024;
  c.rope_attn_factor = 0.9;
  std::vector<float> factors(32);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.25f * i;
  const RopeParams p = RopeParamsFromConfig(c, factors);
  EXPECT_NE(p.table.mscale, 1.0);
  ExpectRope(p, 64, p.table.inv_freq, p.table.mscale);
}

TEST(RopeTest, PositionZeroIsIdentity) {
  ModelConfig c = RopeConfig({RopeLayout::kNeoxHalves, 16, 16, 10000, 1});
  const RopeParams p = RopeParamsFromConfig(c);
  const int32_t pos = 0;
  std::vector<float> x = Random(16, 4), cos(8), sin(8);
  const std::vector<float> before = x;
  RopeAngles(&pos, 1, p, cos.data(), sin.data());
  ApplyRope(x.data(), 1, 1, 16, p, cos.data(), sin.data());
  EXPECT_EQ(x, before);
}

TEST(RopeTest, ParamsFromConfig) {
  const RopeParams p = RopeParamsFromConfig(
      RopeConfig({RopeLayout::kNeoxHalves, 64, 64, 1e6, 4}));
  EXPECT_EQ(p.layout, RopeLayout::kNeoxHalves);
  EXPECT_EQ(p.rope_dim, 64);
  ASSERT_EQ(p.table.inv_freq.size(), 32u);
  EXPECT_EQ(p.table.inv_freq[0], 0.25);
  EXPECT_EQ(p.table.mscale, 1.0);
}

// At every instruction-set level the CPU runs (the exp is vectorized), over
// more than one of SwiGlu's chunks, gates past exp's overflow included, and
// in place.
TEST(SwiGluTest, MatchesReferenceAtEveryLevel) {
  constexpr int64_t kN = 700;
  std::vector<float> gate = Random(kN, 5, 4.0f);
  const std::vector<float> up = Random(kN, 6);
  gate[3] = -95.0f;  // exp(95) overflows: silu is -0
  gate[4] = 95.0f;
  std::vector<double> ref(kN);
  for (int64_t i = 0; i < kN; ++i) {
    ref[i] = gate[i] / (1.0 + std::exp(-double{gate[i]})) * up[i];
  }
  for (IsaLevel level :
       {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (SetIsaLevelCap(level) != level) continue;
    SCOPED_TRACE(IsaLevelName(level));
    std::vector<float> out(kN);
    SwiGlu(gate.data(), up.data(), kN, out.data());
    ExpectClose(out, ref);
    std::vector<float> in_place = gate;
    SwiGlu(in_place.data(), up.data(), kN, in_place.data());
    EXPECT_EQ(in_place, out);
  }
  SetIsaLevelCap(IsaLevel::kAvx512);
}

TEST(ElementwiseTest, AddBiasAndAddInPlace) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> bias = {10, 20, 30};
  AddBias(x.data(), bias.data(), 2, 3);
  EXPECT_EQ(x, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  const std::vector<float> y = {1, 1, 1, 1, 1, 1};
  AddInPlace(x.data(), y.data(), 6);
  EXPECT_EQ(x, (std::vector<float>{12, 23, 34, 15, 26, 37}));
}

}  // namespace
}  // namespace paceline::engine::cpu
