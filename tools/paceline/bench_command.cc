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
#include <iterator>
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
#include "scheduler/request.h"
#include "tools/paceline/bench_report.h"
#include "tools/paceline/bench_runner.h"
#include "tools/paceline/bench_stats.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/grpc_client.h"
#include "tools/paceline/http_client.h"
#include "tools/paceline/openai_sender.h"

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
    "usage: paceline bench (--server ADDR |\n"
    "                       --api openai --url http[s]://HOST:PORT\n"
    "                       [--model NAME] [--vocab-size N]\n"
    "                       [--extra-body FILE.json] [--outputs FILE.jsonl])\n"
    "         [--tls-ca FILE]\n"
    "         [--api-key KEY | --tenant NAME:KEY[:SHARE[:PRIORITY]]...]\n"
    "         [--concurrency N[,N...] | --per-tenant-concurrency N[,N...] |\n"
    "          --rate R[,R...] [--burstiness B]]\n"
    "         [--requests N] [--duration SECONDS] [--warmup N]\n"
    "         [--prompt-tokens N|A:B | --prompts FILE.jsonl] [--max-tokens "
    "N|A:B]\n"
    "         [--pace TPS] [--temperature T] [--seed S]\n"
    "         [--slo-ttft MS] [--slo-tpot MS] [--slo-e2e MS]\n"
    "         [--json] [--plot DIR] [--progress | --no-progress]\n"
    "         [--timeout SECONDS]\n"
    "\n"
    "Loads a server with streams and reports, per run and per tenant,\n"
    "request and token throughput, goodput, and TTFT, TPOT, ITL and\n"
    "end-to-end latency percentiles (p50/p90/p99, linear interpolation\n"
    "between closest ranks) on two sides:\n"
    "  computed   from the server's Finished.timings (gRPC only): TTFT =\n"
    "             first_token - queued, E2E = generation_done - queued, TPOT\n"
    "             = (generation_done - first_token) / (tokens - 1)\n"
    "  delivered  from this client's receive times: TTFT = first Delta -\n"
    "             send, E2E = last Delta - send, TPOT = (last - first Delta)\n"
    "             / (tokens - 1), ITL = the gap before each delivered token\n"
    "             (the tokens of one Delta arrive together)\n"
    "Synthetic prompts are random token ids of the requested length; every\n"
    "request sets ignore_eos, so it generates exactly its max tokens. Exits\n"
    "1 when any measured request failed (after the report).\n"
    "\n"
    "--api grpc (the default) sends Generate streams to pacelined at\n"
    "--server. --api openai drives any OpenAI-compatible server (Paceline's\n"
    "HTTP API, vLLM, llama.cpp's llama-server) with the same load, so peers\n"
    "are measured side by side. Each request is one streamed POST\n"
    "/v1/completions on a keep-alive HTTP/1.1 connection (one per stream in\n"
    "flight), with `Authorization: Bearer KEY` (none without a key). A peer\n"
    "receives:\n"
    "  {\"model\": NAME, \"prompt\": [ids...] | \"text\", \"max_tokens\": N,\n"
    "   \"stream\": true, \"stream_options\": {\"include_usage\": true},\n"
    "   \"ignore_eos\": true, \"seed\": S, \"temperature\": T (with\n"
    "   --temperature), \"pace_tokens_per_s\": TPS (Paceline's, with "
    "--pace)}\n"
    "  Synthetic prompts go as token ids (OpenAI's number[] prompt, which\n"
    "  all three accept): N random ids in [3, V), V = --vocab-size, else the\n"
    "  model's meta.n_vocab when GET /v1/models reports it (Paceline and\n"
    "  llama-server do), else 259 (ids 3-258: byte tokens in llama vocabularies, valid\n"
    "  in any vocabulary of 259 or more). --prompts texts go as text.\n"
    "  Timing: TTFT = the first chunk with text, ITL = the gap before each\n"
    "  text chunk (plus a 0 per token that came coalesced into another\n"
    "  chunk, by the usage count), E2E = `data: [DONE]`. Prompt and\n"
    "  completion tokens come from the usage chunk; a server that sends\n"
    "  none has its text chunks counted instead, and the report says so.\n"
    "  There are no server timings, so the computed side stays empty. A\n"
    "  non-200 answer (429 included) is a failed request, reported with its\n"
    "  HTTP status, the OpenAI error and the retry hint; it is not retried.\n"
    "\n"
    "  --server ADDR         host:port of pacelined (gRPC)\n"
    "  --tls-ca FILE         gRPC over TLS, or https (openai), trusting the\n"
    "                        PEM certificates in FILE (https without it: the\n"
    "                        system's roots)\n"
    "  --api grpc|openai     the protocol (default grpc)\n"
    "  --url URL             openai: http[s]://HOST:PORT[/PREFIX] (a\n"
    "                        trailing /v1 is the same)\n"
    "  --model NAME          openai: the `model` sent (default: the first id\n"
    "                        of GET /v1/models)\n"
    "  --vocab-size N        openai: synthetic prompt ids are below N\n"
    "  --extra-body FILE.json  openai: a JSON object whose members are put\n"
    "                        into every request body, replacing the bench's\n"
    "                        own of the same name, e.g. {\"json_schema\":\n"
    "                        {...}, \"ignore_eos\": false} for structured\n"
    "                        output\n"
    "  --outputs FILE.jsonl  openai: write one line per request sent\n"
    "                        (warm-up included): {\"salt\": 1 for the\n"
    "                        warm-up, 2 + k for the k-th level, \"index\",\n"
    "                        \"ok\", \"finish_reason\", \"completion_tokens\",\n"
    "                        \"text\" (the whole completion), \"error\" when\n"
    "                        not ok}, in the order they finish\n"
    "  --api-key KEY         one tenant's key (default: $PACELINE_API_KEY;\n"
    "                        openai: optional)\n"
    "  --tenant NAME:KEY[:SHARE[:PRIORITY]]  a tenant, its share of the\n"
    "                        requests (default 1) and the priority its\n"
    "                        requests ask for (interactive, standard or\n"
    "                        batch; default: none set); repeatable\n"
    "  --concurrency LIST    closed loop: streams in flight, e.g. 1,4,8,16,32\n"
    "                        for one run per level (default 1)\n"
    "  --per-tenant-concurrency LIST  closed loop with that many streams of\n"
    "                        EACH tenant in flight (--requests then counts per\n"
    "                        tenant); SHARE is the tenant's expected share of\n"
    "                        service (its weight on the server). Reports each\n"
    "                        tenant's delivered tokens over the common window\n"
    "                        (from every tenant's first token to the first\n"
    "                        tenant's last request sent: all backlogged), its\n"
    "                        share of them and share / expected. Give each\n"
    "                        tenant more streams than the server runs at\n"
    "                        once, or it runs out of queued requests\n"
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
    "  --max-draft-tokens N  speculative decoding: each request asks for up\n"
    "                        to N (0..16) n-gram draft tokens per step\n"
    "                        (default: the tenant's setting)\n"
    "  --seed S              seed of the workload and arrivals (default 0)\n"
    "  --slo-ttft MS, --slo-tpot MS, --slo-e2e MS\n"
    "                        goodput counts requests meeting all of these\n"
    "  --json                print one JSON object instead of the table\n"
    "  --plot DIR            write CDF and throughput plots (gnuplot) to "
    "DIR\n"
    "  --progress, --no-progress  force the progress bar on stderr on or "
    "off\n"
    "                        (default: on when stderr is a terminal)\n"
    "  --timeout SECONDS     deadline of each request (default: none)\n";

