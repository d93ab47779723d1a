#ifndef PACELINE_TESTS_TESTING_MASKBENCH_H_
#define PACELINE_TESTS_TESTING_MASKBENCH_H_

// MaskBench (JSONSchemaBench's mask-computation benchmark, shared/structured/
// README.md) over the grammar engine: for every schema, the time to first
// mask (TTFM: JSON Schema -> grammar, Compile, the MaskTables, the first
// GrammarMask::Fill), then each test instance serialized compactly,
// tokenized without BOS and fed token by token: the time of each Fill
// (TBM), whether the mask allows the token, Accept; at the end whether an
// end-of-generation token is allowed. A valid instance refused anywhere is
// a validation error; an invalid one accepted through its end an
// invalidation error; a schema passes when it compiles and has neither.
// As the published runs do, a schema's instances share one compiled
// grammar and its mask tables.
//
// One thread. A schema that runs past its time budget stops where it is
// and counts as a timeout (a single compile or Fill is not interrupted).
// Nothing is caught: a crash in the engine is a crash of the run.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "engine/sampling/grammar/grammar.h"
#include "engine/sampling/grammar/mask_tables.h"
#include "engine/sampling/grammar/token_trie.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace paceline::testing {

// The schema front end under test: MaskBenchJsonSchema(), or a test's own.
using SchemaToGrammar = std::function<absl::StatusOr<engine::grammar::Grammar>(
    const nlohmann::ordered_json& schema)>;

// JsonSchemaToGrammar with its default options: what MaskBench measures
// (maskbench_json_schema.cc, apart so that a harness test with its own
// front end links without the JSON Schema compiler).
SchemaToGrammar MaskBenchJsonSchema();

struct MaskBenchOptions {
  SchemaToGrammar to_grammar;  // required: MaskBenchJsonSchema() or a test's
  // Every `sample_every`-th schema of the file (its lines 0, K, 2K, ...),
  // at most `limit` of them (-1: all).
  int32_t sample_every = 1;
  int64_t limit = -1;
  // Wall time per schema, compile and instances together.
  absl::Duration schema_budget = absl::Seconds(30);
  // A line to stderr every this many schemas (0: silent).
  int32_t progress_every = 0;
  // The token-mask entries grammars share (mask_tables.h), as the daemon's
  // grammar cache shares them across the requests of one model: those of
  // rules that call nothing (a JSON string, a number) are computed once for
  // the run. Null: none shared, every schema starts cold.
  std::shared_ptr<engine::grammar::SharedEntries> shared;
  // > 0: a line on stderr naming each schema with a mask slower than this
  // many µs or a first mask over 50 ms (bench/maskbench --slow).
  float slow_us = 0;
};

// What happened to one schema.
struct SchemaResult {
  std::string name;
  absl::Status compile;  // the front end's or Compile's error; OK if none
  double ttfm_us = 0;    // when it compiled
  // Parts of it (also when they fail): the front end, Compile; the rest is
  // the MaskTables and the first mask.
  double grammar_us = 0;
  double compile_us = 0;
  double seconds = 0;     // wall time: compile (failed or not), instances
  int32_t instances = 0;  // run (all of them unless timed out)
  int64_t tokens = 0;     // accepted, all instances together
  int32_t valid_rejected = 0;
  int32_t invalid_accepted = 0;
  // Instances where the mask and Accept disagreed on a token or the end
  // (an engine bug; the instance counts as refused there).
  int32_t mask_accept_mismatches = 0;
  bool timed_out = false;
  // The first failing instance: its index, what failed and where.
  std::string first_failure;

  bool passed() const {
    return compile.ok() && !timed_out && valid_rejected == 0 &&
           invalid_accepted == 0;
  }
};

struct MaskBenchReport {
  std::vector<SchemaResult> schemas;
  std::vector<float> tbm_us;   // every Fill while feeding instances
  std::vector<float> ttfm_us;  // per schema that compiled
  int64_t lines = 0;           // schemas in the file
  int32_t sample_every = 1;    // as run
  int64_t instances = 0;       // instances fed in all
  int64_t tokens = 0;          // tokens accepted in all
  double seconds = 0;          // the whole run's wall time

  int64_t passing() const;
  int64_t compile_errors() const;
  int64_t validation_errors() const;    // schemas with a valid one refused
  int64_t invalidation_errors() const;  // schemas with an invalid one taken
  int64_t timeouts() const;
};

// The gunzip'd text of a .gz file (through `gzip -dc`). NotFound when
// there is no such file; Internal when gzip fails.
absl::StatusOr<std::string> ReadGzipFile(const std::string& path);

// shared/structured/maskbench.jsonl.gz.
std::string MaskBenchPath();

// One schema: `entry` is a line of the file ({name, schema, tests: [{valid,
// data}]}; RunMaskBench checks the shape); each Fill's time goes to
// `tbm_us`. `tokenizer` and `vocab` describe the same vocabulary.
SchemaResult RunMaskBenchSchema(
    const nlohmann::ordered_json& entry, const engine::Tokenizer& tokenizer,
    std::shared_ptr<const engine::grammar::TokenTrie> vocab,
    const MaskBenchOptions& options, std::vector<float>* tbm_us);

// The sampled schemas of `jsonl` (one JSON object a line), in file order.
// InvalidArgument when a sampled line is not a JSON object with a schema
// and a list of tests (the data is broken, not the engine).
absl::StatusOr<MaskBenchReport> RunMaskBench(
    absl::string_view jsonl, const engine::Tokenizer& tokenizer,
    std::shared_ptr<const engine::grammar::TokenTrie> vocab,
    const MaskBenchOptions& options);

// The README's table (times in µs), then the compile errors grouped by the
// keyword their message names (top 20) and the names of the schemas with
// validation errors, invalidation errors, mask/Accept disagreements and
// timeouts (first 20 each, with the first failure), in Markdown.
std::string MaskBenchMarkdown(const MaskBenchReport& report);
// The same figures, plus one object per schema. Its strings may hold
// invalid UTF-8 (a token can end inside a character): dump it with
// error_handler_t::replace.
nlohmann::json MaskBenchJson(const MaskBenchReport& report);

// The `q`-quantile (0..1) of `values` by nearest rank; 0 when empty.
double Percentile(std::vector<float> values, double q);
// The group a compile error falls in: its code and the keyword its
// message starts with ("'pattern' at #/properties/a ..."), else its code
// and the message up to " at " less JSON pointers, quoted names and
// numbers.
std::string CompileErrorKey(const absl::Status& status);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_MASKBENCH_H_
