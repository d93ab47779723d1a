#ifndef PACELINE_TOOLS_PACELINE_BENCH_RUNNER_H_
#define PACELINE_TOOLS_PACELINE_BENCH_RUNNER_H_

// The load side of `paceline bench`: what a benchmark is made of (its
// options and tenants), the requests it sends, and one load level run
// against a server — closed loop (N streams in flight) or open loop
// (gamma-distributed arrivals) — timing every stream through a Sender (a
// gRPC Generate stream here, an OpenAI completions stream in
// openai_sender.h).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "paceline/v1/paceline.grpc.pb.h"
#include "tools/paceline/bench_report.h"
#include "tools/paceline/bench_stats.h"

namespace paceline::tools::bench {

namespace pb = ::paceline::v1;

struct Tenant {
  std::string name;
  std::string key;
  double share = 1;
  pb::Priority priority = pb::PRIORITY_UNSPECIFIED;  // of its requests
};

struct FilePrompt {
  std::string text;
  std::optional<int32_t> max_tokens;
};

enum class Api { kGrpc, kOpenAi };

struct BenchFlags {
  Api api = Api::kGrpc;
  std::string server;  // gRPC: host:port
  std::string tls_ca;
  std::string url;                    // OpenAI: http://HOST:PORT[/PREFIX]
  std::string model;                  // OpenAI: "" = /v1/models's first
  std::optional<int64_t> vocab_size;  // OpenAI: ids of synthetic prompts
  // OpenAI: a JSON object's text whose members are merged into every
  // request body (--extra-body; "" = none).
  std::string extra_body;
  std::string outputs;  // OpenAI: --outputs FILE.jsonl ("" = none)
  std::vector<Tenant> tenants;
  bool open_loop = false;
  // Closed loop with `level` streams of each tenant in flight (each
  // tenant's requests its own: --per-tenant-concurrency); otherwise one
  // population whose requests draw their tenant by share.
  bool per_tenant = false;
  std::vector<double> levels = {1};
  double burstiness = 1;
  std::optional<int64_t> requests;
  std::optional<double> duration;
  int warmup = 0;
  LengthRange prompt_tokens{128, 128};
  std::string prompt_tokens_text = "128";
  std::vector<FilePrompt> prompts;  // from --prompts; empty: synthetic
  LengthRange max_tokens{128, 128};
  std::string max_tokens_text = "128";
  double pace = 0;
  std::optional<float> temperature;
  std::optional<int32_t> max_draft_tokens;  // unset: the tenant's
  uint64_t seed = 0;
  bench::Slo slo;
  bool json = false;
  std::string plot_dir;
  bool progress = false;
  std::optional<double> timeout;
};

struct Planned {
  int tenant = 0;
  pb::GenerateRequest request;
  uint64_t salt = 0;  // Workload::Make's arguments
  int64_t index = 0;
};

// The requests of a benchmark. Request `i` of stream `salt` depends only
// on (seed, salt, i), so runs are repeatable whatever the order in which
// the workers take requests; its tenant is drawn by share, or is `tenant`
// when given (then request i of each tenant is its own: the tenant joins
// the seed). `flags` must outlive the Workload.
class Workload {
 public:
  Workload(const BenchFlags& flags, int64_t vocab_size);
  Planned Make(uint64_t salt, int64_t i,
               std::optional<int> tenant = std::nullopt) const;

 private:
  const BenchFlags& flags_;
  const int64_t vocab_size_;
  std::vector<double> tenant_weights_;
};

using Clock = std::chrono::steady_clock;

// Sends one planned request and times it. Implementations are
// thread-safe: the runner calls Send from many threads at once.
class Sender {
 public:
  virtual ~Sender() = default;
  // The record of `planned`, its times in seconds from `origin` (the
  // run's start). A failure is a record with ok = false and its error.
  virtual RequestRecord Send(const Planned& planned,
                             Clock::time_point origin) = 0;
};

// Generate streams on a Paceline stub, with the tenant's key and the
// flags' --timeout. `stub` and `flags` must outlive it.
class GrpcSender : public Sender {
 public:
  GrpcSender(pb::Paceline::Stub& stub, const BenchFlags& flags)
      : stub_(stub), flags_(flags) {}
  RequestRecord Send(const Planned& planned, Clock::time_point origin) override;

 private:
  pb::Paceline::Stub& stub_;
  const BenchFlags& flags_;
};

// Runs one load level: `level` streams in flight (closed loop; of each
// tenant with flags.per_tenant, `requests` then counting per tenant) or
// `level` arrivals per second (open loop), until `requests` have been started or
// `duration` seconds have passed (whichever comes first; at least one must
// be set), and waits for the last stream. Records come back unaggregated;
// the run's duration is the end of its last stream. With `progress`, a
// progress bar is drawn on stderr meanwhile.
RunResult RunLevel(Sender& sender, const BenchFlags& flags,
                   const Workload& workload, uint64_t salt,
                   std::optional<int64_t> requests,
                   std::optional<double> duration, bool open_loop, double level,
                   bool progress);

}  // namespace paceline::tools::bench

#endif  // PACELINE_TOOLS_PACELINE_BENCH_RUNNER_H_
