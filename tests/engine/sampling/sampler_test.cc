// The sampler: each filter keeps exactly the set it promises (checked with
// many draws under a fixed seed, so nothing here is flaky), temperature
// sampling matches softmax(logits / T), penalties change logits exactly as
// documented, logit bias adds what it lists, a token mask keeps every draw
// inside it, draws depend only on (seed, step), and bad rows fail one step
// without harming the sampler.

#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "tests/testing/scripted_masks.h"

namespace paceline::engine {
namespace {

SequenceSampler Make(const SamplingParams& params, int32_t vocab,
                     std::vector<int32_t> prompt = {}) {
  absl::StatusOr<SequenceSampler> s =
      SequenceSampler::Create(params, vocab, prompt);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

int32_t Next(SequenceSampler& s, absl::Span<const float> row,
             SamplerScratch* scratch) {
  absl::StatusOr<SampleResult> r = s.Sample(row, scratch);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->token : -1;
}

std::vector<int32_t> Draws(const SamplingParams& params,
                           const std::vector<float>& row, int draws) {
  SamplerScratch scratch;
  SequenceSampler s = Make(params, static_cast<int32_t>(row.size()));
  std::vector<int32_t> tokens;
  for (int i = 0; i < draws; ++i) tokens.push_back(Next(s, row, &scratch));
  return tokens;
}

std::set<int32_t> Support(const SamplingParams& params,
                          const std::vector<float>& row, int draws) {
  std::vector<int32_t> tokens = Draws(params, row, draws);
  return std::set<int32_t>(tokens.begin(), tokens.end());
}

// Logits uniform in [-scale, scale), the same on every platform (mt19937's
// output is fixed by the standard; its distributions are not, so none is
// used).
std::vector<float> RandomRow(int32_t vocab, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::vector<float> row(vocab);
  for (float& x : row) {
    x = scale * (2.0f * static_cast<float>(gen() >> 8) * 0x1p-24f - 1.0f);
  }
  return row;
}

std::vector<float> LogOf(const std::vector<double>& probs) {
  std::vector<float> row;
  for (double p : probs) row.push_back(static_cast<float>(std::log(p)));
  return row;
}

// Ids in the sampler's rank order: larger logit first, then lower id.
std::vector<int32_t> Ranked(const std::vector<float>& row) {
  std::vector<int32_t> ids(row.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  return ids;
}

// The reference nucleus: the smallest rank-order prefix of the first
// `top_k` ids (all when 0) whose softmax(row / t) mass, renormalized over
// them, reaches top_p.
std::set<int32_t> ReferenceNucleus(const std::vector<float>& row, double t,
                                   int32_t top_k, double top_p) {
  std::vector<int32_t> ids = Ranked(row);
  if (top_k > 0) ids.resize(top_k);
  std::vector<double> w;
  double total = 0;
  for (int32_t id : ids) {
    w.push_back(std::exp((row[id] - row[ids[0]]) / t));
    total += w.back();
  }
  std::set<int32_t> out;
  double mass = 0;
  for (size_t i = 0; i < ids.size() && mass < top_p * total; ++i) {
    mass += w[i];
    out.insert(ids[i]);
  }
  return out;
}

// Pearson's chi-square of observed counts against probabilities.
double ChiSquare(const std::vector<int>& counts,
                 const std::vector<double>& probs, int n) {
  double chi = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double expected = probs[i] * n;
    chi += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi;
}

std::vector<double> Softmax(const std::vector<float>& row, double t) {
  const double max = *std::max_element(row.begin(), row.end());
  std::vector<double> p;
  double total = 0;
  for (float x : row) {
    p.push_back(std::exp((x - max) / t));
    total += p.back();
  }
  for (double& x : p) x /= total;
  return p;
}

TEST(SamplingRngTest, MatchesTheDocumentedFormula) {
  // Computed independently from the header's formula (Python big ints).
  EXPECT_EQ(SamplingRandomBits(0, 0), 0xa706dd2f4d197e6fULL);
  EXPECT_EQ(SamplingRandomBits(0, 1), 0xb382a305f4414f5eULL);
  EXPECT_EQ(SamplingRandomBits(42, 7), 0xbc16a3d4cc48678eULL);
  EXPECT_EQ(SamplingRandomBits(~uint64_t{0}, 123456789), 0x4a400bf28932824cULL);
  EXPECT_EQ(SamplingUniform(42, 7),
            static_cast<double>(0xbc16a3d4cc48678eULL >> 11) * 0x1p-53);
}

TEST(SamplingRngTest, UniformInUnitInterval) {
  double sum = 0;
  constexpr int kN = 100000;
  for (int i = 0; i < kN; ++i) {
    const double u = SamplingUniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
}

TEST(SamplerTest, GreedyPicksArgmaxTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(Draws(p, {1, 5, 3, 5, -2}, 5),
            (std::vector<int32_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(Draws(p, {7, 7, 7}, 1), (std::vector<int32_t>{0}));
  EXPECT_EQ(Draws(p, {-3, -1, -2}, 1), (std::vector<int32_t>{1}));
}

TEST(SamplerTest, TopK1EqualsGreedy) {
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams top1;
  top1.temperature = 1.3f;
  top1.top_k = 1;
  top1.seed = 7;
  SamplerScratch scratch;
  SequenceSampler a = Make(greedy, 1000);
  SequenceSampler b = Make(top1, 1000);
  for (uint32_t i = 0; i < 50; ++i) {
    std::vector<float> row = RandomRow(1000, i, 5);
    row[10 + i] = row[20 + i] = 100;  // a tie for the top
    const int32_t expected = Next(a, row, &scratch);
    EXPECT_EQ(expected, static_cast<int32_t>(10 + i));
    EXPECT_EQ(Next(b, row, &scratch), expected) << "row " << i;
  }
}

TEST(SamplerTest, TopKRestrictsSupportToTheKLargest) {
  const std::vector<float> row = RandomRow(50, 1, 2);
  const std::vector<int32_t> ranked = Ranked(row);
  SamplingParams p;
  p.top_k = 5;
  p.seed = 3;
  EXPECT_EQ(Support(p, row, 2000),
            std::set<int32_t>(ranked.begin(), ranked.begin() + 5));

  // Ties at the boundary go to the lower ids.
  p.top_k = 2;
  EXPECT_EQ(Support(p, {1, 3, 3, 3, 0}, 500), (std::set<int32_t>{1, 2}));
  // k at or past the vocabulary size is off.
  p.top_k = 5;
  EXPECT_EQ(Support(p, {1, 1, 1}, 500), (std::set<int32_t>{0, 1, 2}));
}

TEST(SamplerTest, TopKOnLargeVocabularies) {
  constexpr int32_t kVocab = 152064;
  const std::vector<float> row = RandomRow(kVocab, 9, 3);
  const std::vector<int32_t> ranked = Ranked(row);
  SamplingParams p;
  p.temperature = 0.05f;  // concentrate the draws on few tokens
  for (int32_t k : {1, 40, kVocab / 2}) {  // heap and nth_element paths
    p.top_k = k;
    const std::set<int32_t> allowed(ranked.begin(), ranked.begin() + k);
    for (int32_t t : Draws(p, row, 50)) EXPECT_TRUE(allowed.count(t)) << k;
  }
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities by id: 0.05, 0.5, 0.15, 0.3 (rank order 1, 3, 2, 0).
  const std::vector<float> row = LogOf({0.05, 0.5, 0.15, 0.3});
  SamplingParams p;
  p.seed = 11;
  p.top_p = 0.4f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{1}));
  p.top_p = 0.75f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{1, 3}));
  p.top_p = 0.85f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{1, 2, 3}));
  p.top_p = 1.0f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{0, 1, 2, 3}));

  // After top-k the mass is renormalized over the k: top-2 leaves 0.625
  // and 0.375, so 0.6 needs one token (it would need two of the full row).
  p.top_k = 2;
  p.top_p = 0.6f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{1}));
  p.top_p = 0.7f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{1, 3}));
}

