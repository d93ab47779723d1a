// `paceline bench --server ADDR ...`: a gRPC load generator against a
// running pacelined. A closed loop keeps N streams in flight; an open loop
// starts requests at gamma-distributed arrival times (Poisson at
// burstiness 1). Each request is a Generate stream; the report puts the
// server's own timings (computed side) next to this client's receive times
// (delivered side). This file reads the flags; bench_runner.h sends the
// load, bench_stats.h has the arithmetic, bench_report.h the output.

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tools/paceline/bench_report.h"
#include "tools/paceline/bench_runner.h"
#include "tools/paceline/bench_stats.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/grpc_client.h"

namespace paceline::tools {
namespace {

namespace pb = ::paceline::v1;
using bench::BenchFlags;
using bench::FilePrompt;
using bench::LengthRange;
using bench::RunResult;
using bench::Tenant;
using bench::Workload;

constexpr char kUsage[] =
    "usage: paceline bench --server ADDR [--api-key KEY | --tenant "
    "NAME:KEY[:SHARE]...]\n"
    "         [--concurrency N[,N...] | --rate R[,R...] [--burstiness B]]\n"
    "         [--requests N] [--duration SECONDS] [--warmup N]\n"
    "         [--prompt-tokens N|A:B | --prompts FILE.jsonl] [--max-tokens "
    "N|A:B]\n"
    "         [--pace TPS] [--temperature T] [--seed S]\n"
    "         [--slo-ttft MS] [--slo-tpot MS] [--slo-e2e MS]\n"
    "         [--json] [--plot DIR] [--progress | --no-progress]\n"
    "         [--timeout SECONDS] [--tls-ca FILE]\n"
    "\n"
    "Loads the pacelined at ADDR with Generate streams and reports, per run\n"
    "and per tenant, request and token throughput, goodput, and TTFT, TPOT,\n"
    "ITL and end-to-end latency percentiles (p50/p90/p99, linear\n"
    "interpolation between closest ranks) on two sides:\n"
    "  computed   from the server's Finished.timings: TTFT = first_token -\n"
    "             queued, E2E = generation_done - queued, TPOT =\n"
    "             (generation_done - first_token) / (tokens - 1)\n"
    "  delivered  from this client's receive times: TTFT = first Delta -\n"
    "             send, E2E = last Delta - send, TPOT = (last - first Delta)\n"
    "             / (tokens - 1), ITL = the gap before each delivered token\n"
    "             (the tokens of one Delta arrive together)\n"
    "Synthetic prompts are random token ids of the requested length; every\n"
    "request sets ignore_eos, so it generates exactly its max tokens. Exits\n"
    "1 when any measured request failed (after the report).\n"
    "\n"
    "  --server ADDR         host:port of pacelined\n"
    "  --api-key KEY         one tenant's key (default: $PACELINE_API_KEY)\n"
    "  --tenant NAME:KEY[:SHARE]  a tenant and its share of the requests\n"
    "                        (default 1); repeatable\n"
    "  --concurrency LIST    closed loop: streams in flight, e.g. 1,4,8,16,32\n"
    "                        for one run per level (default 1)\n"
    "  --rate LIST           open loop: requests/s, one run per rate\n"
    "  --burstiness B        gamma shape of the inter-arrival times; 1 =\n"
    "                        Poisson, < 1 burstier (default 1)\n"
    "  --requests N          requests per run (default 100 unless\n"
    "                        --duration)\n"
    "  --duration SECONDS    stop starting requests after this long\n"
    "  --warmup N            requests run (and not counted) first\n"
    "  --prompt-tokens N|A:B prompt length, fixed or uniform (default 128)\n"
    "  --prompts FILE.jsonl  prompts instead, one {\"prompt\": \"...\",\n"
    "                        \"max_tokens\": N} per line, used in turn\n"
    "  --max-tokens N|A:B    tokens to generate (default 128)\n"
    "  --pace TPS            delivery pace in tokens/s, 0 = unpaced "
    "(default)\n"
    "  --temperature T       sampling temperature (default: the server's)\n"
    "  --seed S              seed of the workload and arrivals (default 0)\n"
    "  --slo-ttft MS, --slo-tpot MS, --slo-e2e MS\n"
    "                        goodput counts requests meeting all of these\n"
    "  --json                print one JSON object instead of the table\n"
    "  --plot DIR            write CDF and throughput plots (gnuplot) to "
    "DIR\n"
    "  --progress, --no-progress  force the progress bar on stderr on or "
    "off\n"
    "                        (default: on when stderr is a terminal)\n"
    "  --timeout SECONDS     deadline of each request (default: none)\n"
    "  --tls-ca FILE         use TLS, trusting the PEM certificates in FILE\n";

constexpr FlagDef kFlags[] = {
    {"server", true},        {"api-key", true},     {"tenant", true},
    {"concurrency", true},   {"rate", true},        {"burstiness", true},
    {"requests", true},      {"duration", true},    {"warmup", true},
    {"prompt-tokens", true}, {"prompts", true},     {"max-tokens", true},
    {"pace", true},          {"temperature", true}, {"seed", true},
    {"slo-ttft", true},      {"slo-tpot", true},    {"slo-e2e", true},
    {"json", false},         {"plot", true},        {"progress", false},
    {"no-progress", false},  {"timeout", true},     {"tls-ca", true},
};

// "1,4,8": positive numbers; whole ones when `whole`.
absl::StatusOr<std::vector<double>> ParseLevels(absl::string_view flag,
                                                absl::string_view value,
                                                bool whole) {
  std::vector<double> levels;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    ASSIGN_OR_RETURN(const double d, ParseNumberFlag(flag, part, kPositive));
    if (whole && (d != std::floor(d) || d > 100000)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " wants whole numbers in [1, 100000], got '", part, "'"));
    }
    levels.push_back(d);
  }
  return levels;
}

