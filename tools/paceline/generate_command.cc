// `paceline generate --model MODEL --prompt TEXT [...]`: runs one sequence
// through the CPU engine and prints the continuation.

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/detokenizer.h"
#include "engine/model_source.h"
#include "engine/sampler.h"
#include "tools/paceline/cli.h"
#include "tools/paceline/commands.h"

namespace paceline::tools {
namespace {

constexpr char kUsage[] =
    "usage: paceline generate --model MODEL --prompt TEXT [--max-tokens N]\n"
    "         [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "         [--threads N]\n"
    "\n"
    "Generates a continuation of TEXT on the CPU and prints only the\n"
    "continuation to stdout, as it is produced. BOS is added when the\n"
    "model's metadata asks for it; generation stops at end-of-generation\n"
    "tokens, after N tokens, or at the model's context length. The last line\n"
    "on stderr is the timing (model load excluded):\n"
    "  prompt: N tokens, X tok/s; generated: M tokens, Y tok/s\n"
    "where Y counts the decode steps after the first generated token (that\n"
    "one comes out of the prompt pass).\n"
    "\n"
    "  --model MODEL      a GGUF file, or dummy:SHAPE[:DTYPE] for random\n"
    "                     weights of a named shape with a byte-level "
    "tokenizer\n"
    "  --prompt TEXT      the prompt\n"
    "  --max-tokens N     most tokens to generate (default 128)\n"
    "  --temperature T    0 = greedy (default 0)\n"
    "  --top-k K          keep the K most likely tokens (default 0: off)\n"
    "  --top-p P          nucleus sampling mass in (0, 1] (default 1: off)\n"
    "  --seed S           sampling seed (default 0)\n"
    "  --threads N        CPU threads (default 0: one per core)\n";

constexpr FlagDef kFlags[] = {
    {"model", true},       {"prompt", true},  {"max-tokens", true},
    {"temperature", true}, {"top-k", true},   {"top-p", true},
    {"seed", true},        {"threads", true},
};

constexpr int32_t kPrefillChunk = 512;

absl::StatusOr<float> ParseFloatFlag(absl::string_view flag,
                                     absl::string_view value) {
  float f = 0;
  if (!absl::SimpleAtof(value, &f) || !std::isfinite(f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", value, "' is not a number"));
  }
  return f;
}

struct GenerateFlags {
  std::string model;
  std::string prompt;
  int64_t max_tokens = 128;
  int threads = 0;
  engine::SamplingParams sampling;
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
  f.prompt = *args.Get("prompt");
  if (auto v = args.Get("max-tokens")) {
    ASSIGN_OR_RETURN(f.max_tokens, ParseIntFlag("max-tokens", *v));
    if (f.max_tokens < 0) {
      return absl::InvalidArgumentError("--max-tokens must be >= 0");
    }
  }
  if (auto v = args.Get("threads")) {
    ASSIGN_OR_RETURN(const int64_t threads, ParseIntFlag("threads", *v));
    if (threads < 0 || threads > 1024) {
      return absl::InvalidArgumentError("--threads must be in [0, 1024]");
    }
    f.threads = static_cast<int>(threads);
  }
  if (auto v = args.Get("temperature")) {
    ASSIGN_OR_RETURN(f.sampling.temperature, ParseFloatFlag("temperature", *v));
  }
  if (auto v = args.Get("top-k")) {
    ASSIGN_OR_RETURN(const int64_t k, ParseIntFlag("top-k", *v));
    if (k < 0 || k > INT32_MAX) {
      return absl::InvalidArgumentError("--top-k must be >= 0");
    }
    f.sampling.top_k = static_cast<int32_t>(k);
  }
  if (auto v = args.Get("top-p")) {
    ASSIGN_OR_RETURN(f.sampling.top_p, ParseFloatFlag("top-p", *v));
  }
  if (auto v = args.Get("seed")) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(*v, &seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seed: '", *v, "' is not a whole number >= 0"));
    }
    f.sampling.seed = seed;
  }
  // The vocabulary is not known yet; no flag here depends on it.
  RETURN_IF_ERROR(engine::Validate(f.sampling, INT32_MAX));
  return f;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double Rate(int64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

absl::Status Generate(const GenerateFlags& f) {
  ASSIGN_OR_RETURN(engine::LoadedModel model, engine::OpenModel(f.model));
  const engine::ModelConfig& config = model.weights->config();
  const engine::Tokenizer& tokenizer = *model.tokenizer;
  const std::vector<int32_t> prompt =
      tokenizer.Encode(f.prompt, tokenizer.add_bos());
  if (prompt.empty()) {
    return absl::InvalidArgumentError(
        "the prompt is empty and the model adds no BOS token");
  }
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt >= config.context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt is ", n_prompt, " tokens; the model's context is ",
        config.context_length));
  }
  // The last generated token is never fed back, so n_prompt + max_tokens - 1
  // positions hold K/V.
  const int64_t max_new =
      std::min(f.max_tokens, config.context_length - n_prompt + 1);
  const int64_t positions = n_prompt + std::max<int64_t>(max_new - 1, 0);