TEST(SamplerTest, TopPOnLargeVocabulariesMatchesReference) {
  // Flat: a nucleus of thousands, found by partitioning everything.
  std::vector<float> flat = RandomRow(5000, 4, 0.5f);
  // Peaked: a few likely tokens hold the nucleus, the long tail is skipped.
  std::vector<float> peaked = RandomRow(20000, 5, 1);
  for (int i = 0; i < 10; ++i) peaked[i * 1999] += 9;
  // Heavy tail: one likely token, then thousands of unlikely ones that
  // carry most of the mass, so the likely ids alone cannot reach top_p.
  std::vector<float> tail = RandomRow(5000, 6, 0.25f);
  for (float& x : tail) x -= 6.5f;
  tail[1234] = 0;

  for (const std::vector<float>* row : {&flat, &peaked, &tail}) {
    for (int32_t top_k : {0, 3000}) {
      SamplingParams p;
      p.temperature = 0.8f;
      p.top_k = top_k;
      p.top_p = 0.5f;
      p.seed = 5;
      const std::set<int32_t> nucleus = ReferenceNucleus(*row, 0.8, top_k, 0.5);
      const std::vector<int32_t> tokens = Draws(p, *row, 400);
      for (int32_t t : tokens) EXPECT_TRUE(nucleus.count(t)) << t;
      const std::set<int32_t> seen(tokens.begin(), tokens.end());
      if (nucleus.size() <= 10) {
        EXPECT_EQ(seen, nucleus);
      } else {
        EXPECT_GT(seen.size() * 10, std::min<size_t>(nucleus.size(), 1000));
      }
    }
  }
}

