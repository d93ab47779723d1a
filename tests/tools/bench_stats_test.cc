// The arithmetic of `paceline bench`: percentiles, summaries, the arrival
// process, length ranges, SLOs and per-tenant aggregation.

#include "tools/paceline/bench_stats.h"

#include <cmath>
#include <optional>
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

// A record of tenant `t` sent at `sent` whose tokens arrived at the given
// times (seconds from the run's start), one per Delta.
RequestRecord Delivered(int t, double sent, std::vector<double> at) {
  RequestRecord r;
  r.tenant = t;
  r.ok = true;
  r.sent = sent;
  r.delivered_tokens = static_cast<int32_t>(at.size());
  r.completion_tokens = r.delivered_tokens;
  r.ttft_delivered = at.front() - sent;
  for (size_t k = 1; k < at.size(); ++k) {
    r.itl_delivered.push_back(at[k] - at[k - 1]);
  }
  r.done = at.back();
  return r;
}

TEST(FairShareTest, WindowRunsFromEveryTenantServedToTheFirstThatStops) {
  const std::vector<RequestRecord> records = {
      Delivered(0, 0.0, {0.5, 0.6}), Delivered(0, 4.0, {4.5}),
      Delivered(1, 0.0, {1.5, 2.0}), Delivered(1, 9.0, {9.5})};
  const std::optional<ShareWindow> w = CommonWindow(records, 2);
  ASSERT_TRUE(w.has_value());
  EXPECT_DOUBLE_EQ(w->from, 1.5);  // tenant 1's first token
  EXPECT_DOUBLE_EQ(w->to, 4.0);    // tenant 0's last request sent
}

TEST(FairShareTest, NoWindowWhenATenantWasNeverServed) {
  std::vector<RequestRecord> records = {Delivered(0, 0.0, {0.5})};
  RequestRecord failed;
  failed.tenant = 1;
  failed.sent = 0.2;
  failed.error = "UNAVAILABLE";
  records.push_back(failed);
  EXPECT_FALSE(CommonWindow(records, 2).has_value());
  EXPECT_FALSE(CommonWindow(records, 1).has_value());  // 0.5 > its last send
}

TEST(FairShareTest, DeliveredInCountsTokensInsideTheHalfOpenWindow) {
  const RequestRecord r = Delivered(0, 1.0, {1.25, 1.5, 2.0, 2.0, 3.0, 4.0});
  EXPECT_EQ(DeliveredIn(r, {0.0, 10.0}), 6);
  EXPECT_EQ(DeliveredIn(r, {1.5, 3.0}), 3);  // 1.5, 2.0, 2.0
  EXPECT_EQ(DeliveredIn(r, {1.3, 1.4}), 0);
  RequestRecord failed = r;
  failed.ok = false;
  EXPECT_EQ(DeliveredIn(failed, {0.0, 10.0}), 0);
}

TEST(FairShareTest, SharesCompareWithTheExpectedWeights) {
  // Tenant 0 gets 2 tokens a second, tenant 1 6: exactly 1:3.
  std::vector<RequestRecord> records;
  std::vector<double> slow, fast;
  for (int k = 0; k < 20; ++k) slow.push_back(k * 0.5);
  for (int k = 0; k < 60; ++k) fast.push_back(k / 6.0);
  records.push_back(Delivered(0, 0.0, slow));
  records.push_back(Delivered(1, 0.0, fast));
  const std::vector<double> weights = {1, 3};
  const std::vector<TenantService> s =
      ServiceShares(records, {0.0, 10.0}, weights);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].tokens, 20);
  EXPECT_EQ(s[1].tokens, 60);
  EXPECT_DOUBLE_EQ(s[0].tokens_per_s, 2.0);
  EXPECT_DOUBLE_EQ(s[1].tokens_per_s, 6.0);
  EXPECT_DOUBLE_EQ(s[0].share, 0.25);
  EXPECT_DOUBLE_EQ(s[0].expected, 0.25);
  EXPECT_DOUBLE_EQ(s[0].ratio, 1.0);
  EXPECT_DOUBLE_EQ(s[1].ratio, 1.0);
  // Against equal weights tenant 1 got 1.5 times its share.
  const std::vector<double> equal = {1, 1};
  EXPECT_DOUBLE_EQ(ServiceShares(records, {0.0, 10.0}, equal)[1].ratio, 1.5);
}

}  // namespace
}  // namespace paceline::tools::bench