constexpr FlagDef kFlags[] = {
    {"server", true},        {"api-key", true},     {"tenant", true},
    {"concurrency", true},   {"rate", true},        {"burstiness", true},
    {"requests", true},      {"duration", true},    {"warmup", true},
    {"prompt-tokens", true}, {"prompts", true},     {"max-tokens", true},
    {"pace", true},          {"temperature", true}, {"seed", true},
    {"slo-ttft", true},      {"slo-tpot", true},    {"slo-e2e", true},
    {"json", false},         {"plot", true},        {"progress", false},
    {"no-progress", false},  {"timeout", true},     {"tls-ca", true},
    {"api", true},           {"url", true},         {"model", true},
    {"vocab-size", true},    {"per-tenant-concurrency", true},
    {"max-draft-tokens", true},
    {"extra-body", true},    {"outputs", true},
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
  if (parts.size() < 2 || parts.size() > 4 || parts[0].empty() ||
      parts[1].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tenant wants NAME:KEY[:SHARE[:PRIORITY]], got '",
                     value, "'"));
  }
  Tenant t{parts[0], parts[1], 1};
  if (parts.size() >= 3) {
    ASSIGN_OR_RETURN(t.share,
                     ParseNumberFlag("tenant SHARE", parts[2], kPositive));
  }
  if (parts.size() == 4) {
    const std::string& p = parts[3];
    if (p == "interactive") {
      t.priority = pb::PRIORITY_INTERACTIVE;
    } else if (p == "standard") {
      t.priority = pb::PRIORITY_STANDARD;
    } else if (p == "batch") {
      t.priority = pb::PRIORITY_BATCH;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tenant PRIORITY wants interactive, standard or batch, got '", p,
          "'"));
    }
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