TEST(SamplerTest, MinPThresholdIsRelativeToTheMaxProbability) {
  const std::vector<float> row = LogOf({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.seed = 2;
  p.min_p = 0.25f;  // keeps p >= 0.125
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{0, 1, 2}));
  p.min_p = 0.5f;  // keeps p >= 0.25
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{0, 1}));
  p.min_p = 1.0f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{0}));

  // After temperature: T = 2 takes square roots of the relative
  // probabilities (1, 0.77, 0.55, 0.32), so 0.5 keeps three.
  p.temperature = 2;
  p.min_p = 0.5f;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{0, 1, 2}));
  // With top-k first.
  p.top_k = 2;
  EXPECT_EQ(Support(p, row, 3000), (std::set<int32_t>{0, 1}));
}

TEST(SamplerTest, TemperatureFrequenciesMatchSoftmax) {
  const std::vector<float> row = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f};
  constexpr int kDraws = 20000;
  for (float t : {0.5f, 1.0f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 1234;
    std::vector<int> counts(row.size());
    for (int32_t token : Draws(p, row, kDraws)) ++counts[token];
    // 4 degrees of freedom: P(chi2 > 18.47) = 0.001.
    EXPECT_LT(ChiSquare(counts, Softmax(row, t), kDraws), 18.47) << t;
  }

  // Top-k renormalizes over its survivors: ids 4, 0, 1.
  SamplingParams p;
  p.top_k = 3;
  p.seed = 99;
  std::vector<int> counts(3);
  for (int32_t token : Draws(p, row, kDraws)) {
    ASSERT_TRUE(token == 4 || token == 0 || token == 1) << token;
    ++counts[token == 4 ? 0 : token == 0 ? 1 : 2];
  }
  // 2 degrees of freedom: P(chi2 > 13.82) = 0.001.
  EXPECT_LT(ChiSquare(counts, Softmax({2.0f, 1.0f, 0.5f}, 1), kDraws), 13.82);
}

