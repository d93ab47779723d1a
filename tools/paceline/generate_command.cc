// `paceline generate --model MODEL --prompt TEXT [--prompt TEXT ...]`: runs
// the prompts together through the serving loop (scheduler + the CPU or CUDA
// engine, engine/backend.h) and prints each continuation, constrained to a
// language when a constraint flag (constraint_flags.h) asks.

#include <algorithm>
#include <climits>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "engine/backend.h"
#include "engine/model/kv_layout.h"
#include "engine/model_loader.h"
#include "engine/sampling/grammar/grammar_cache.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/detokenizer.h"
#include "scheduler/offline_runner.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"
#include "tools/paceline/constraint_flags.h"

namespace paceline::tools {
namespace {

constexpr char kUsage[] =
    "usage: paceline generate --model MODEL --prompt TEXT [--prompt TEXT...]\n"
    "         [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "         [--seed S] [--threads N] [--backend cpu|cuda]\n"
    "         [--cpu-kernels measure|highest] [--state-dir DIR]\n"
    "         [--kv-dtype f32|f16|q8_0] [--max-draft-tokens N]\n"
    "         [--json-schema FILE | --grammar FILE | --regex PATTERN |\n"
    "          --choice A,B,C] [--flexible-whitespace] [--no-fast-forward]\n"
    "\n"
    "Generates a continuation of each TEXT and prints only the\n"
    "continuation to stdout. Several --prompt run together through the\n"
    "serving loop (continuous batching over the paged KV cache); each\n"
    "continuation is printed after a line `--- [i] TEXT`, and equals what\n"
    "that prompt gives alone. BOS is added when the model's metadata asks\n"
    "for it; generation stops at end-of-generation tokens, after N tokens, or\n"
    "at the model's context length. The last line on stderr is the timing\n"
    "(model load excluded), summed over the prompts:\n"
    "  prompt: N tokens, X tok/s; generated: M tokens, Y tok/s\n"
    "X is prompt tokens over the time from the first admission to the last\n"
    "first token; Y is generated tokens after each first one over the time\n"
    "from the first first-token to the last finish.\n"
    "With a constraint flag (one at most) each continuation belongs to its\n"
    "language, as with the daemon's SamplingOptions.constraint: the model\n"
    "samples only among the tokens the language allows, and ends where it\n"
    "may end. One that reaches N tokens first is cut there, said on stderr.\n"
    "A constraint that does not compile fails before generating (`paceline\n"
    "grammar` explains it). Where the language allows one continuation only,\n"
    "its tokens are appended without sampling (fast-forward, as the daemon\n"
    "does; --no-fast-forward samples them); a line on stderr counts them.\n"
    "\n"
    "  --model MODEL      a GGUF file, or dummy:SHAPE[:DTYPE] for random\n"
    "                     weights of a named shape with a byte-level "
    "tokenizer\n"
    "  --prompt TEXT      a prompt (repeat the flag for several)\n"
    "  --max-tokens N     most tokens to generate (default 128)\n"
    "  --temperature T    0 = greedy (default 0)\n"
    "  --top-k K          keep the K most likely tokens (default 0: off)\n"
    "  --top-p P          nucleus sampling mass in (0, 1] (default 1: off)\n"
    "  --seed S           sampling seed (default 0)\n"
    "  --threads N        CPU threads (default 0: one per core)\n"
    "  --cpu-kernels K    measure (default): each weight type's matmul\n"
    "                     kernels at the level measured fastest at start\n"
    "                     (said on stderr); highest: the highest the CPU\n"
    "                     runs, unmeasured (as the daemon's cpu_kernels)\n"
    "  --state-dir DIR    keep the measured choices there for later runs\n"
    "                     on this CPU model (default: measure every run)\n"
    "  --backend B        cpu or cuda (default: cuda when this build has it\n"
    "                     and a GPU is present, else cpu; said on stderr)\n"
    "  --kv-dtype D       K/V element type, f32, f16 or q8_0 (CPU only)\n"
    "                     (default: the backend's, f16 on the CPU)\n"
    "  --max-draft-tokens N  speculative decoding with n-gram drafts: up to\n"
    "                     N (0..16) draft tokens per step, verified in the\n"
    "                     same step, whatever the step's size (the daemon\n"
    "                     caps that); the output is unchanged (default 0:\n"
    "                     off). Adds a line on stderr: drafts, accepted,\n"
    "                     engine steps\n";

std::string Usage() { return absl::StrCat(kUsage, kConstraintFlagsHelp); }

constexpr FlagDef kFlags[] = {
    {"model", true},
    {"prompt", true},
    {"max-tokens", true},
    {"temperature", true},
    {"top-k", true},
    {"top-p", true},
    {"seed", true},
    {"threads", true},
    {"cpu-kernels", true},
    {"state-dir", true},
    {"backend", true},
    {"kv-dtype", true},
    {"max-draft-tokens", true},
    {"no-fast-forward", false},
    kJsonSchemaFlag,
    kGrammarFlag,
    kRegexFlag,
    kChoiceFlag,
    kFlexibleWhitespaceFlag,
};

constexpr int32_t kPrefillChunk = 512;

struct GenerateFlags {
  std::string model;
  std::vector<std::string> prompts;
  int64_t max_tokens = 128;
  int32_t max_draft_tokens = 0;
  bool fast_forward = true;
  int threads = 0;
  bool measure_kernels = true;
  std::string state_dir;
  std::string backend;  // "", "cpu" or "cuda"
  std::optional<engine::GgmlType> kv_type;
  engine::SamplingParams sampling;
  std::optional<engine::grammar::Constraint> constraint;
};

absl::StatusOr<GenerateFlags> ReadFlags(const ParsedArgs& args) {
  GenerateFlags f;
  f.sampling.temperature = 0;
  if (!args.Get("model").has_value()) {
    return absl::InvalidArgumentError("--model is required");
  }
  if (!args.Get("prompt").has_value()) {
    return absl::InvalidArgumentError("--prompt is required");
  }
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  f.model = *args.Get("model");
  f.prompts = args.GetAll("prompt");
  ASSIGN_OR_RETURN(const std::optional<int64_t> max_tokens,
                   GetIntFlag(args, "max-tokens", {.min = 0}));
  f.max_tokens = max_tokens.value_or(f.max_tokens);
  ASSIGN_OR_RETURN(const std::optional<int32_t> drafts,
                   GetInt32Flag(args, "max-draft-tokens",
                                {.min = 0, .max = scheduler::kMaxDraftTokens}));
  f.max_draft_tokens = drafts.value_or(0);
  f.fast_forward = !args.Has("no-fast-forward");
  ASSIGN_OR_RETURN(const std::optional<int64_t> threads,
                   GetIntFlag(args, "threads", {.min = 0, .max = 1024}));
  f.threads = static_cast<int>(threads.value_or(f.threads));
  if (auto v = args.Get("cpu-kernels")) {
    if (*v != "measure" && *v != "highest") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cpu-kernels must be measure or highest, got '", *v, "'"));
    }
    f.measure_kernels = *v == "measure";
  }
  f.state_dir = args.Get("state-dir").value_or("");
  if (auto v = args.Get("backend")) {
    if (*v != "cpu" && *v != "cuda") {
      return absl::InvalidArgumentError(
          absl::StrCat("--backend must be cpu or cuda, got '", *v, "'"));
    }
    f.backend = *v;
  }
  if (auto v = args.Get("kv-dtype")) {
    absl::StatusOr<engine::GgmlType> t = engine::ParseKvDtype(*v);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kv-dtype ", t.status().message()));
    }
    f.kv_type = *t;
  }
  ASSIGN_OR_RETURN(const std::optional<double> temperature,
                   GetNumberFlag(args, "temperature"));
  if (temperature) f.sampling.temperature = static_cast<float>(*temperature);
  ASSIGN_OR_RETURN(const std::optional<int32_t> top_k,
                   GetInt32Flag(args, "top-k", {.min = 0}));
  f.sampling.top_k = top_k.value_or(f.sampling.top_k);
  ASSIGN_OR_RETURN(const std::optional<double> top_p,
                   GetNumberFlag(args, "top-p"));
  if (top_p) f.sampling.top_p = static_cast<float>(*top_p);
  ASSIGN_OR_RETURN(const std::optional<uint64_t> seed,
                   GetUint64Flag(args, "seed"));
  f.sampling.seed = seed.value_or(f.sampling.seed);
  ASSIGN_OR_RETURN(f.constraint, ReadConstraintFlags(args));
  // The vocabulary is not known yet; no flag here depends on it.
  RETURN_IF_ERROR(engine::Validate(f.sampling, INT32_MAX));
  return f;
}

