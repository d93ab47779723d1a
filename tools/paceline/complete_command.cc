// `paceline complete --server ADDR --prompt TEXT`: asks a running pacelined
// for a continuation, over Complete (the whole text at once) or, with
// --stream, over Generate (deltas written as they are delivered). A
// constraint flag (constraint_flags.h) becomes SamplingOptions.constraint;
// the daemon compiles it.

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/grpcpp.h"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/constraint_flags.h"
#include "tools/paceline/grpc_client.h"

namespace paceline::tools {
namespace {

namespace pb = ::paceline::v1;

constexpr char kUsage[] =
    "usage: paceline complete --server ADDR [--api-key KEY] --prompt TEXT\n"
    "         [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "         [--seed S] [--pace TPS] [--burst N]\n"
    "         [--priority interactive|standard|batch] [--stop STR...]\n"
    "         [--stream] [--timeout SECONDS] [--tls-ca FILE]\n"
    "         [--json-schema FILE | --grammar FILE | --regex PATTERN |\n"
    "          --choice A,B,C] [--flexible-whitespace]\n"
    "\n"
    "Asks the pacelined at ADDR for a continuation of TEXT and prints it to\n"
    "stdout, followed by a newline. Without --stream the Complete call\n"
    "returns the whole text at once; with --stream the Generate call writes\n"
    "each delta as the server delivers it, at the requested pace. Unset\n"
    "options take the server's (and the tenant's) defaults. After the text,\n"
    "one line on stderr:\n"
    "  finish: REASON; prompt N tokens (C cached), generated M tokens;\n"
    "  generation G s, delivery D s\n"
    "G and D are the seconds from the request's acceptance to the end of\n"
    "generation and to the last delivered delta. A failed call prints\n"
    "`paceline complete: error: CODE: MESSAGE` and exits 1.\n"
    "A constraint flag (one at most) sends SamplingOptions.constraint: the\n"
    "server compiles it for the model (a refusal is INVALID_ARGUMENT naming\n"
    "the keyword; `paceline grammar` explains it) and the output belongs to\n"
    "its language, unless max_tokens cuts it first (finish: length).\n"
    "\n"
    "  --server ADDR      host:port of pacelined\n"
    "  --api-key KEY      the tenant's API key (default: $PACELINE_API_KEY)\n"
    "  --prompt TEXT      the prompt\n"
    "  --max-tokens N     most tokens to generate\n"
    "  --temperature T    0 = greedy\n"
    "  --top-k K          keep the K most likely tokens (0: off)\n"
    "  --top-p P          nucleus sampling mass in (0, 1]\n"
    "  --seed S           sampling seed\n"
    "  --pace TPS         delivery pace in tokens/s (0: as generated)\n"
    "  --burst N          tokens delivered at once before pacing starts\n"
    "  --priority P       interactive, standard or batch\n"
    "  --stop STR         text that ends the generation (repeatable)\n"
    "  --stream           stream deltas (Generate) instead of Complete\n"
    "  --timeout SECONDS  deadline for the whole call (default: none)\n"
    "  --tls-ca FILE      use TLS, trusting the PEM certificates in FILE\n";

std::string Usage() { return absl::StrCat(kUsage, kConstraintFlagsHelp); }

constexpr FlagDef kFlags[] = {
    {"server", true},      {"api-key", true},
    {"prompt", true},      {"max-tokens", true},
    {"temperature", true}, {"top-k", true},
    {"top-p", true},       {"seed", true},
    {"pace", true},        {"burst", true},
    {"priority", true},    {"stop", true},
    {"stream", false},     {"timeout", true},
    {"tls-ca", true},      kJsonSchemaFlag,
    kGrammarFlag,          kRegexFlag,
    kChoiceFlag,           kFlexibleWhitespaceFlag,
};

struct CompleteFlags {
  std::string server;
  std::string api_key;
  std::string tls_ca;  // empty: an insecure channel
  bool stream = false;
  std::optional<double> timeout_s;
  pb::GenerateRequest request;
};

absl::StatusOr<pb::Priority> ParsePriority(absl::string_view value) {
  if (value == "interactive") return pb::PRIORITY_INTERACTIVE;
  if (value == "standard") return pb::PRIORITY_STANDARD;
  if (value == "batch") return pb::PRIORITY_BATCH;
  return absl::InvalidArgumentError(absl::StrCat(
      "--priority: '", value, "' is not interactive, standard or batch"));
}

// Where to send, as whom, how long to wait (--server is given).
absl::Status ReadConnectionFlags(const ParsedArgs& args, CompleteFlags& f) {
  f.server = *args.Get("server");
  if (auto v = args.Get("api-key")) {
    f.api_key = *v;
  } else if (const char* env = std::getenv("PACELINE_API_KEY")) {
    f.api_key = env;
  }
  if (f.api_key.empty()) {
    return absl::InvalidArgumentError(
        "--api-key (or PACELINE_API_KEY) is required");
  }
  f.stream = args.Has("stream");
  if (auto v = args.Get("tls-ca")) f.tls_ca = *v;
  ASSIGN_OR_RETURN(f.timeout_s, GetNumberFlag(args, "timeout", kPositive));
  return absl::OkStatus();
}

// The request's sampling fields; each is set only when its flag is given.
absl::Status ReadSamplingFlags(const ParsedArgs& args, pb::SamplingOptions& s) {
  ASSIGN_OR_RETURN(const std::optional<double> temperature,
                   GetNumberFlag(args, "temperature"));
  if (temperature) s.set_temperature(static_cast<float>(*temperature));
  ASSIGN_OR_RETURN(const std::optional<int32_t> top_k,
                   GetInt32Flag(args, "top-k", {.min = 0}));
  if (top_k) s.set_top_k(*top_k);
  ASSIGN_OR_RETURN(const std::optional<double> top_p,
                   GetNumberFlag(args, "top-p"));
  if (top_p) s.set_top_p(static_cast<float>(*top_p));
  ASSIGN_OR_RETURN(const std::optional<uint64_t> seed,
                   GetUint64Flag(args, "seed"));
  if (seed) s.set_seed(*seed);
  return absl::OkStatus();
}

// The request: prompt (given), stopping, sampling, delivery, priority.
absl::Status ReadRequestFlags(const ParsedArgs& args, pb::GenerateRequest& r) {
  r.set_text(*args.Get("prompt"));
  ASSIGN_OR_RETURN(const std::optional<int32_t> max_tokens,
                   GetInt32Flag(args, "max-tokens", {.min = 0}));
  if (max_tokens) r.mutable_stopping()->set_max_tokens(*max_tokens);
  for (const std::string& stop : args.GetAll("stop")) {
    r.mutable_stopping()->add_stop(stop);
  }
  if (args.Has("temperature") || args.Has("top-k") || args.Has("top-p") ||
      args.Has("seed")) {
    RETURN_IF_ERROR(ReadSamplingFlags(args, *r.mutable_sampling()));
  }
  ASSIGN_OR_RETURN(const std::optional<engine::grammar::Constraint> constraint,
                   ReadConstraintFlags(args));
  if (constraint.has_value()) {
    *r.mutable_sampling()->mutable_constraint() =
        ConstraintToProto(*constraint);
  }
  ASSIGN_OR_RETURN(const std::optional<double> pace,
                   GetNumberFlag(args, "pace", kNonNegative));
  if (pace) r.mutable_delivery()->set_pace_tokens_per_s(*pace);
  ASSIGN_OR_RETURN(const std::optional<int32_t> burst,
                   GetInt32Flag(args, "burst", {.min = 1}));
  if (burst) r.mutable_delivery()->set_burst_tokens(*burst);
  if (auto v = args.Get("priority")) {
    ASSIGN_OR_RETURN(const pb::Priority p, ParsePriority(*v));
    r.set_priority(p);
  }
  return absl::OkStatus();
}

// Range checks are the server's (it names the field); here only what the
// flags' types need.
absl::StatusOr<CompleteFlags> ReadFlags(const ParsedArgs& args) {
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  for (absl::string_view flag : {"server", "prompt"}) {
    if (!args.Has(flag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " is required"));
    }
  }
  CompleteFlags f;
  RETURN_IF_ERROR(ReadConnectionFlags(args, f));
  RETURN_IF_ERROR(ReadRequestFlags(args, f.request));
  return f;
}

void Prepare(const CompleteFlags& f, grpc::ClientContext* ctx) {
  ctx->AddMetadata("authorization", absl::StrCat("Bearer ", f.api_key));
  if (f.timeout_s.has_value()) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::duration<double>(*f.timeout_s)));
  }
}

