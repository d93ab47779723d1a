#include "tools/paceline/bench_stats.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace paceline::tools::bench {

double Percentile(std::span<const double> sorted, double p) {
  assert(!sorted.empty());  // callers summarize non-empty samples only
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 *
                      static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] +
         (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) /
           static_cast<double>(values.size());
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  d.max = values.back();
  return d;
}

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : rng_(seed), gamma_(burstiness, 1.0 / (rate * burstiness)) {}

double ArrivalProcess::NextGap() { return gamma_(rng_); }

int32_t LengthRange::Draw(std::mt19937_64& rng) const {
  if (min == max) return min;
  return std::uniform_int_distribution<int32_t>(min, max)(rng);
}

absl::StatusOr<LengthRange> ParseLengthRange(absl::string_view flag,
                                             absl::string_view value,
                                             int32_t min_value) {
  const std::vector<absl::string_view> parts = absl::StrSplit(value, ':');
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " wants N or A:B with ", min_value,
                     " <= A <= B, got '", value, "'"));
  };
  if (parts.size() > 2) return bad();
  LengthRange r;
  if (!absl::SimpleAtoi(parts[0], &r.min)) return bad();
  r.max = r.min;
  if (parts.size() == 2 && !absl::SimpleAtoi(parts[1], &r.max)) return bad();
  if (r.min < min_value || r.max < r.min) return bad();
  return r;
}

bool MeetsSlo(const RequestRecord& r, const Slo& slo, Side side) {
  if (!r.ok) return false;
  const bool computed = side == Side::kComputed;
  const std::optional<double>& ttft =
      computed ? r.ttft_computed : r.ttft_delivered;
  const std::optional<double>& tpot =
      computed ? r.tpot_computed : r.tpot_delivered;
  const std::optional<double>& e2e =
      computed ? r.e2e_computed : r.e2e_delivered;
  // An objective on a moment that never came (no token) is missed.
  if (slo.ttft && !(ttft && *ttft <= *slo.ttft)) return false;
  if (slo.tpot && tpot && *tpot > *slo.tpot) return false;
  if (slo.e2e && !(e2e && *e2e <= *slo.e2e)) return false;
  return true;
}

namespace {

// Appends the set values of `field` over `records`.
std::vector<double> Collect(const std::vector<const RequestRecord*>& records,
                            std::optional<double> RequestRecord::*field) {
  std::vector<double> out;
  for (const RequestRecord* r : records) {
    if (r->*field) out.push_back(*(r->*field));
  }
  return out;
}

}  // namespace

GroupStats Aggregate(std::span<const RequestRecord> records, double duration,
                     const Slo& slo, std::optional<int> tenant) {
  GroupStats g;
  g.duration = duration;
  std::vector<const RequestRecord*> ok;
  int64_t good_computed = 0, good_delivered = 0;
  std::vector<double> itl;
  for (const RequestRecord& r : records) {
    if (tenant && r.tenant != *tenant) continue;
    ++g.requests;
    if (!r.ok) {
      ++g.failed;
      if (g.first_error.empty()) g.first_error = r.error;
      continue;
    }
    ++g.ok;
    ok.push_back(&r);
    g.prompt_tokens += r.prompt_tokens;
    g.completion_tokens += r.completion_tokens;
    if (r.tokens_from_chunks) ++g.tokens_from_chunks;
    good_computed += MeetsSlo(r, slo, Side::kComputed) ? 1 : 0;
    good_delivered += MeetsSlo(r, slo, Side::kDelivered) ? 1 : 0;
    itl.insert(itl.end(), r.itl_delivered.begin(), r.itl_delivered.end());
  }
  if (duration > 0) {
    g.request_throughput = static_cast<double>(g.ok) / duration;
    g.output_throughput = static_cast<double>(g.completion_tokens) / duration;
    g.total_throughput =
        static_cast<double>(g.prompt_tokens + g.completion_tokens) / duration;
    g.goodput_computed = static_cast<double>(good_computed) / duration;
    g.goodput_delivered = static_cast<double>(good_delivered) / duration;
  }
  g.ttft_computed = Summarize(Collect(ok, &RequestRecord::ttft_computed));
  g.tpot_computed = Summarize(Collect(ok, &RequestRecord::tpot_computed));
  g.e2e_computed = Summarize(Collect(ok, &RequestRecord::e2e_computed));
  g.queue_computed = Summarize(Collect(ok, &RequestRecord::queue_computed));
  g.ttft_delivered = Summarize(Collect(ok, &RequestRecord::ttft_delivered));
  g.tpot_delivered = Summarize(Collect(ok, &RequestRecord::tpot_delivered));
  g.e2e_delivered = Summarize(Collect(ok, &RequestRecord::e2e_delivered));
  g.itl_delivered = Summarize(std::move(itl));
  return g;
}

std::optional<ShareWindow> CommonWindow(std::span<const RequestRecord> records,
                                        int n_tenants) {
  if (n_tenants <= 0) return std::nullopt;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> first_token(n_tenants, inf);
  std::vector<double> last_sent(n_tenants, -inf);
  for (const RequestRecord& r : records) {
    if (r.tenant < 0 || r.tenant >= n_tenants) continue;
    last_sent[r.tenant] = std::max(last_sent[r.tenant], r.sent);
    if (r.ok && r.ttft_delivered) {
      first_token[r.tenant] =
          std::min(first_token[r.tenant], r.sent + *r.ttft_delivered);
    }
  }
  ShareWindow w{*std::max_element(first_token.begin(), first_token.end()),
                *std::min_element(last_sent.begin(), last_sent.end())};
  if (!std::isfinite(w.from) || !(w.to > w.from)) return std::nullopt;
  return w;
}

int64_t DeliveredIn(const RequestRecord& r, const ShareWindow& window) {
  if (!r.ok || !r.ttft_delivered || r.delivered_tokens == 0) return 0;
  // The first token at the first Delta; each later one after its gap.
  double at = r.sent + *r.ttft_delivered;
  int64_t n = at >= window.from && at < window.to ? 1 : 0;
  for (double gap : r.itl_delivered) {
    at += gap;
    if (at >= window.to) break;
    if (at >= window.from) ++n;
  }
  return n;
}

std::vector<TenantService> ServiceShares(std::span<const RequestRecord> records,
                                         const ShareWindow& window,
                                         std::span<const double> expected) {
  std::vector<TenantService> out(expected.size());
  int64_t total = 0;
  for (const RequestRecord& r : records) {
    if (r.tenant < 0 || static_cast<size_t>(r.tenant) >= out.size()) continue;
    const int64_t n = DeliveredIn(r, window);
    out[r.tenant].tokens += n;
    total += n;
  }
  const double weights = std::accumulate(expected.begin(), expected.end(), 0.0);
  const double span = window.to - window.from;
  for (size_t t = 0; t < out.size(); ++t) {
    TenantService& s = out[t];
    s.tokens_per_s = span > 0 ? static_cast<double>(s.tokens) / span : 0;
    s.share = total > 0 ? static_cast<double>(s.tokens) / total : 0;
    s.expected = weights > 0 ? expected[t] / weights : 0;
    s.ratio = s.expected > 0 ? s.share / s.expected : 0;
  }
  return out;
}

}  // namespace paceline::tools::bench