// --extra-body's file: its text, once it is known to hold a JSON object.
absl::StatusOr<std::string> ReadExtraBody(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (absl::Status s = bench::CheckExtraBody(text); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--extra-body ", path, " ", s.message()));
  }
  return text;
}

// --api and where to: --server and --tls-ca (gRPC), or --url, --model,
// --vocab-size, --extra-body and --outputs (OpenAI).
absl::Status ReadServerFlags(const ParsedArgs& args, BenchFlags& f) {
  const std::string api = args.Get("api").value_or("grpc");
  if (api != "grpc" && api != "openai") {
    return absl::InvalidArgumentError(
        absl::StrCat("--api wants grpc or openai, got '", api, "'"));
  }
  f.api = api == "grpc" ? bench::Api::kGrpc : bench::Api::kOpenAi;
  const bool grpc = f.api == bench::Api::kGrpc;
  for (const char* flag :
       {"url", "model", "vocab-size", "extra-body", "outputs"}) {
    if (grpc && args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " goes with --api openai"));
    }
  }
  if (!grpc && args.Has("server")) {
    return absl::InvalidArgumentError(
        "--server goes with --api grpc; give --url");
  }
  if (auto v = args.Get("tls-ca")) f.tls_ca = *v;
  if (grpc) {
    if (!args.Get("server")) {
      return absl::InvalidArgumentError("--server is required");
    }
    f.server = *args.Get("server");
    return absl::OkStatus();
  }
  if (!args.Get("url")) {
    return absl::InvalidArgumentError("--api openai wants --url");
  }
  f.url = *args.Get("url");
  ASSIGN_OR_RETURN(const HttpUrl url, bench::ParseBenchUrl(f.url));
  if (!f.tls_ca.empty() && !url.tls) {
    return absl::InvalidArgumentError("--tls-ca wants an https:// --url");
  }
  f.model = args.Get("model").value_or("");
  ASSIGN_OR_RETURN(f.vocab_size, GetIntFlag(args, "vocab-size", {.min = 4}));
  if (auto v = args.Get("extra-body")) {
    ASSIGN_OR_RETURN(f.extra_body, ReadExtraBody(*v));
  }
  f.outputs = args.Get("outputs").value_or("");
  return absl::OkStatus();
}

// The server, and who sends: --tenant..., or one --api-key (optional
// over the OpenAI API, whose servers may want none).
absl::Status ReadTargetFlags(const ParsedArgs& args, BenchFlags& f) {
  RETURN_IF_ERROR(ReadServerFlags(args, f));
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
  if (key.empty() && f.api == bench::Api::kGrpc) {
    return absl::InvalidArgumentError(
        "--tenant, --api-key or PACELINE_API_KEY is required");
  }
  f.tenants.push_back({"default", key, 1});
  return absl::OkStatus();
}