double Rate(int64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

// The engine the flags choose (engine/backend.h), its KV pool sized to run
// `requests` together; says the choice on stderr.
absl::StatusOr<std::unique_ptr<engine::Engine>> MakeEngine(
    const GenerateFlags& f, std::shared_ptr<const engine::ModelWeights> weights,
    absl::Span<const scheduler::OfflineRequest> requests) {
  engine::BackendOptions options;
  options.backend = f.backend;
  options.backend_setting = "--backend";
  options.threads = f.threads;
  options.measure_kernels = f.measure_kernels;
  options.state_dir = f.state_dir;
  options.kv_type = f.kv_type;
  options.max_tokens_per_step = kPrefillChunk;
  // Every request at once (a hybrid model's state slots are sized by it).
  options.max_running = static_cast<int32_t>(
      std::clamp<size_t>(requests.size(), 1, size_t{1} << 16));
  options.kv_blocks = scheduler::KvBlocksToRunTogether(
      requests, options.block_size,
      engine::PlanKvLayout(weights->config(), options.kv_window_release),
      options.max_tokens_per_step);
  ASSIGN_OR_RETURN(engine::Backend backend,
                   engine::MakeBackend(options, std::move(weights)));
  for (const std::string& line : backend.log_lines) {
    std::cerr << "paceline generate: " << line << "\n";
  }
  return std::move(backend.engine);
}

// The constraint compiled over the model's vocabulary, as the daemon's
// request builder does: the token-mask prototype every request clones, and
// the tables behind it (to tell a cut output from a complete one).
struct CompiledConstraint {
  std::shared_ptr<const engine::TokenMask> mask;  // null: no constraint
  std::shared_ptr<engine::grammar::MaskTables> tables;
};

// The error is the compiler's, after the flag.
absl::StatusOr<CompiledConstraint> CompileConstraint(
    const GenerateFlags& f, const engine::Tokenizer& tokenizer) {
  if (!f.constraint.has_value()) return CompiledConstraint{};
  engine::grammar::GrammarCache grammars(
      engine::grammar::TokenTrie::FromTokenizer(tokenizer));
  CompiledConstraint out;
  absl::StatusOr<std::shared_ptr<const engine::TokenMask>> mask =
      grammars.Mask(*f.constraint, "offline");
  if (!mask.ok()) {
    return absl::Status(mask.status().code(),
                        absl::StrCat(ConstraintFlagName(f.constraint->kind),
                                     ": ", mask.status().message()));
  }
  out.mask = *std::move(mask);
  ASSIGN_OR_RETURN(out.tables, grammars.Tables(*f.constraint, "offline"));
  return out;
}

// Whether `tokens` spell a whole text of the constraint's language.
bool SpellsWholeText(const engine::grammar::MaskTables& tables,
                     absl::Span<const int32_t> tokens) {
  engine::grammar::Matcher matcher(tables.grammar_shared());
  for (int32_t id : tokens) {
    if (!matcher.AcceptBytes(tables.vocab().bytes(id))) return false;
  }
  return matcher.CanFinish();
}

absl::Status Generate(const GenerateFlags& f) {
  ASSIGN_OR_RETURN(engine::LoadedModel model, engine::OpenModel(f.model));
  const engine::ModelConfig& config = model.weights->config();
  const engine::Tokenizer& tokenizer = *model.tokenizer;
  ASSIGN_OR_RETURN(const CompiledConstraint constraint,
                   CompileConstraint(f, tokenizer));

  std::vector<scheduler::OfflineRequest> requests;
  int64_t prompt_tokens = 0;
  for (size_t i = 0; i < f.prompts.size(); ++i) {
    std::vector<int32_t> prompt =
        tokenizer.Encode(f.prompts[i], tokenizer.add_bos());
    if (prompt.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt ", i + 1, " is empty and the model adds no BOS token"));
    }
    const int64_t n_prompt = static_cast<int64_t>(prompt.size());
    if (n_prompt >= config.context_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt ", i + 1, " is ", n_prompt,
          " tokens; the model's context is ", config.context_length));
    }
    prompt_tokens += n_prompt;
    scheduler::OfflineRequest r;
    r.prompt = std::move(prompt);
    r.sampling = f.sampling;
    r.sampling.mask = constraint.mask;
    r.max_draft_tokens = f.max_draft_tokens;
    if (constraint.mask != nullptr && f.fast_forward) {
      r.max_forced_tokens = scheduler::kMaxForcedTokens;
    }
    // The last generated token is never fed back: the context holds
    // prompt + max_tokens - 1 positions.
    r.stop.max_tokens = static_cast<int32_t>(
        std::min(f.max_tokens, config.context_length - n_prompt + 1));
    requests.push_back(std::move(r));
  }

  std::vector<scheduler::OfflineResult> results(requests.size());
  scheduler::OfflineStats stats;
  if (f.max_tokens > 0) {
    ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> eng,
                     MakeEngine(f, model.weights, requests));
    // The caller asked for N drafts: no step cap (the daemon's
    // scheduler.speculation_max_step_tokens) holds them back.
    scheduler::OfflineOptions options;
    options.speculation_max_step_tokens = kPrefillChunk;
    ASSIGN_OR_RETURN(
        results, scheduler::RunOffline(std::move(eng), tokenizer,
                                       std::move(requests), options, &stats));
  }

  absl::Time first_admitted = absl::InfiniteFuture();
  absl::Time last_first_token = absl::InfinitePast();
  absl::Time last_finished = absl::InfinitePast();
  int64_t delivered = 0;    // generated tokens printed (no EOS)
  int64_t after_first = 0;  // of those, the ones after each first one
  for (size_t i = 0; i < results.size(); ++i) {
    const scheduler::OfflineResult& r = results[i];
    if (results.size() > 1) {
      std::cout << "--- [" << i + 1 << "] " << f.prompts[i] << "\n";
    }
    engine::IncrementalDetokenizer text(&tokenizer);
    for (int32_t id : r.tokens) std::cout << text.Push(id);
    std::cout << text.Flush() << "\n";
    if (constraint.tables != nullptr &&
        r.finish.reason == scheduler::FinishReason::kLength &&
        !SpellsWholeText(*constraint.tables, r.tokens)) {
      std::cerr << "paceline generate: prompt " << i + 1 << ": cut at "
                << r.tokens.size()
                << " tokens, before the constraint's language ends\n";
    }
    if (!r.finish.status.ok() &&
        r.finish.reason == scheduler::FinishReason::kError) {
      return absl::Status(
          r.finish.status.code(),
          absl::StrCat("prompt ", i + 1, ": ", r.finish.status.message()));
    }
    const scheduler::RequestTimings& t = r.finish.timings;
    first_admitted = std::min(first_admitted, t.first_scheduled);
    last_first_token = std::max(last_first_token, t.first_token);
    last_finished = std::max(last_finished, t.finished);
    delivered += static_cast<int64_t>(r.tokens.size());
    after_first +=
        std::max<int64_t>(static_cast<int64_t>(r.tokens.size()) - 1, 0);
  }
  std::cout << std::flush;
  if (f.max_draft_tokens > 0) {
    int64_t drafted = 0, accepted = 0;
    for (const scheduler::OfflineResult& r : results) {
      drafted += r.finish.usage.draft_tokens;
      accepted += r.finish.usage.accepted_draft_tokens;
    }
    std::cerr << absl::StrFormat(
        "speculation: %d draft tokens, %d accepted (%.1f%%); %d engine "
        "steps\n",
        drafted, accepted, drafted > 0 ? 100.0 * accepted / drafted : 0.0,
        stats.steps);
  }
  if (constraint.mask != nullptr) {
    int64_t forced = 0;
    for (const scheduler::OfflineResult& r : results) {
      forced += r.finish.usage.forced_tokens;
    }
    std::cerr << absl::StrFormat(
        "fast-forward: %d tokens forced%s; %d engine steps\n", forced,
        f.fast_forward ? "" : " (off)", stats.steps);
  }
  const auto seconds = [](absl::Time from, absl::Time to) {
    return from < to && to != absl::InfiniteFuture() &&
                   from != absl::InfinitePast()
               ? absl::ToDoubleSeconds(to - from)
               : 0.0;
  };
  std::cerr << absl::StrFormat(
      "prompt: %d tokens, %.1f tok/s; generated: %d tokens, %.1f tok/s\n",
      prompt_tokens,
      Rate(prompt_tokens, seconds(first_admitted, last_first_token)), delivered,
      Rate(after_first, seconds(last_first_token, last_finished)));
  return absl::OkStatus();
}

}  // namespace

int RunGenerate(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("generate", Usage(), parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << Usage();
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok())
    return UsageError("generate", Usage(), flags.status().message());
  if (absl::Status s = Generate(*flags); !s.ok()) {
    return Failure("generate", s);
  }
  return kExitOk;
}

}  // namespace paceline::tools