absl::StatusOr<Tenant> ParseTenant(absl::string_view value) {
  const std::vector<std::string> parts = absl::StrSplit(value, ':');
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() ||
      parts[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tenant wants NAME:KEY or NAME:KEY:SHARE, got '", value, "'"));
  }
  Tenant t{parts[0], parts[1], 1};
  if (parts.size() == 3) {
    ASSIGN_OR_RETURN(t.share,
                     ParseNumberFlag("tenant SHARE", parts[2], kPositive));
  }
  return t;
}

absl::StatusOr<std::vector<FilePrompt>> ReadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<FilePrompt> prompts;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    google::protobuf::Struct object;
    const auto where = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": ", what));
    };
    if (!google::protobuf::util::JsonStringToMessage(line, &object).ok()) {
      return where("not a JSON object");
    }
    const auto& fields = object.fields();
    auto prompt = fields.find("prompt");
    if (prompt == fields.end() || !prompt->second.has_string_value()) {
      return where("wants a string \"prompt\"");
    }
    FilePrompt p{prompt->second.string_value(), std::nullopt};
    if (auto mt = fields.find("max_tokens"); mt != fields.end()) {
      const double v = mt->second.number_value();
      if (!mt->second.has_number_value() || v < 1 || v > INT32_MAX ||
          v != std::floor(v)) {
        return where("\"max_tokens\" wants a whole number >= 1");
      }
      p.max_tokens = static_cast<int32_t>(v);
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has no prompts"));
  }
  return prompts;
}

// --server, --tls-ca and who sends: --tenant..., or one --api-key.
absl::Status ReadTargetFlags(const ParsedArgs& args, BenchFlags& f) {
  if (!args.Get("server")) {
    return absl::InvalidArgumentError("--server is required");
  }
  f.server = *args.Get("server");
  if (auto v = args.Get("tls-ca")) f.tls_ca = *v;
  for (const std::string& t : args.GetAll("tenant")) {
    ASSIGN_OR_RETURN(Tenant tenant, ParseTenant(t));
    f.tenants.push_back(std::move(tenant));
  }
  if (!f.tenants.empty()) {
    if (args.Has("api-key")) {
      return absl::InvalidArgumentError("give --api-key or --tenant, not both");
    }
    return absl::OkStatus();
  }
  std::string key;
  if (auto v = args.Get("api-key")) {
    key = *v;
  } else if (const char* env = std::getenv("PACELINE_API_KEY")) {
    key = env;
  }
  if (key.empty()) {
    return absl::InvalidArgumentError(
        "--tenant, --api-key or PACELINE_API_KEY is required");
  }
  f.tenants.push_back({"default", key, 1});
  return absl::OkStatus();
}