// The runs: closed- or open-loop levels, how many requests or how long,
// the warm-up.
absl::Status ReadLoadFlags(const ParsedArgs& args, BenchFlags& f) {
  const int loads = (args.Has("concurrency") ? 1 : 0) +
                    (args.Has("per-tenant-concurrency") ? 1 : 0) +
                    (args.Has("rate") ? 1 : 0);
  if (loads > 1) {
    return absl::InvalidArgumentError(
        "give one of --concurrency, --per-tenant-concurrency and --rate");
  }
  if (auto v = args.Get("concurrency")) {
    ASSIGN_OR_RETURN(f.levels, ParseLevels("concurrency", *v, true));
  }
  if (auto v = args.Get("per-tenant-concurrency")) {
    ASSIGN_OR_RETURN(f.levels, ParseLevels("per-tenant-concurrency", *v, true));
    f.per_tenant = true;
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
  ASSIGN_OR_RETURN(
      f.max_draft_tokens,
      GetInt32Flag(args, "max-draft-tokens",
                   {.min = 0, .max = scheduler::kMaxDraftTokens}));
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

// What the runs are sent with and to, and what the report echoes.
struct Target {
  std::unique_ptr<pb::Paceline::Stub> stub;  // gRPC; before `sender`
  std::unique_ptr<std::ofstream> outputs;    // --outputs; before `sender`
  std::unique_ptr<bench::Sender> sender;
  std::string label;  // the server, as the report names it
  std::string model;
  int64_t vocab_size = 0;
};

// The gRPC target: the served model's id and vocabulary from GetModelInfo.
absl::StatusOr<Target> GrpcTarget(const BenchFlags& f) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   Connect(f.server, f.tls_ca));
  Target t;
  t.stub = pb::Paceline::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Bearer ", f.tenants[0].key));
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::GetModelInfoResponse info;
  if (grpc::Status s = t.stub->GetModelInfo(&ctx, {}, &info); !s.ok()) {
    return FromGrpc(s, ctx);
  }
  t.sender = std::make_unique<bench::GrpcSender>(*t.stub, f);
  t.label = f.server;
  t.model = info.model().id();
  t.vocab_size = info.model().info().vocab_size();
  return t;
}

// The OpenAI target: --model, or GET /v1/models's first id; the
// vocabulary of synthetic prompts as --help says.
absl::StatusOr<Target> OpenAiTarget(const BenchFlags& f) {
  ASSIGN_OR_RETURN(const HttpUrl url, bench::ParseBenchUrl(f.url));
  Target t;
  t.model = f.model;
  std::optional<int64_t> served_vocab;
  const bool synthetic = f.prompts.empty();
  if (f.model.empty() || (synthetic && !f.vocab_size)) {
    ASSIGN_OR_RETURN(const bench::ServedModel served,
                     bench::FetchServedModel(url, f.tls_ca, f.tenants[0].key,
                                             /*timeout_s=*/30));
    if (t.model.empty()) t.model = served.id;
    served_vocab = served.vocab_size;
  }
  t.vocab_size =
      f.vocab_size.value_or(served_vocab.value_or(bench::kPortableVocabSize));
  t.label = url.ToString();
  if (!f.outputs.empty()) {
    t.outputs = std::make_unique<std::ofstream>(f.outputs);
    if (!*t.outputs) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot write --outputs ", f.outputs));
    }
  }
  t.sender =
      std::make_unique<bench::OpenAiSender>(url, t.model, f, t.outputs.get());
  return t;
}

absl::Status Bench(const BenchFlags& f) {
  ASSIGN_OR_RETURN(Target target, f.api == bench::Api::kGrpc ? GrpcTarget(f)
                                                             : OpenAiTarget(f));
  bench::Sender& sender = *target.sender;
  const Workload workload(f, target.vocab_size);

  bench::BenchSetup setup;
  setup.api = f.api == bench::Api::kGrpc ? "grpc" : "openai";
  setup.server = target.label;
  setup.model = target.model;
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
        bench::RunLevel(sender, f, workload, /*salt=*/1, f.warmup, std::nullopt,
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
        bench::RunLevel(sender, f, workload, /*salt=*/2 + k, f.requests,
                        f.duration, f.open_loop, f.levels[k], f.progress);
    run.all = bench::Aggregate(run.records, run.duration, f.slo);
    for (size_t t = 0; t < f.tenants.size(); ++t) {
      run.tenants.push_back(bench::Aggregate(run.records, run.duration, f.slo,
                                             static_cast<int>(t)));
    }
    if (f.per_tenant) {
      run.per_tenant = true;
      run.window = bench::CommonWindow(run.records,
                                       static_cast<int>(f.tenants.size()));
      if (run.window) {
        std::vector<double> expected;
        for (const Tenant& t : f.tenants) expected.push_back(t.share);
        run.service = bench::ServiceShares(run.records, *run.window, expected);
      }
    }
    failed += run.all.failed;
    if (first_error.empty()) first_error = run.all.first_error;
    runs.push_back(std::move(run));
  }

  std::cout << (f.json ? bench::FormatJson(setup, runs)
                       : bench::FormatTable(setup, runs))
            << std::flush;
  if (target.outputs && !target.outputs->flush()) {
    return absl::DataLossError(
        absl::StrCat("writing --outputs ", f.outputs, " failed"));
  }
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
