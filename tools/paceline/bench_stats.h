#ifndef PACELINE_TOOLS_PACELINE_BENCH_STATS_H_
#define PACELINE_TOOLS_PACELINE_BENCH_STATS_H_

// The arithmetic of `paceline bench`, apart from any gRPC: percentiles, the
// open-loop arrival process, length ranges, per-request records and their
// aggregation into a run's (or a tenant's) figures, goodput under SLOs.
// Everything here is deterministic for a given seed and input.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline::tools::bench {

// The p-th percentile (p in [0, 100]) of `sorted` (ascending, non-empty) by
// linear interpolation between the closest ranks: rank r = p/100 x (n-1),
// value sorted[floor r] + (r - floor r) x (sorted[ceil r] - sorted[floor r])
// — numpy's default ("linear") method.
double Percentile(std::span<const double> sorted, double p);

// Count, mean, p50/p90/p99 and max of a sample; all zero when it is empty.
struct Distribution {
  size_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};
Distribution Summarize(std::vector<double> values);

// Open-loop inter-arrival times: gamma distributed with shape B (the
// burstiness) and mean 1/rate, so B = 1 is a Poisson process, B < 1 is
// burstier (variance 1/(rate^2 B)) and B > 1 is more regular.
class ArrivalProcess {
 public:
  // rate > 0 requests/s, burstiness > 0.
  ArrivalProcess(double rate, double burstiness, uint64_t seed);
  // Seconds from the previous arrival to the next.
  double NextGap();

 private:
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gamma_;
};

// A token count: fixed ("128") or drawn uniformly from a closed range
// ("64:256").
struct LengthRange {
  int32_t min = 0;
  int32_t max = 0;
  int32_t Draw(std::mt19937_64& rng) const;
};
// Parses "N" or "A:B" with min_value <= A <= B; InvalidArgument naming
// --`flag`.
absl::StatusOr<LengthRange> ParseLengthRange(absl::string_view flag,
                                             absl::string_view value,
                                             int32_t min_value);

// What one request measured. Seconds; "computed" durations come from the
// server's Finished.timings (its clock), "delivered" ones from this
// client's receive times of the Delta messages (its clock).
struct RequestRecord {
  int tenant = 0;  // index into the run's tenants
  bool ok = false;
  std::string error;  // when !ok
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;  // Usage.completion_tokens
  int32_t delivered_tokens = 0;   // token ids in the Deltas received
  // The OpenAI API, when the server sent no usage: completion_tokens is
  // the number of chunks with text.
  bool tokens_from_chunks = false;
  double sent = 0;  // seconds from the run's start
  double done = 0;  // the stream's end, same origin

  // first_token - queued; generation_done - queued;
  // (generation_done - first_token) / (completion_tokens - 1);
  // first_scheduled - queued.
  std::optional<double> ttft_computed, e2e_computed, tpot_computed,
      queue_computed;
  // first Delta - sent; last Delta - sent;
  // (last Delta - first Delta) / (delivered_tokens - 1).
  std::optional<double> ttft_delivered, e2e_delivered, tpot_delivered;
  // One gap per delivered token after the first: a Delta carrying k tokens
  // contributes the gap since the previous Delta and then k - 1 zeros (its
  // tokens arrived together).
  std::vector<double> itl_delivered;
};

// Latency objectives, seconds; unset ones are not checked.
struct Slo {
  std::optional<double> ttft, tpot, e2e;
  bool any() const { return ttft || tpot || e2e; }
};

enum class Side { kComputed, kDelivered };

// Whether an ok request met every set objective on `side`. A TPOT
// objective is met by a request of one token (it has no TPOT).
bool MeetsSlo(const RequestRecord& r, const Slo& slo, Side side);

// The figures of a group of requests (a run, or one tenant of it).
struct GroupStats {
  int64_t requests = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;   // of ok requests
  int64_t tokens_from_chunks = 0;  // ok requests counted without usage
  double duration = 0;             // seconds the group's figures are over
  double request_throughput = 0;   // ok requests / duration
  double output_throughput = 0;    // completion tokens / duration
  double total_throughput = 0;     // (prompt + completion) / duration
  // Ok requests meeting every SLO, per second; equal to
  // request_throughput when no SLO is set.
  double goodput_computed = 0;
  double goodput_delivered = 0;
  Distribution ttft_computed, tpot_computed, e2e_computed, queue_computed;
  Distribution ttft_delivered, tpot_delivered, e2e_delivered, itl_delivered;
  std::string first_error;  // of the first failed request, if any
};

// Aggregates the records of `tenant` (every record when nullopt) over a run
// that lasted `duration` seconds.
GroupStats Aggregate(std::span<const RequestRecord> records, double duration,
                     const Slo& slo, std::optional<int> tenant = std::nullopt);

// Fair share over a common window. In a run where every tenant keeps its
// own population of streams in flight (--per-tenant-concurrency), each
// tenant is backlogged from the moment all of them have received a token
// until the first of them stops starting requests (its last `sent`): that
// span is the window, and each tenant's service is the tokens delivered to
// it inside the window (of ok requests; a token's receive time is rebuilt
// from its request's first Delta and ITL gaps).
struct ShareWindow {
  double from = 0;  // seconds from the run's start
  double to = 0;
};
// nullopt when some tenant has no ok request with a delivered token, or
// the window is empty.
std::optional<ShareWindow> CommonWindow(std::span<const RequestRecord> records,
                                        int n_tenants);

// Tokens of `r` (ok, with delivered tokens) received in [from, to).
int64_t DeliveredIn(const RequestRecord& r, const ShareWindow& window);

struct TenantService {
  int64_t tokens = 0;       // delivered in the window
  double tokens_per_s = 0;  // tokens / window length
  double share = 0;         // tokens / every tenant's tokens
  double expected = 0;      // expected[t] / their sum
  double ratio = 0;         // share / expected (1 = exactly fair)
};
// One entry per tenant. `expected` holds each tenant's configured weight
// (any positive scale), one per tenant.
std::vector<TenantService> ServiceShares(std::span<const RequestRecord> records,
                                         const ShareWindow& window,
                                         std::span<const double> expected);

}  // namespace paceline::tools::bench

#endif  // PACELINE_TOOLS_PACELINE_BENCH_STATS_H_
