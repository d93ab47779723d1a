// Engine-side sampling (row_sampling.h): SampleRow against a plain sort-based
// statement of its rule (exact, ties and signed zeros included), against
// the host sampler (the same token except near rounding boundaries), and
// WeightExp against std::exp. Rows and parameters come from a fixed-seed
// mt19937 with integer-only derivations, so every run checks the same cases.

#include "engine/sampling/row_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/sampling/row_sampling_math.h"
#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"
#include "tests/testing/scripted_masks.h"

namespace paceline::engine {
namespace {

using sampling::Mass;
using sampling::Weight;

// The rule of row_sampling.h written the obvious way: drop the ids the
// mask does not allow, sort the rest by rank, cut prefixes, draw in id
// order.
int32_t SortedRule(const std::vector<float>& z, const RowSampling& s) {
  const int32_t v = static_cast<int32_t>(z.size());
  for (int32_t id = 0; id < v; ++id) {
    if (!std::isfinite(z[id])) return -1 - id;
  }
  std::vector<int32_t> rank;
  for (int32_t id = 0; id < v; ++id) {
    const bool allowed =
        s.allowed == nullptr || (s.allowed[id / 32] >> (id % 32)) & 1u;
    if (allowed) rank.push_back(id);
  }
  if (rank.empty()) return kNoAllowedToken;
  std::stable_sort(rank.begin(), rank.end(),
                   [&](int32_t a, int32_t b) { return z[a] > z[b]; });
  const float max = z[rank[0]];
  if (s.temperature == 0.0f) return rank[0];
  size_t keep = rank.size();
  if (s.top_k > 0 && s.top_k < v) {
    keep = std::min(keep, static_cast<size_t>(s.top_k));
  }
  if (s.top_p < 1.0f) {
    uint64_t kept = 0;
    for (size_t j = 0; j < keep; ++j) {
      kept += Mass(Weight(z[rank[j]], max, s.temperature));
    }
    const double target = static_cast<double>(s.top_p) * kept;
    uint64_t running = 0;
    for (size_t j = 0; j < keep; ++j) {
      running += Mass(Weight(z[rank[j]], max, s.temperature));
      if (static_cast<double>(running) >= target) {
        keep = j + 1;
        break;
      }
    }
  }
  std::vector<uint64_t> mass(v, 0);
  for (size_t j = 0; j < keep; ++j) {
    const float w = Weight(z[rank[j]], max, s.temperature);
    if (w >= s.min_p) mass[rank[j]] = Mass(w);
  }
  const uint64_t total = std::accumulate(mass.begin(), mass.end(), uint64_t{0});
  const auto t = static_cast<uint64_t>(s.uniform * static_cast<double>(total));
  uint64_t running = 0;
  int32_t last = -1;
  for (int32_t id = 0; id < v; ++id) {
    if (mass[id] == 0) continue;
    running += mass[id];
    last = id;
    if (running > t) return id;
  }
  return last;
}

// Deterministic cases: rows of `vocab` logits, either continuous or on a
// coarse grid (many ties, both signs of zero), and random parameters.
class Cases {
 public:
  explicit Cases(uint32_t seed) : rng_(seed) {}

  std::vector<float> Row(int32_t vocab) {
    std::vector<float> z(vocab);
    const bool grid = rng_() % 2 == 0;
    for (float& x : z) {
      const int32_t r = static_cast<int32_t>(rng_() % 2001) - 1000;
      x = grid ? static_cast<float>(r / 250) * 0.5f : r * 0.01f;
      if (grid && x == 0.0f && rng_() % 2 == 0) x = -0.0f;
    }
    return z;
  }