TEST(SamplerTest, SameSeedSameSequenceDifferentSeedsDiffer) {
  const std::vector<float> row = RandomRow(100, 8, 1);
  SamplingParams p;
  p.seed = 77;
  const std::vector<int32_t> first = Draws(p, row, 200);
  EXPECT_EQ(Draws(p, row, 200), first);
  p.seed = 78;
  EXPECT_NE(Draws(p, row, 200), first);
}

TEST(SamplerTest, DrawsAreIndependentOfOtherSamplers) {
  constexpr int32_t kVocab = 300;
  SamplingParams pa;
  pa.seed = 1;
  pa.top_p = 0.9f;
  pa.repetition_penalty = 1.3f;
  pa.frequency_penalty = 0.2f;
  SamplingParams pb;
  pb.seed = 1;  // the same seed, other parameters and rows
  pb.temperature = 0.7f;
  pb.top_k = 20;
  pb.min_p = 0.05f;
  auto row_a = [](int step) { return RandomRow(kVocab, 1000 + step, 3); };
  auto row_b = [](int step) { return RandomRow(kVocab, 2000 + step, 3); };
  constexpr int kSteps = 40;

  std::vector<int32_t> alone_a, alone_b;
  {
    SamplerScratch scratch;
    SequenceSampler a = Make(pa, kVocab, {1, 2, 3});
    for (int i = 0; i < kSteps; ++i) {
      alone_a.push_back(Next(a, row_a(i), &scratch));
    }
    SequenceSampler b = Make(pb, kVocab);
    for (int i = 0; i < kSteps; ++i) {
      alone_b.push_back(Next(b, row_b(i), &scratch));
    }
  }
  // Interleaved on one shared scratch, b running ahead of a.
  SamplerScratch scratch;
  SequenceSampler a = Make(pa, kVocab, {1, 2, 3});
  SequenceSampler b = Make(pb, kVocab);
  std::vector<int32_t> mixed_a, mixed_b;
  for (int i = 0; i < kSteps; ++i) {
    mixed_b.push_back(Next(b, row_b(i), &scratch));
    if (i % 2 == 1) {
      mixed_a.push_back(Next(a, row_a(i - 1), &scratch));
      mixed_a.push_back(Next(a, row_a(i), &scratch));
    }
  }
  EXPECT_EQ(mixed_a, alone_a);
  EXPECT_EQ(mixed_b, alone_b);
}

TEST(SamplerTest, RebuiltSamplerContinuesWithTheSameDraws) {
  constexpr int32_t kVocab = 64;
  SamplingParams p;
  p.seed = 5;
  p.presence_penalty = 1.0f;
  p.repetition_penalty = 1.5f;
  auto row = [](int step) { return RandomRow(kVocab, 50 + step, 2); };
  const std::vector<int32_t> prompt = {4, 5, 6};
  SamplerScratch scratch;
  SequenceSampler original = Make(p, kVocab, prompt);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 20; ++i)
    tokens.push_back(Next(original, row(i), &scratch));

  SequenceSampler rebuilt = Make(p, kVocab, prompt);  // after preemption
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(rebuilt.AcceptGenerated(tokens[i]).ok());
  }
  EXPECT_EQ(rebuilt.step(), 10u);
  for (int i = 10; i < 20; ++i) {
    EXPECT_EQ(Next(rebuilt, row(i), &scratch), tokens[i]) << i;
  }
  EXPECT_EQ(rebuilt.AcceptGenerated(kVocab).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, PenaltiesAdjustLogitsExactly) {
  SamplingParams p;
  p.repetition_penalty = 2;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  SequenceSampler s = Make(p, 5, /*prompt=*/{1, 2});
  for (int32_t t : {2, 3, 3}) ASSERT_TRUE(s.AcceptGenerated(t).ok());
  std::vector<float> row = {1, 2, -2, 3, 0.5f};
  s.ApplyProcessors(absl::MakeSpan(row));
  EXPECT_EQ(row[0], 1.0f);    // never seen
  EXPECT_EQ(row[1], 1.0f);    // prompt only: 2 / 2, no presence/frequency
  EXPECT_EQ(row[2], -4.75f);  // -2 * 2 - 0.5 - 0.25 * 1
  EXPECT_EQ(row[3], 0.5f);    // 3 / 2 - 0.5 - 0.25 * 2
  EXPECT_EQ(row[4], 0.5f);
}