// The runs: closed- or open-loop levels, how many requests or how long,
// the warm-up.
absl::Status ReadLoadFlags(const ParsedArgs& args, BenchFlags& f) {
  if (args.Has("concurrency") && args.Has("rate")) {
    return absl::InvalidArgumentError("give --concurrency or --rate, not both");
  }
  if (auto v = args.Get("concurrency")) {
    ASSIGN_OR_RETURN(f.levels, ParseLevels("concurrency", *v, true));
  }
  if (auto v = args.Get("rate")) {
    ASSIGN_OR_RETURN(f.levels, ParseLevels("rate", *v, false));
    f.open_loop = true;
  }
  ASSIGN_OR_RETURN(const std::optional<double> burstiness,
                   GetNumberFlag(args, "burstiness", kPositive));
  f.burstiness = burstiness.value_or(f.burstiness);
  ASSIGN_OR_RETURN(f.requests, GetIntFlag(args, "requests", {.min = 1}));
  ASSIGN_OR_RETURN(f.duration, GetNumberFlag(args, "duration", kPositive));
  if (!f.requests && !f.duration) f.requests = 100;
  ASSIGN_OR_RETURN(const std::optional<int32_t> warmup,
                   GetInt32Flag(args, "warmup", {.min = 0, .max = 1'000'000}));
  f.warmup = warmup.value_or(f.warmup);
  return absl::OkStatus();
}

// Each request: its prompt and output lengths (or the prompts file), pace,
// temperature; the seed of the workload.
absl::Status ReadRequestFlags(const ParsedArgs& args, BenchFlags& f) {
  if (args.Has("prompts") && args.Has("prompt-tokens")) {
    return absl::InvalidArgumentError(
        "give --prompts or --prompt-tokens, not both");
  }
  if (auto v = args.Get("prompt-tokens")) {
    ASSIGN_OR_RETURN(f.prompt_tokens,
                     bench::ParseLengthRange("prompt-tokens", *v, 1));
    f.prompt_tokens_text = *v;
  }
  if (auto v = args.Get("prompts")) {
    ASSIGN_OR_RETURN(f.prompts, ReadPrompts(*v));
    f.prompt_tokens_text = *v;
  }
  if (auto v = args.Get("max-tokens")) {
    ASSIGN_OR_RETURN(f.max_tokens,
                     bench::ParseLengthRange("max-tokens", *v, 1));
    f.max_tokens_text = *v;
  }
  ASSIGN_OR_RETURN(const std::optional<double> pace,
                   GetNumberFlag(args, "pace", kNonNegative));
  f.pace = pace.value_or(f.pace);
  ASSIGN_OR_RETURN(const std::optional<double> temperature,
                   GetNumberFlag(args, "temperature", kNonNegative));
  if (temperature) f.temperature = static_cast<float>(*temperature);
  ASSIGN_OR_RETURN(const std::optional<uint64_t> seed,
                   GetUint64Flag(args, "seed"));
  f.seed = seed.value_or(f.seed);
  return absl::OkStatus();
}

// What counts as good (SLOs in ms), each request's deadline, and the
// output: table or JSON, plots, progress bar.
absl::Status ReadReportFlags(const ParsedArgs& args, BenchFlags& f) {
  const struct {
    absl::string_view flag;
    std::optional<double>* slo;
  } slos[] = {{"slo-ttft", &f.slo.ttft},
              {"slo-tpot", &f.slo.tpot},
              {"slo-e2e", &f.slo.e2e}};
  for (const auto& s : slos) {
    ASSIGN_OR_RETURN(const std::optional<double> ms,
                     GetNumberFlag(args, s.flag, kPositive));
    if (ms) *s.slo = *ms / 1e3;
  }
  ASSIGN_OR_RETURN(f.timeout, GetNumberFlag(args, "timeout", kPositive));
  f.json = args.Has("json");
  if (auto v = args.Get("plot")) f.plot_dir = *v;
  f.progress = args.Has("progress") ||
               (!args.Has("no-progress") && isatty(STDERR_FILENO) == 1);
  return absl::OkStatus();
}