  engine::cpu::CpuEngineOptions options;
  options.num_threads = f.threads;
  options.max_tokens_per_step =
      static_cast<int32_t>(std::min<int64_t>(n_prompt, kPrefillChunk));
  options.num_blocks = static_cast<int32_t>(
      (positions + options.block_size - 1) / options.block_size);
  ASSIGN_OR_RETURN(std::unique_ptr<engine::cpu::CpuEngine> eng,
                   engine::cpu::CpuEngine::Create(model.weights, options));
  ASSIGN_OR_RETURN(
      engine::SequenceSampler sampler,
      engine::SequenceSampler::Create(
          f.sampling, static_cast<int32_t>(config.n_vocab), prompt));
  engine::SamplerScratch scratch;
  engine::IncrementalDetokenizer detokenizer(&tokenizer);

  // The sequence owns blocks 0 .. num_blocks - 1 of the engine's pool.
  std::vector<int32_t> block_table(options.num_blocks);
  for (int32_t i = 0; i < options.num_blocks; ++i) block_table[i] = i;
  std::vector<float> logits(config.n_vocab);
  engine::ForwardBatch batch;
  batch.sequences.resize(1);
  engine::SequenceSlice& slice = batch.sequences[0];
  slice.block_table = block_table;

  const auto start = std::chrono::steady_clock::now();
  int64_t done = 0;
  while (done < n_prompt) {
    const int64_t chunk =
        std::min<int64_t>(n_prompt - done, options.max_tokens_per_step);
    batch.tokens.assign(prompt.begin() + done, prompt.begin() + done + chunk);
    slice.token_begin = 0;
    slice.token_count = static_cast<int32_t>(chunk);
    slice.position_begin = static_cast<int32_t>(done);
    slice.needs_logits = done + chunk == n_prompt;
    RETURN_IF_ERROR(eng->Forward(
        batch, absl::Span<float>(logits.data(),
                                 slice.needs_logits ? logits.size() : 0)));
    done += chunk;
  }
  const auto prefilled = std::chrono::steady_clock::now();

  int64_t generated = 0;
  int64_t decode_steps = 0;
  slice.needs_logits = true;
  slice.token_count = 1;
  while (generated < max_new) {
    ASSIGN_OR_RETURN(const engine::SampleResult sample,
                     sampler.Sample(logits, &scratch));
    if (tokenizer.IsEog(sample.token)) break;
    ++generated;
    std::cout << detokenizer.Push(sample.token) << std::flush;
    if (generated == max_new) break;
    batch.tokens.assign(1, sample.token);
    slice.position_begin = static_cast<int32_t>(n_prompt + generated - 1);
    RETURN_IF_ERROR(eng->Forward(batch, absl::MakeSpan(logits)));
    ++decode_steps;
  }
  const auto end = std::chrono::steady_clock::now();
  std::cout << detokenizer.Flush() << "\n" << std::flush;

  std::cerr << absl::StrFormat(
      "prompt: %d tokens, %.1f tok/s; generated: %d tokens, %.1f tok/s\n",
      n_prompt, Rate(n_prompt, Seconds(prefilled - start)), generated,
      Rate(decode_steps, Seconds(end - prefilled)));
  return absl::OkStatus();
}

}  // namespace

int RunGenerate(std::span<const std::string> args) {
  auto parsed = ParseArgs(args, kFlags);
  if (!parsed.ok()) {
    return UsageError("generate", kUsage, parsed.status().message());
  }
  if (parsed->help()) {
    std::cout << kUsage;
    return kExitOk;
  }
  auto flags = ReadFlags(*parsed);
  if (!flags.ok())
    return UsageError("generate", kUsage, flags.status().message());
  if (absl::Status s = Generate(*flags); !s.ok()) {
    return Failure("generate", s);
  }
  return kExitOk;
}

}  // namespace paceline::tools
