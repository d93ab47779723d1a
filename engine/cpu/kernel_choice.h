#ifndef PACELINE_ENGINE_CPU_KERNEL_CHOICE_H_
#define PACELINE_ENGINE_CPU_KERNEL_CHOICE_H_

// Which matmul kernels run on this CPU, chosen by measurement: the fastest
// level is not always the highest (AMD Zen 4 runs AVX-512 as two 256-bit
// halves), so at engine start-up each weight type of the model is timed at
// each of its candidate levels (MatMulCandidateLevels) and the faster one
// set process-wide (SetMatMulLevel), before the weights are packed.
//
// Per type: a matrix of the model's shape for it (the widest column count
// among its largest matrices; as many rows as the model's matrices of the
// type hold bytes, at most max_bytes, so the step reads from the same cache
// level as the model's decode step), filled with rows quantized from
// random values. Each candidate is timed at one token (decode) and at
// kBatchTokens tokens, in alternating rounds, the minimum of each kept;
// the score is the product of the two (DecideLevel). A lower level is taken
// only when it beats the highest by min_gain (kMinGain for types whose results
// differ between levels, none for MatMulSameBitsAtEveryLevel types), so a
// noisy measurement does not flip a machine between paths for nothing.
// Types whose matrices hold fewer than min_bytes, or with one candidate,
// keep the highest level unmeasured.
//
// The choices are cached per CPU model in `cache_dir` (kernel_choice_cache
// .h), keyed by type, shape, threads and candidates: a later start on the
// same CPU model reads them instead of measuring. A choice whose rounds
// disagreed (a busy machine) is used but not cached.
//
// Thread-safety: call at start-up, before any engine runs (it sets the
// process-wide levels MatMul reads).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/cpu/cpu_features.h"
#include "engine/gguf/ggml_type.h"
#include "engine/model/weight_view.h"

namespace paceline::engine::cpu {

inline constexpr int64_t kBatchTokens = 16;
inline constexpr double kMinGain = 0.10;

struct KernelChoiceOptions {
  int threads = 0;        // as the engine's: 0 = one per hardware thread
  std::string cache_dir;  // "" = no cache: measure every time
  uint64_t max_bytes = uint64_t{64} << 20;
  uint64_t min_bytes = uint64_t{4} << 20;
  int rounds = 3;  // timed rounds after one warm-up round
};

struct LevelTiming {
  IsaLevel level = IsaLevel::kScalar;
  double one_ms = 0;    // one token
  double batch_ms = 0;  // kBatchTokens tokens
};

struct KernelChoice {
  GgmlType type = GgmlType::kF32;
  int64_t cols = 0, rows = 0;  // the shape measured (or that would be)
  IsaLevel level = IsaLevel::kScalar;
  // How it was chosen: "measured", "cached", "one candidate", "too small
  // to measure".
  std::string how;
  std::vector<LevelTiming> timings;  // measured: one per candidate
  // Measured: every timed round found the same level fastest. Only steady
  // choices are cached; a start on a busy machine measures again next time.
  bool steady = true;
};

struct KernelChoices {
  std::vector<KernelChoice> types;    // in type order
  double seconds = 0;                 // spent measuring
  std::string cache_file;             // "" without a cache
  std::vector<std::string> warnings;  // an unreadable or unwritable cache
};

struct LevelDecision {
  IsaLevel level = IsaLevel::kScalar;
  bool steady = true;                // KernelChoice::steady
  std::vector<LevelTiming> timings;  // per level, the minima over the rounds
};

// The choice from timed rounds (each: one LevelTiming per candidate level,
// highest level first, the same order in every round): the level with the
// lowest product of the minima of its one-token and batch times, where a
// lower level than the first must beat it by `min_gain` (a fraction);
// steady when each round alone ranks the same level fastest.
LevelDecision DecideLevel(absl::Span<const std::vector<LevelTiming>> rounds,
                          double min_gain);

// Chooses a level for each weight type among `matrices` (the model's, in
// any layout) and sets it (SetMatMulLevel). Errors only for what the
// measurement itself cannot do (a type QuantizeRow cannot write); a cache
// that cannot be read or written is a warning.
absl::StatusOr<KernelChoices> ChooseKernels(
    absl::Span<const WeightView> matrices, const KernelChoiceOptions& options);

// One line for the start-up log: per type the level and why, with the
// timings when measured, e.g. "Q4_K avx512 (measured: 1 token avx512
// 1.21 ms, avx2 1.64 ms; 16 tokens ...)".
std::string KernelChoicesLine(const KernelChoices& choices);

}  // namespace paceline::engine::cpu

#endif  // PACELINE_ENGINE_CPU_KERNEL_CHOICE_H_
