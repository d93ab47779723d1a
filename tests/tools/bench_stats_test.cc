// The arithmetic of `paceline bench`: percentiles, summaries, the arrival
// process, length ranges, SLOs and per-tenant aggregation.

#include "tools/paceline/bench_stats.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace paceline::tools::bench {
namespace {

TEST(PercentileTest, InterpolatesLinearlyBetweenClosestRanks) {
  const std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);   // rank 1.5
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);  // rank 2.97
  const std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 50), 7);
  EXPECT_DOUBLE_EQ(Percentile(one, 99), 7);
}

TEST(PercentileTest, MatchesNumpyOnOneToHundred) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  // numpy.percentile(range(1, 101), [50, 90, 99]) = 50.5, 90.1, 99.01
  EXPECT_NEAR(Percentile(v, 50), 50.5, 1e-9);
  EXPECT_NEAR(Percentile(v, 90), 90.1, 1e-9);
  EXPECT_NEAR(Percentile(v, 99), 99.01, 1e-9);
}

TEST(SummarizeTest, SortsAndOrdersPercentiles) {
  const Distribution d = Summarize({5, 1, 4, 2, 3, 10, 9, 8, 7, 6});
  EXPECT_EQ(d.count, 10u);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_DOUBLE_EQ(d.p50, 5.5);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_LE(d.p50, d.p90);
  EXPECT_LE(d.p90, d.p99);
  EXPECT_LE(d.p99, d.max);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  const Distribution d = Summarize({});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.p99, 0);
}

// Mean and variance of n inter-arrival gaps.
std::pair<double, double> GapMoments(double rate, double burstiness,
                                     uint64_t seed, int n) {
  ArrivalProcess arrivals(rate, burstiness, seed);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    const double g = arrivals.NextGap();
    EXPECT_GE(g, 0);
    sum += g;
    sum_sq += g * g;
  }
  const double mean = sum / n;
  return {mean, sum_sq / n - mean * mean};
}

TEST(ArrivalProcessTest, MeanGapIsOneOverRate) {
  for (const double burstiness : {0.25, 1.0, 4.0}) {
    const auto [mean, var] = GapMoments(/*rate=*/8, burstiness, 42, 200000);
    EXPECT_NEAR(mean, 1.0 / 8, 0.02 / 8) << "burstiness " << burstiness;
    // Gamma(shape B, scale 1/(rate B)): variance 1 / (rate^2 B).
    EXPECT_NEAR(var, 1.0 / (64 * burstiness), 0.1 / (64 * burstiness))
        << "burstiness " << burstiness;
  }
}

TEST(ArrivalProcessTest, BurstinessChangesTheVariance) {
  const double poisson = GapMoments(4, 1, 7, 50000).second;
  const double bursty = GapMoments(4, 0.2, 7, 50000).second;
  const double regular = GapMoments(4, 10, 7, 50000).second;
  EXPECT_GT(bursty, 3 * poisson);
  EXPECT_LT(regular, poisson / 3);
}

TEST(ArrivalProcessTest, SameSeedSameGaps) {
  ArrivalProcess a(3, 0.5, 99), b(3, 0.5, 99), c(3, 0.5, 100);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.NextGap();
    EXPECT_EQ(x, b.NextGap());
    differs |= x != c.NextGap();
  }
  EXPECT_TRUE(differs);
}

TEST(LengthRangeTest, ParsesFixedAndUniform) {
  auto fixed = ParseLengthRange("max-tokens", "128", 1);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->min, 128);
  EXPECT_EQ(fixed->max, 128);
  auto range = ParseLengthRange("max-tokens", "16:64", 1);
  ASSERT_TRUE(range.ok());
  std::mt19937_64 rng(1);
  bool low = false, high = false;
  for (int i = 0; i < 2000; ++i) {
    const int32_t n = range->Draw(rng);
    ASSERT_GE(n, 16);
    ASSERT_LE(n, 64);
    low |= n == 16;
    high |= n == 64;
  }
  EXPECT_TRUE(low && high);
  for (const char* bad : {"", "0", "x", "5:3", "1:2:3", "-4", "3:"}) {
    EXPECT_FALSE(ParseLengthRange("max-tokens", bad, 1).ok()) << bad;
  }
}