absl::StatusOr<BenchFlags> ReadFlags(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  BenchFlags f;
  RETURN_IF_ERROR(ReadTargetFlags(args, f));
  RETURN_IF_ERROR(ReadLoadFlags(args, f));
  RETURN_IF_ERROR(ReadRequestFlags(args, f));
  RETURN_IF_ERROR(ReadReportFlags(args, f));
  return f;
}

absl::Status Bench(const BenchFlags& f) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   Connect(f.server, f.tls_ca));
  std::unique_ptr<pb::Paceline::Stub> stub = pb::Paceline::NewStub(channel);

  // The served model: its id for the report, its vocabulary for prompts.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", f.tenants[0].key));
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::GetModelInfoResponse info;
  if (grpc::Status s = stub->GetModelInfo(&ctx, {}, &info); !s.ok()) {
    return FromGrpc(s, ctx);
  }
  const Workload workload(f, info.model().info().vocab_size());

  bench::BenchSetup setup;
  setup.server = f.server;
  setup.model = info.model().id();
  for (const Tenant& t : f.tenants) setup.tenants.push_back(t.name);
  setup.prompt_tokens = f.prompt_tokens_text;
  setup.max_tokens = f.max_tokens_text;
  setup.pace = f.pace;
  setup.burstiness = f.burstiness;
  setup.seed = f.seed;
  setup.warmup = f.warmup;
  setup.slo = f.slo;

  if (f.warmup > 0) {
    const int concurrency =
        f.open_loop ? 1 : static_cast<int>(f.levels.front());
    const RunResult w =
        bench::RunLevel(*stub, f, workload, /*salt=*/1, f.warmup, std::nullopt,
                        /*open_loop=*/false, concurrency, f.progress);
    const bench::GroupStats g = bench::Aggregate(w.records, w.duration, {});
    if (g.failed > 0) {
      return absl::UnavailableError(
          absl::StrCat("warm-up: ", g.failed, " of ", g.requests,
                       " requests failed; first: ", g.first_error));
    }
  }

  std::vector<RunResult> runs;
  int64_t failed = 0;
  std::string first_error;
  for (size_t k = 0; k < f.levels.size(); ++k) {
    RunResult run =
        bench::RunLevel(*stub, f, workload, /*salt=*/2 + k, f.requests,
                        f.duration, f.open_loop, f.levels[k], f.progress);
    run.all = bench::Aggregate(run.records, run.duration, f.slo);
    for (size_t t = 0; t < f.tenants.size(); ++t) {
      run.tenants.push_back(bench::Aggregate(run.records, run.duration, f.slo,
                                             static_cast<int>(t)));
    }
    failed += run.all.failed;
    if (first_error.empty()) first_error = run.all.first_error;
    runs.push_back(std::move(run));
  }

  std::cout << (f.json ? bench::FormatJson(setup, runs)
                       : bench::FormatTable(setup, runs))
            << std::flush;
  if (!f.plot_dir.empty()) {
    std::string note;
    RETURN_IF_ERROR(bench::WritePlots(f.plot_dir, setup, runs, &note));
    std::cerr << "paceline bench: " << note << "\n";
  }
  if (failed > 0) {
    return absl::UnavailableError(
        absl::StrCat(failed, " requests failed; first: ", first_error));
  }
  return absl::OkStatus();
}

}  // namespace

int RunBench(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok())
    return UsageError("bench", kUsage, parsed.status().message());
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok()) return UsageError("bench", kUsage, flags.status().message());
  if (absl::Status s = Bench(*flags); !s.ok()) return Failure("bench", s);
  return kExitOk;
}

}  // namespace paceline::tools