  RowSampling Params(int32_t vocab) {
    RowSampling s;
    s.in_engine = true;
    const uint32_t kind = rng_() % 8;
    s.temperature =
        kind == 0 ? 0.0f : 0.25f * static_cast<float>(1 + rng_() % 8);
    if (kind & 1) s.top_k = static_cast<int32_t>(1 + rng_() % (vocab + 2));
    if (kind & 2) s.top_p = 0.05f * static_cast<float>(1 + rng_() % 20);
    if (kind & 4) s.min_p = 0.02f * static_cast<float>(rng_() % 10);
    s.uniform = static_cast<double>(rng_() >> 5) * 0x1p-27;
    return s;
  }

  // A token mask for a third of the cases (else empty): dense, sparse, or
  // (rarely) allowing nothing.
  std::vector<uint32_t> Mask(int32_t vocab) {
    if (rng_() % 3 != 0) return {};
    std::vector<uint32_t> words((vocab + 31) / 32);
    const uint32_t kind = rng_() % 40;
    for (uint32_t& w : words) {
      w = kind == 0 ? 0u : kind % 2 == 0 ? rng_() : rng_() & rng_() & rng_();
    }
    return words;
  }

 private:
  std::mt19937 rng_;
};

TEST(RowSamplingTest, MatchesTheSortedStatementOfTheRule) {
  Cases cases(7);
  for (int i = 0; i < 1500; ++i) {
    const int32_t vocab = 1 + static_cast<int32_t>(i % 300);
    const std::vector<float> z = cases.Row(vocab);
    RowSampling s = cases.Params(vocab);
    const std::vector<uint32_t> mask = cases.Mask(vocab);
    if (!mask.empty()) s.allowed = mask.data();
    ASSERT_EQ(SampleRow(z, s), SortedRule(z, s))
        << "case " << i << ": vocab " << vocab << " T " << s.temperature
        << " top_k " << s.top_k << " top_p " << s.top_p << " min_p " << s.min_p
        << " u " << s.uniform << " masked " << !mask.empty();
  }
}

TEST(RowSamplingTest, TopKTiesGoToLowerIdsAndSignedZerosTie) {
  // Ranks: 2.0 (id 3), then the zeros in id order (ids 0, 1, 4), then -1.
  const std::vector<float> z = {0.0f, -0.0f, -1.0f, 2.0f, 0.0f};
  RowSampling s;
  s.in_engine = true;
  s.temperature = 1000.0f;  // nearly flat weights
  s.top_k = 3;              // keeps ids 3, 0, 1
  for (double u : {0.0, 0.3, 0.5, 0.7, 0.9999}) {
    s.uniform = u;
    const int32_t token = SampleRow(z, s);
    EXPECT_TRUE(token == 0 || token == 1 || token == 3) << token;
  }
  s.uniform = 0.0;
  EXPECT_EQ(SampleRow(z, s), 0);  // the first survivor in id order
  s.uniform = 0.9999;
  EXPECT_EQ(SampleRow(z, s), 3);
  s.temperature = 0.0f;
  EXPECT_EQ(SampleRow(std::vector<float>{-0.0f, 0.0f}, s), 0);
}

TEST(RowSamplingTest, TopPKeepsTheShortestPrefixThatReachesTheTarget) {
  // Weights relative to the top token: 1, e^-1, e^-2, e^-3.
  const std::vector<float> z = {-3.0f, 0.0f, -1.0f, -2.0f};
  RowSampling s;
  s.in_engine = true;
  s.temperature = 1.0f;
  const double total = 1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0);
  // Just above the top token's share: ids 1 and 2 survive.
  s.top_p = static_cast<float>(1.0 / total + 0.01);
  s.uniform = 0.9999;
  EXPECT_EQ(SampleRow(z, s), 2);
  s.uniform = 0.0;
  EXPECT_EQ(SampleRow(z, s), 1);
  // Just below it: the top token alone.
  s.top_p = static_cast<float>(1.0 / total - 0.01);
  s.uniform = 0.9999;
  EXPECT_EQ(SampleRow(z, s), 1);
}

TEST(RowSamplingTest, MinPDropsUnlikelyTokens) {
  const std::vector<float> z = {0.0f, -0.5f, -5.0f};
  RowSampling s;
  s.in_engine = true;
  s.temperature = 1.0f;
  s.min_p = 0.1f;  // e^-5 < 0.1 <= e^-0.5
  s.uniform = 0.9999999;
  EXPECT_EQ(SampleRow(z, s), 1);
  s.min_p = 0.0f;
  EXPECT_EQ(SampleRow(z, s), 2);
}

TEST(RowSamplingTest, NonFiniteLogitNamesTheFirstOne) {
  std::vector<float> z(10, 1.0f);
  z[6] = std::numeric_limits<float>::infinity();
  z[8] = std::numeric_limits<float>::quiet_NaN();
  RowSampling s;
  s.in_engine = true;
  for (float t : {0.0f, 1.0f}) {
    s.temperature = t;
    const int32_t token = SampleRow(z, s);
    ASSERT_LT(token, 0);
    EXPECT_EQ(NonFiniteLogitId(token), 6);
  }
}

TEST(RowSamplingTest, AgreesWithTheHostSamplerAwayFromRoundingBoundaries) {
  // Same rows, parameters, token masks and uniforms as SequenceSampler
  // draws with: the rules differ only in how masses round, so
  // disagreements are rare; a mask that allows nothing fails both.
  Cases cases(11);
  std::mt19937 rng(13);
  SamplerScratch scratch;
  int disagreements = 0;
  constexpr int kCases = 2000;
  for (int i = 0; i < kCases; ++i) {
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 500);
    std::vector<float> z(vocab);
    for (float& x : z) x = static_cast<float>(rng() % 100000) * 1e-4f - 5.0f;
    RowSampling row = cases.Params(vocab);
    SamplingParams p;
    p.temperature = row.temperature;
    p.top_k = row.top_k;
    p.top_p = row.top_p;
    p.min_p = row.min_p;
    p.seed = rng();
    const std::vector<uint32_t> mask = cases.Mask(vocab);
    if (!mask.empty()) {
      p.mask = std::make_shared<testing::FixedMask>(mask);
      row.allowed = mask.data();
    }
    absl::StatusOr<SequenceSampler> host =
        SequenceSampler::Create(p, vocab, {});
    ASSERT_TRUE(host.ok()) << host.status();
    row.uniform = SamplingUniform(p.seed, host->step());
    absl::StatusOr<SampleResult> want = host->Sample(z, &scratch);
    const int32_t got = SampleRow(z, row);
    if (!want.ok()) {
      EXPECT_EQ(got, kNoAllowedToken) << "case " << i;
      EXPECT_NE(want.status().message().find("token mask allows no token"),
                std::string::npos)
          << want.status();
      continue;
    }
    if (row.allowed != nullptr) {
      ASSERT_TRUE(MaskAllows(row.allowed, want->token)) << "case " << i;
    }
    if (row.temperature == 0.0f) {
      ASSERT_EQ(got, want->token) << "greedy case " << i;
    } else if (got != want->token) {
      ++disagreements;
    }
  }
  EXPECT_LE(disagreements, kCases / 200) << disagreements << " of " << kCases;
}

TEST(RowSamplingTest, WeightExpIsWithinTwoUlpOfExp) {
  EXPECT_EQ(sampling::WeightExp(0.0f), 1.0f);
  EXPECT_EQ(sampling::WeightExp(-0.0f), 1.0f);
  EXPECT_EQ(sampling::WeightExp(-65.0f), 0.0f);
  float worst = 0.0f;
  for (float x = -64.0f; x <= 0.0f; x += 0.000977f) {
    const double want = std::exp(static_cast<double>(x));
    const float got = sampling::WeightExp(x);
    const double ulp = std::nextafter(static_cast<float>(want), 2.0f) -
                       static_cast<float>(want);
    worst = std::max(worst, static_cast<float>(std::fabs(got - want) / ulp));
  }
  EXPECT_LE(worst, 2.0f);
}

}  // namespace
}  // namespace paceline::engine