RequestRecord Ok(int tenant, double ttft, double tpot, double e2e,
                 int32_t tokens) {
  RequestRecord r;
  r.tenant = tenant;
  r.ok = true;
  r.prompt_tokens = 10;
  r.completion_tokens = tokens;
  r.delivered_tokens = tokens;
  r.ttft_computed = ttft;
  r.tpot_computed = tpot;
  r.e2e_computed = e2e;
  // The client sees everything 10 ms later, and each token 1 ms slower.
  r.ttft_delivered = ttft + 0.010;
  r.tpot_delivered = tpot + 0.001;
  r.e2e_delivered = e2e + 0.010;
  r.itl_delivered.assign(tokens - 1, tpot + 0.001);
  return r;
}

TEST(SloTest, AllGivenObjectivesMustHold) {
  const RequestRecord r = Ok(0, 0.100, 0.020, 1.0, 10);
  EXPECT_TRUE(MeetsSlo(r, {}, Side::kComputed));
  Slo slo;
  slo.ttft = 0.105;
  EXPECT_TRUE(MeetsSlo(r, slo, Side::kComputed));
  EXPECT_FALSE(MeetsSlo(r, slo, Side::kDelivered));  // 110 ms
  slo.ttft.reset();
  slo.tpot = 0.0205;
  EXPECT_TRUE(MeetsSlo(r, slo, Side::kComputed));
  EXPECT_FALSE(MeetsSlo(r, slo, Side::kDelivered));  // 21 ms
  slo.ttft = 1.0;
  slo.e2e = 0.5;
  EXPECT_FALSE(MeetsSlo(r, slo, Side::kComputed));
  RequestRecord failed = r;
  failed.ok = false;
  EXPECT_FALSE(MeetsSlo(failed, {}, Side::kComputed));
}

TEST(AggregateTest, ThroughputGoodputAndTenants) {
  std::vector<RequestRecord> records = {
      Ok(0, 0.1, 0.01, 1.0, 100), Ok(0, 0.2, 0.01, 1.1, 100),
      Ok(1, 0.3, 0.02, 2.0, 50), Ok(1, 0.9, 0.05, 3.0, 50)};
  RequestRecord failed;
  failed.tenant = 1;
  failed.error = "UNAVAILABLE: gone";
  records.push_back(failed);
  Slo slo;
  slo.ttft = 0.5;  // the fourth request misses it
  const GroupStats all = Aggregate(records, /*duration=*/2.0, slo);
  EXPECT_EQ(all.requests, 5);
  EXPECT_EQ(all.ok, 4);
  EXPECT_EQ(all.failed, 1);
  EXPECT_EQ(all.first_error, "UNAVAILABLE: gone");
  EXPECT_EQ(all.completion_tokens, 300);
  EXPECT_EQ(all.prompt_tokens, 40);
  EXPECT_DOUBLE_EQ(all.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(all.output_throughput, 150.0);
  EXPECT_DOUBLE_EQ(all.total_throughput, 170.0);
  EXPECT_DOUBLE_EQ(all.goodput_computed, 1.5);
  EXPECT_DOUBLE_EQ(all.goodput_delivered, 1.5);
  EXPECT_EQ(all.ttft_computed.count, 4u);
  EXPECT_NEAR(all.ttft_computed.p50, 0.25, 1e-12);
  EXPECT_EQ(all.itl_delivered.count, 99u + 99u + 49u + 49u);
  EXPECT_GT(all.ttft_delivered.p50, all.ttft_computed.p50);

  const GroupStats b = Aggregate(records, 2.0, slo, 1);
  EXPECT_EQ(b.requests, 3);
  EXPECT_EQ(b.ok, 2);
  EXPECT_DOUBLE_EQ(b.output_throughput, 50.0);
  EXPECT_DOUBLE_EQ(b.goodput_computed, 0.5);
  EXPECT_NEAR(b.e2e_computed.p50, 2.5, 1e-12);
}

}  // namespace
}  // namespace paceline::tools::bench
