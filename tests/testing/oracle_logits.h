#ifndef PACELINE_TESTS_TESTING_ORACLE_LOGITS_H_
#define PACELINE_TESTS_TESTING_ORACLE_LOGITS_H_

// llama.cpp's logits as the oracle (../shared/oracle, README inside): the
// files, their references, and the comparison every engine's oracle test
// makes. For every stored position: max |log-softmax difference| over
// llama.cpp's top 20 tokens, divided by the std of llama.cpp's logits
// (within OracleTolerance), and whether the argmax agrees wherever
// llama.cpp's top two differ by more than 0.05.

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"

namespace paceline::testing {

// ../shared/oracle
std::filesystem::path OracleDir();
// ../shared/oracle-next: the architectures of issues 37-38 (README there),
// the same layout and conventions.
std::filesystem::path OracleNextDir();

// The .gguf files under OracleDir()/models, sorted; empty when there are
// none.
std::vector<std::filesystem::path> OracleModelFiles();

// Whether the file (its stem, e.g. "llama-base-q4_k_m") holds quantized
// weights, and the tolerance on the relative difference: 0.002 for F32 /
// F16 files, 0.08 for quantized ones (the README's "how close is close");
// 0.01 for the gemma3 and gpt-oss float files, whose references carry
// llama.cpp's F16 GELU table and F16 cache (oracle-next's README).
bool OracleIsQuantized(const std::string& name);
double OracleTolerance(const std::string& name);

struct OracleMeasure {
  double max_rel = 0;      // the worst position's relative difference
  int positions = 0;       // positions compared
  int argmax_checked = 0;  // positions with a clear llama.cpp argmax
  int argmax_equal = 0;
  // llama.cpp's top-two margin at each checked position whose argmax we
  // did not match.
  std::vector<double> flip_margins;
  // FNV-1a of every compared row's float bits, in order: equal for
  // bit-identical logits.
  uint64_t logits_hash = 14695981039346656037ull;
  // Every compared row, in order, where OracleRunOptions::keep_rows.
  std::vector<std::vector<float>> rows;
};

// Compares one row of logits with llama.cpp's `ref` (a JSON array of
// n_vocab numbers) into `m`. A size mismatch is a test failure.
void CompareOracleLogits(absl::Span<const float> ours,
                         const nlohmann::json& ref, OracleMeasure* m);

struct OracleRunOptions {
  // Reference lines whose prompt is longer are skipped (the CUDA
  // emulation is slow).
  int64_t max_prompt_tokens = std::numeric_limits<int64_t>::max();
  // Only the first this many greedy tokens are fed back.
  int64_t max_greedy_tokens = std::numeric_limits<int64_t>::max();
  // Where NAME.jsonl is; empty: OracleDir()/ref.
  std::filesystem::path ref_dir;
  // Keep each compared row in OracleMeasure::rows (to compare two engines
  // position by position).
  bool keep_rows = false;
};

// Feeds each reference line of `name` (options.ref_dir/NAME.jsonl) through
// `engine` — the prompt in chunks ending at each stored position, then
// llama.cpp's greedy tokens one at a time (teacher-forced) — comparing
// every stored row into `m`. An engine with several KV groups gets its
// tables from a pager over its pool (windowed blocks given back as the
// line runs). The engine needs block_size-sized blocks
// 0 .. (prompt + 16) / block_size and max_tokens_per_step of 64 at least.
// Errors: no reference file, a malformed line, or the engine's own.
absl::Status MeasureOracleFile(engine::Engine& engine, const std::string& name,
                               const OracleRunOptions& options,
                               OracleMeasure* m);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_ORACLE_LOGITS_H_
