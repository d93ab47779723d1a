// The RoPE table against the published formulas, computed here the way
// the YaRN paper's reference code (and Hugging Face's
// _compute_yarn_parameters) states them: frequencies of pair i from
// base^(2i / d), interpolated ones divided by the factor, a linear ramp
// between the floor/ceil correction dims of beta_fast and beta_slow, and
// the attention factor 0.1 ln(factor) + 1.

#include "engine/model/rope_table.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

using ::testing::HasSubstr;

ModelConfig Yarn(int64_t dim, double base, double factor, int64_t orig) {
  ModelConfig c;
  c.rope_dim = dim;
  c.rope_freq_base = base;
  c.rope_scaling = RopeScaling::kYarn;
  c.rope_scaling_factor = factor;
  c.rope_original_context = orig;
  return c;
}

// The dimension whose wavelength fits `rotations` turns in `orig` tokens.
double FindCorrectionDim(double rotations, double dim, double base,
                         double orig) {
  return dim * std::log(orig / (rotations * 2 * M_PI)) / (2 * std::log(base));
}

struct Reference {
  std::vector<double> inv_freq;
  double attention_factor;
};

Reference PublishedYarn(double dim, double base, double factor, double orig,
                        double beta_fast, double beta_slow, double ext) {
  double low = std::floor(FindCorrectionDim(beta_fast, dim, base, orig));
  double high = std::ceil(FindCorrectionDim(beta_slow, dim, base, orig));
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  Reference r;
  for (int i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, 2.0 * i / dim);
    const double extrapolation = 1 / pos_freq;
    const double interpolation = 1 / (factor * pos_freq);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = (1 - ramp) * ext;
    r.inv_freq.push_back(interpolation * (1 - extrapolation_factor) +
                         extrapolation * extrapolation_factor);
  }
  r.attention_factor = 0.1 * std::log(factor) + 1;
  return r;
}

void ExpectTable(const RopeTable& t, const Reference& r) {
  ASSERT_EQ(t.inv_freq.size(), r.inv_freq.size());
  for (size_t i = 0; i < r.inv_freq.size(); ++i) {
    EXPECT_NEAR(t.inv_freq[i], r.inv_freq[i], 1e-12 * r.inv_freq[i])
        << "pair " << i;
  }
  EXPECT_NEAR(t.mscale, r.attention_factor, 1e-12);
}

// The oracle file's rope (qwen2-yarn-f32: head 64, base 1e6, factor 4,
// original context 1024): correction dims 3.77 -> 3 and 11.80 -> 12, so
// pairs 0..3 keep their frequency and 12.. are divided by 4.
TEST(RopeTableTest, YarnMatchesThePublishedFormula) {
  const RopeTable t = MakeRopeTable(Yarn(64, 1e6, 4, 1024));
  ExpectTable(t, PublishedYarn(64, 1e6, 4, 1024, 32, 1, 1));
  for (int i = 0; i <= 3; ++i) {
    EXPECT_DOUBLE_EQ(t.inv_freq[i], std::pow(1e6, -2.0 * i / 64));
  }
  for (int i = 12; i < 32; ++i) {
    EXPECT_DOUBLE_EQ(t.inv_freq[i], std::pow(1e6, -2.0 * i / 64) / 4);
  }
  EXPECT_GT(t.inv_freq[7], std::pow(1e6, -14.0 / 64) / 4);
  EXPECT_LT(t.inv_freq[7], std::pow(1e6, -14.0 / 64));
  EXPECT_DOUBLE_EQ(t.mscale, 1 + 0.1 * std::log(4.0));
}

TEST(RopeTableTest, YarnKeysFromTheFile) {
  ModelConfig c = Yarn(128, 10000, 8, 4096);
  c.yarn_beta_fast = 16;
  c.yarn_beta_slow = 2;
  c.yarn_ext_factor = 0.5;
  ExpectTable(MakeRopeTable(c), PublishedYarn(128, 10000, 8, 4096, 16, 2, 0.5));

  // An explicit attention factor replaces the derived one, and
  // rope.scaling.attn_factor multiplies whichever applies.
  c.yarn_attn_factor = 1.5;
  c.rope_attn_factor = 0.5;
  EXPECT_DOUBLE_EQ(MakeRopeTable(c).mscale, 0.75);

  // ext_factor 0: plain interpolation, no derived magnitude.
  c.yarn_ext_factor = 0;
  c.yarn_attn_factor = 0;
  const RopeTable t = MakeRopeTable(c);
  EXPECT_DOUBLE_EQ(t.mscale, 0.5);
  for (size_t i = 0; i < t.inv_freq.size(); ++i) {
    EXPECT_DOUBLE_EQ(t.inv_freq[i], std::pow(10000.0, -2.0 * i / 128) / 8);
  }
}

TEST(RopeTableTest, NoneLinearAndFrequencyFactors) {
  ModelConfig c;
  c.rope_dim = 8;
  c.rope_freq_base = 500000;
  const std::vector<float> factors = {1, 2, 4, 8};
  RopeTable t = MakeRopeTable(c, factors);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(t.inv_freq[i],
                     std::pow(500000.0, -2.0 * i / 8) / factors[i]);
  }
  EXPECT_EQ(t.mscale, 1.0);

  c.rope_scaling = RopeScaling::kLinear;
  c.rope_scaling_factor = 2;
  t = MakeRopeTable(c);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(t.inv_freq[i], std::pow(500000.0, -2.0 * i / 8) / 2);
  }

  // Yarn with Llama 3 factors: the factors divide the extrapolated
  // frequency before the ramp mixes it (llama.cpp's order).
  ModelConfig y = Yarn(8, 500000, 4, 64);
  const RopeTable plain = MakeRopeTable(y);
  t = MakeRopeTable(y, factors);
  for (int i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(t.inv_freq[i], plain.inv_freq[i] / factors[i]);
  }
}

TEST(RopeTableTest, CheckRejectsWhatCannotBeBuilt) {
  EXPECT_TRUE(CheckRopeConfig(Yarn(64, 1e6, 4, 1024)).ok());
  ModelConfig c = Yarn(64, 1e6, 4, 0);
  EXPECT_THAT(CheckRopeConfig(c).message(), HasSubstr("original context"));
  c = Yarn(64, 1e6, 4, 1024);
  c.yarn_beta_slow = 64;
  EXPECT_THAT(CheckRopeConfig(c).message(), HasSubstr("beta_slow"));
  c = Yarn(64, 1e6, 4, 1024);
  c.yarn_ext_factor = 2;
  EXPECT_THAT(CheckRopeConfig(c).message(), HasSubstr("ext_factor"));
  c = Yarn(63, 1e6, 4, 1024);
  EXPECT_EQ(CheckRopeConfig(c).code(), absl::StatusCode::kInvalidArgument);
  c = Yarn(64, 1e6, 0, 1024);
  EXPECT_THAT(CheckRopeConfig(c).message(), HasSubstr("scaling factor"));
}

}  // namespace
}  // namespace paceline::engine