TEST(SamplerTest, PenaltiesChangeTheGreedyChoice) {
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.3f;
  // 2.0 vs 1.5, then 1.7, 1.4 | 1.2, 1.1 | 0.9 ...
  EXPECT_EQ(Draws(p, {2.0f, 1.5f}, 5), (std::vector<int32_t>{0, 0, 1, 0, 1}));

  // Presence ignores the prompt; repetition does not.
  SamplerScratch scratch;
  p = SamplingParams();
  p.temperature = 0;
  p.presence_penalty = 2;
  SequenceSampler presence = Make(p, 2, /*prompt=*/{0});
  EXPECT_EQ(Next(presence, std::vector<float>{1.0f, 0.5f}, &scratch), 0);
  EXPECT_EQ(Next(presence, std::vector<float>{1.0f, 0.5f}, &scratch), 1);
  EXPECT_EQ(Next(presence, std::vector<float>{1.0f, 0.5f}, &scratch), 0);

  p = SamplingParams();
  p.temperature = 0;
  p.repetition_penalty = 2;
  SequenceSampler repetition = Make(p, 2, /*prompt=*/{0});
  EXPECT_EQ(Next(repetition, std::vector<float>{1.0f, 0.6f}, &scratch), 1);
  SequenceSampler negative = Make(p, 2, /*prompt=*/{0});
  EXPECT_EQ(Next(negative, std::vector<float>{-1.0f, -1.5f}, &scratch), 1);
}

TEST(SamplerTest, LogitBiasAddsToTheListedTokensAfterPenalties) {
  SamplingParams p;
  p.frequency_penalty = 1;
  p.logit_bias = {{0, -100.0f}, {2, 3.5f}};
  SequenceSampler s = Make(p, 4);
  ASSERT_TRUE(s.AcceptGenerated(2).ok());
  std::vector<float> row = {1, 2, 3, 4};
  s.ApplyProcessors(absl::MakeSpan(row));
  EXPECT_EQ(row, (std::vector<float>{-99, 2, 5.5f, 4}));  // 3 - 1 + 3.5

  // -100 keeps a token out of greedy and sampled draws alike; +100 makes
  // it the greedy choice. The engine does not take such rows.
  SamplingParams ban;
  ban.logit_bias = {{1, -100.0f}};
  EXPECT_FALSE(Make(ban, 3).EngineCanSample());
  EXPECT_EQ(Support(ban, {0.0f, 5.0f, 0.5f}, 300), (std::set<int32_t>{0, 2}));
  ban.temperature = 0;
  EXPECT_EQ(Draws(ban, {0.0f, 5.0f, 0.5f}, 1), (std::vector<int32_t>{2}));
  SamplingParams force;
  force.temperature = 0;
  force.logit_bias = {{0, 100.0f}};
  EXPECT_EQ(Draws(force, {0.0f, 50.0f, 0.5f}, 2), (std::vector<int32_t>{0, 0}));
}