absl::string_view ReasonName(pb::FinishReason reason) {
  switch (reason) {
    case pb::FINISH_REASON_EOS:
      return "eos";
    case pb::FINISH_REASON_STOP_SEQUENCE:
      return "stop";
    case pb::FINISH_REASON_LENGTH:
      return "length";
    case pb::FINISH_REASON_CANCELLED:
      return "cancelled";
    case pb::FINISH_REASON_ERROR:
      return "error";
    default:
      return "unspecified";
  }
}

// Seconds from the request's acceptance to `to`; nullopt when either
// moment did not come.
std::optional<double> SinceQueued(const pb::Timings& t, bool has_to,
                                  const google::protobuf::Timestamp& to) {
  if (!t.has_queued() || !has_to) return std::nullopt;
  const google::protobuf::Timestamp& from = t.queued();
  return static_cast<double>(to.seconds() - from.seconds()) +
         static_cast<double>(to.nanos() - from.nanos()) * 1e-9;
}

std::string Seconds(std::optional<double> s) {
  return s.has_value() ? absl::StrFormat("%.2f s", *s) : "-";
}

// The stderr summary line; see kUsage.
std::string FinishLine(const pb::Finished& fin) {
  std::string reason(ReasonName(fin.reason()));
  if (fin.reason() == pb::FINISH_REASON_STOP_SEQUENCE) {
    if (!fin.stop_sequence().empty()) {
      absl::StrAppend(&reason, " ", JsonQuote(fin.stop_sequence()));
    } else if (fin.has_stop_token_id()) {
      absl::StrAppend(&reason, " (token ", fin.stop_token_id(), ")");
    }
  }
  const pb::Usage& u = fin.usage();
  const pb::Timings& t = fin.timings();
  return absl::StrFormat(
      "finish: %s; prompt %d tokens (%d cached), generated %d tokens; "
      "generation %s, delivery %s",
      reason, u.prompt_tokens(), u.cached_prompt_tokens(),
      u.completion_tokens(),
      Seconds(SinceQueued(t, t.has_generation_done(), t.generation_done())),
      Seconds(SinceQueued(t, t.has_last_delivered(), t.last_delivered())));
}

