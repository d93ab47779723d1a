#ifndef PACELINE_TOOLS_PACELINE_BENCH_REPORT_H_
#define PACELINE_TOOLS_PACELINE_BENCH_REPORT_H_

// What `paceline bench` prints and writes: the readable table, the JSON
// document (--json) and the gnuplot data, scripts and PNGs (--plot DIR).
// Latencies are reported in milliseconds.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/paceline/bench_stats.h"

namespace paceline::tools::bench {

// One load level: a closed loop at a concurrency or an open loop at a rate.
struct RunResult {
  bool open_loop = false;
  double level = 0;  // concurrency (closed) or requests/s (open)
  double duration = 0;
  std::vector<RequestRecord> records;
  GroupStats all;
  std::vector<GroupStats> tenants;  // in the order of the tenant names
  // --per-tenant-concurrency: `level` streams of each tenant, and each
  // tenant's service over the common window (bench_stats.h; none when some
  // tenant was never served).
  bool per_tenant = false;
  std::optional<ShareWindow> window;
  std::vector<TenantService> service;  // in the order of the tenant names
};

// What the runs were made with, echoed by the reports.
struct BenchSetup {
  std::string api = "grpc";  // "grpc" or "openai"
  std::string server;        // gRPC host:port, or the OpenAI base URL
  std::string model;         // the served model's id
  std::vector<std::string> tenants;
  std::string prompt_tokens;  // the flag's text, or "FILE.jsonl"
  std::string max_tokens;
  double pace = 0;  // tokens/s, 0 = unpaced
  double burstiness = 1;
  uint64_t seed = 0;
  int warmup = 0;
  Slo slo;
};

// "closed, concurrency 4" / "closed, 4 per tenant" / "open, 2.5 req/s".
std::string RunLabel(const RunResult& run);

// The readable report: per run a throughput line per tenant, then the
// computed and delivered latency percentiles.
std::string FormatTable(const BenchSetup& setup,
                        const std::vector<RunResult>& runs);

// The machine-readable report: one JSON object.
std::string FormatJson(const BenchSetup& setup,
                       const std::vector<RunResult>& runs);

// Writes latency CDF data (cdf_<run>_<metric>_<side>.dat), throughput.dat
// and plots.gp into `dir` (created if missing), then runs `gnuplot
// plots.gp` there when gnuplot is on PATH, producing ttft_cdf.png,
// tpot_cdf.png, itl_cdf.png, e2e_cdf.png and throughput.png. `*note` says
// what happened (e.g. that gnuplot is missing and the PNGs were skipped).
// Errors: the directory or a file cannot be written, or gnuplot fails.
absl::Status WritePlots(const std::string& dir, const BenchSetup& setup,
                        const std::vector<RunResult>& runs, std::string* note);

}  // namespace paceline::tools::bench

#endif  // PACELINE_TOOLS_PACELINE_BENCH_REPORT_H_