TEST(SamplerTest, TokenMaskKeepsDrawsToAllowedTokensAndFollowsThem) {
  // Alternating parity from odd: greedy takes the best allowed logit.
  SamplingParams p;
  p.temperature = 0;
  p.mask = std::make_shared<testing::ParityMask>(1);
  SequenceSampler greedy = Make(p, 6);
  EXPECT_TRUE(greedy.EngineCanSample());
  EXPECT_TRUE(greedy.has_mask());
  const std::vector<float> row = {9, 1, 2, 8, 3, 7};
  EXPECT_EQ(Draws(p, row, 4), (std::vector<int32_t>{3, 0, 3, 0}));

  // Sampled draws never leave the mask, at any temperature or filter.
  for (float t : {0.5f, 1.0f, 4.0f}) {
    SamplingParams q;
    q.temperature = t;
    q.top_k = 2;
    q.min_p = 0.01f;
    q.seed = 5;
    q.mask = std::make_shared<testing::ParityMask>(0);
    const std::vector<int32_t> tokens = Draws(q, row, 200);
    for (size_t k = 0; k < tokens.size(); ++k) {
      ASSERT_EQ(tokens[k] % 2, static_cast<int32_t>(k % 2)) << "T " << t;
    }
  }

  // Each sampler starts from its own clone of the prototype.
  SequenceSampler a = Make(p, 6);
  SequenceSampler b = Make(p, 6);
  SamplerScratch scratch;
  EXPECT_EQ(Next(a, row, &scratch), 3);
  EXPECT_EQ(Next(b, row, &scratch), 3);

  // A token the mask does not allow is refused, the state unchanged.
  EXPECT_EQ(a.AcceptGenerated(1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.step(), 1u);
  EXPECT_TRUE(a.AcceptGenerated(4).ok());
  EXPECT_EQ(Next(a, row, &scratch), 3);
}

TEST(SamplerTest, MaskThatAllowsNothingFailsTheStepOnly) {
  SamplingParams p;
  p.mask = std::make_shared<testing::NothingMask>();
  SequenceSampler s = Make(p, 4);
  SamplerScratch scratch;
  absl::StatusOr<SampleResult> r =
      s.Sample(std::vector<float>{1, 2, 3, 4}, &scratch);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "token mask allows no token at step 0"))
      << r.status();
  EXPECT_EQ(s.step(), 0u);
  // A non-finite logit is still named first.
  r = s.Sample(std::vector<float>{1, NAN, 3, 4}, &scratch);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "token 1")) << r.status();
}

TEST(SamplerTest, NonFiniteLogitFailsTheStepAndTheSamplerStaysUsable) {
  const std::vector<float> good = {0.1f, 0.7f, 0.3f, 0.2f, 0.5f};
  SamplingParams p;
  p.seed = 21;
  SamplerScratch scratch;
  SequenceSampler fresh = Make(p, 5);
  const int32_t expected = Next(fresh, good, &scratch);

  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (float temperature : {0.0f, 1.0f}) {
    p.temperature = temperature;
    SequenceSampler s = Make(p, 5);
    for (float bad : {kNan, kInf, -kInf}) {
      std::vector<float> row = good;
      row[3] = bad;
      absl::StatusOr<SampleResult> r = s.Sample(row, &scratch);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
      EXPECT_TRUE(absl::StrContains(r.status().message(), "token 3"))
          << r.status();
      EXPECT_EQ(s.step(), 0u);
    }
    if (temperature != 0) {
      EXPECT_EQ(Next(s, good, &scratch), expected);
    }
  }

  // A penalty that overflows a finite logit is caught too.
  p = SamplingParams();
  p.repetition_penalty = 10;
  SequenceSampler s = Make(p, 2, /*prompt=*/{0});
  absl::StatusOr<SampleResult> r =
      s.Sample(std::vector<float>{-3e38f, 0.0f}, &scratch);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "after penalties"))
      << r.status();
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmax) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 2.0f, 0.0f, 1.0f};
  const std::vector<double> probs = Softmax(row, 1);
  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 6;
  p.seed = 8;
  SamplerScratch scratch;
  SequenceSampler s = Make(p, 6);
  absl::StatusOr<SampleResult> r = s.Sample(row, &scratch);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->top_logprobs.size(), 6u);
  double total = 0;
  for (size_t i = 0; i < 6; ++i) {
    const TokenLogprob& e = r->top_logprobs[i];
    total += std::exp(e.logprob);
    EXPECT_NEAR(e.logprob, std::log(probs[e.token]), 1e-6);
    if (e.token == r->token) {
      EXPECT_EQ(e.logprob, r->logprob);
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-6);
  // Descending; the tie between 1 and 3 goes to the lower id.
  std::vector<int32_t> order;
  for (const TokenLogprob& e : r->top_logprobs) order.push_back(e.token);
  EXPECT_EQ(order, (std::vector<int32_t>{1, 3, 5, 0, 4, 2}));

  // Raw: temperature and penalties change the draw, not the logprobs.
  p.temperature = 0.3f;
  p.top_logprobs = 2;
  p.repetition_penalty = 3;
  SequenceSampler shaped = Make(p, 6, /*prompt=*/{1});
  absl::StatusOr<SampleResult> r2 = shaped.Sample(row, &scratch);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->top_logprobs, (std::vector<TokenLogprob>{r->top_logprobs[0],
                                                         r->top_logprobs[1]}));
  EXPECT_NEAR(r2->logprob, std::log(probs[r2->token]), 1e-6);

  // Off unless asked for.
  p = SamplingParams();
  SequenceSampler plain = Make(p, 6);
  absl::StatusOr<SampleResult> r3 = plain.Sample(row, &scratch);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->logprob, 0.0f);
  EXPECT_TRUE(r3->top_logprobs.empty());
}