// After the text: the summary line, and a failure for a generation that
// the server ended early.
absl::Status Report(const pb::Finished& fin) {
  std::cerr << FinishLine(fin) << "\n";
  if (fin.reason() == pb::FINISH_REASON_ERROR) {
    return absl::InternalError(
        absl::StrCat("generation failed: ", fin.message()));
  }
  if (fin.reason() == pb::FINISH_REASON_CANCELLED) {
    return absl::CancelledError(
        absl::StrCat("generation cancelled: ", fin.message()));
  }
  return absl::OkStatus();
}

absl::Status CompleteUnary(pb::Paceline::Stub& stub, const CompleteFlags& f) {
  grpc::ClientContext ctx;
  Prepare(f, &ctx);
  pb::CompleteResponse response;
  const grpc::Status s = stub.Complete(&ctx, f.request, &response);
  if (!s.ok()) return FromGrpc(s, ctx);
  std::cout << response.text() << "\n" << std::flush;
  return Report(response.finished());
}

absl::Status CompleteStreaming(pb::Paceline::Stub& stub,
                               const CompleteFlags& f) {
  grpc::ClientContext ctx;
  Prepare(f, &ctx);
  std::unique_ptr<grpc::ClientReader<pb::GenerateResponse>> reader =
      stub.Generate(&ctx, f.request);
  pb::GenerateResponse event;
  std::optional<pb::Finished> finished;
  bool wrote = false;
  while (reader->Read(&event)) {
    if (event.has_delta() && !event.delta().text().empty()) {
      std::cout << event.delta().text() << std::flush;
      wrote = true;
    } else if (event.has_finished()) {
      finished = event.finished();
    }
  }
  const grpc::Status s = reader->Finish();
  if (wrote || s.ok()) std::cout << "\n" << std::flush;
  if (!s.ok()) return FromGrpc(s, ctx);
  if (!finished.has_value()) {
    return absl::InternalError("the stream ended without a Finished message");
  }
  return Report(*finished);
}

absl::Status Complete(const CompleteFlags& f) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   Connect(f.server, f.tls_ca));
  std::unique_ptr<pb::Paceline::Stub> stub = pb::Paceline::NewStub(channel);
  return f.stream ? CompleteStreaming(*stub, f) : CompleteUnary(*stub, f);
}

}  // namespace

int RunComplete(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("complete", Usage(), parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << Usage();
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok()) {
    return UsageError("complete", Usage(), flags.status().message());
  }
  if (absl::Status s = Complete(*flags); !s.ok()) {
    return Failure("complete", s);
  }
  return kExitOk;
}

}  // namespace paceline::tools