TEST(SamplerTest, ValidateNamesTheField) {
  EXPECT_TRUE(Validate(SamplingParams(), 100).ok());
  SamplingParams edges;
  edges.temperature = 0;
  edges.top_k = 1000000;
  edges.top_p = 1;
  edges.min_p = 1;
  edges.repetition_penalty = kMaxRepetitionPenalty;
  edges.presence_penalty = -2;
  SamplingParams low = edges;
  low.repetition_penalty = kMinRepetitionPenalty;
  EXPECT_TRUE(Validate(low, 100).ok());
  edges.frequency_penalty = 2;
  edges.logprobs = true;
  edges.top_logprobs = kMaxTopLogprobs;
  EXPECT_TRUE(Validate(edges, 100).ok());

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::string field;
    std::function<void(SamplingParams&)> set;
  };
  const std::vector<Case> cases = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [&](SamplingParams& p) { p.temperature = nan; }},
      {"temperature", [&](SamplingParams& p) { p.temperature = inf; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_p", [&](SamplingParams& p) { p.top_p = nan; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"repetition_penalty",
       [](SamplingParams& p) { p.repetition_penalty = 0; }},
      {"repetition_penalty",
       [](SamplingParams& p) { p.repetition_penalty = 11; }},
      // Passed once and then overflowed every positive logit at run time.
      {"repetition_penalty",
       [](SamplingParams& p) { p.repetition_penalty = 1e-45f; }},
      {"repetition_penalty",
       [](SamplingParams& p) { p.repetition_penalty = 0.09f; }},
      {"presence_penalty",
       [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"presence_penalty",
       [&](SamplingParams& p) { p.presence_penalty = nan; }},
      {"frequency_penalty",
       [](SamplingParams& p) { p.frequency_penalty = -3; }},
      {"top_logprobs",
       [](SamplingParams& p) {
         p.logprobs = true;
         p.top_logprobs = kMaxTopLogprobs + 1;
       }},
      {"top_logprobs", [](SamplingParams& p) { p.top_logprobs = -1; }},
      {"top_logprobs", [](SamplingParams& p) { p.top_logprobs = 3; }},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const absl::Status status = Validate(p, 100);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_TRUE(absl::StartsWith(status.message(), c.field + " "))
        << c.field << ": " << status;
  }

  SamplingParams many;
  many.logprobs = true;
  many.top_logprobs = 10;
  const absl::Status small_vocab = Validate(many, 8);
  EXPECT_TRUE(absl::StartsWith(small_vocab.message(), "top_logprobs "))
      << small_vocab;
  EXPECT_EQ(Validate(SamplingParams(), 0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, CheckSamplingParamsReturnsTheFieldAndReason) {
  EXPECT_FALSE(CheckSamplingParams(SamplingParams(), 100).has_value());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    SamplingField field;
    std::string name;
    std::function<void(SamplingParams&)> set;
  };
  const std::vector<Case> cases = {
      {SamplingField::kTemperature, "temperature",
       [&](SamplingParams& p) { p.temperature = nan; }},
      {SamplingField::kTopK, "top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {SamplingField::kTopP, "top_p", [](SamplingParams& p) { p.top_p = 0; }},
      {SamplingField::kMinP, "min_p", [](SamplingParams& p) { p.min_p = 2; }},
      {SamplingField::kRepetitionPenalty, "repetition_penalty",
       [](SamplingParams& p) { p.repetition_penalty = 0; }},
      {SamplingField::kPresencePenalty, "presence_penalty",
       [](SamplingParams& p) { p.presence_penalty = 3; }},
      {SamplingField::kFrequencyPenalty, "frequency_penalty",
       [](SamplingParams& p) { p.frequency_penalty = -3; }},
      {SamplingField::kTopLogprobs, "top_logprobs",
       [](SamplingParams& p) { p.top_logprobs = 2; }},
      {SamplingField::kLogitBias, "logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{100, 1.0f}};
       }},
      {SamplingField::kLogitBias, "logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{-1, 1.0f}};
       }},
      {SamplingField::kLogitBias, "logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, 100.5f}};
       }},
      {SamplingField::kLogitBias, "logit_bias",
       [&](SamplingParams& p) {
         p.logit_bias = {{3, nan}};
       }},
      {SamplingField::kLogitBias, "logit_bias",
       [](SamplingParams& p) {
         p.logit_bias = {{3, 1.0f}, {5, 0}, {3, 2}};
       }},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const std::optional<SamplingParamError> error = CheckSamplingParams(p, 100);
    ASSERT_TRUE(error.has_value()) << c.name;
    EXPECT_EQ(error->field, c.field) << c.name;
    EXPECT_EQ(SamplingFieldName(error->field), c.name);
    EXPECT_EQ(Validate(p, 100).message(),
              absl::StrCat(c.name, " ", error->reason));
  }

  SamplingParams top_p;
  top_p.top_p = 0;
  EXPECT_EQ(CheckSamplingParams(top_p, 100)->reason,
            "must be in (0, 1], got 0");
  SamplingParams needs_logprobs;
  needs_logprobs.top_logprobs = 2;
  EXPECT_EQ(CheckSamplingParams(needs_logprobs, 100)->reason,
            "requires logprobs to be set");
  const std::optional<SamplingParamError> vocab =
      CheckSamplingParams(SamplingParams(), 0);
  ASSERT_TRUE(vocab.has_value());
  EXPECT_EQ(vocab->field, SamplingField::kVocabSize);
  EXPECT_EQ(Validate(SamplingParams(), 0).message(),
            "vocab_size must be positive, got 0");
}

TEST(SamplerTest, RejectsTokensAndRowsOutsideTheVocabulary) {
  absl::StatusOr<SequenceSampler> bad =
      SequenceSampler::Create(SamplingParams(), 10, {1, 10});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SequenceSampler::Create(SamplingParams(), 10, {-1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  SamplingParams invalid;
  invalid.top_p = 2;
  EXPECT_EQ(SequenceSampler::Create(invalid, 10, {}).status().code(),
            absl::StatusCode::kInvalidArgument);

  SamplerScratch scratch;
  SequenceSampler s = Make(SamplingParams(), 10);
  EXPECT_EQ(s.Sample(std::vector<float>(9), &scratch).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.step(), 0u);
}

}  // namespace
}  // namespace paceline::engine
