// MaskBench (shared/structured/README.md): JSON Schema -> token masks over
// the Llama 3 vocabulary, on one thread, reported as the README's table
// (tests/testing/maskbench.h says what is timed and counted). One long run,
// so a plain program rather than Google Benchmark.
//
//   build/bench/maskbench [--limit N] [--sample K] [--json OUT.json]
//                         [--budget SECONDS] [--progress N] [--slow US]
//
// --sample K runs every K-th schema, --limit N at most N of them; --json
// writes the figures and one object per schema. The vocabulary is the one
// the build installs from npm (tests/engine/sampling/grammar/llama3_vocab/).
// --slow US also lists, to stderr, every schema with a mask slower than US
// µs or a TTFM over 50 ms: its line, TTFM, masks over US, the slowest.

#include "tests/testing/maskbench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/testing/llama3_vocab.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: maskbench [--limit N] [--sample K] [--json OUT.json] "
               "[--budget SECONDS] [--progress N] [--cold 1] [--slow US]\n");
  return 2;
}

using paceline::testing::MaskBenchOptions;
using paceline::testing::MaskBenchReport;

}  // namespace

int main(int argc, char** argv) {
  MaskBenchOptions options;
  options.to_grammar = paceline::testing::MaskBenchJsonSchema();
  options.progress_every = 100;
  // As the daemon does (one per model): entries of call-free rules shared.
  options.shared = std::make_shared<paceline::engine::grammar::SharedEntries>();
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view flag = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    int64_t n = 0;
    if (flag == "--json") {
      json_path = value;
    } else if (!absl::SimpleAtoi(value, &n) || n < 0) {
      return Usage();
    } else if (flag == "--limit") {
      options.limit = n;
    } else if (flag == "--sample" && n > 0) {
      options.sample_every = static_cast<int32_t>(n);
    } else if (flag == "--budget") {
      options.schema_budget = absl::Seconds(n);
    } else if (flag == "--cold") {  // --cold 1: nothing shared
      if (n != 0) options.shared = nullptr;
    } else if (flag == "--slow") {
      options.slow_us = static_cast<float>(n);
    } else if (flag == "--progress") {
      options.progress_every = static_cast<int32_t>(n);
    } else {
      return Usage();
    }
  }

  auto vocab = paceline::testing::LoadLlama3Vocab();
  if (!vocab.ok()) {
    std::fprintf(stderr, "maskbench: the Llama 3 vocabulary: %s\n",
                 vocab.status().ToString().c_str());
    return 1;
  }
  auto file =
      paceline::testing::ReadGzipFile(paceline::testing::MaskBenchPath());
  if (!file.ok()) {
    std::fprintf(stderr, "maskbench: %s\n", file.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<MaskBenchReport> report = paceline::testing::RunMaskBench(
      *file, *vocab->tokenizer, vocab->trie, options);
  if (!report.ok()) {
    std::fprintf(stderr, "maskbench: %s\n", report.status().ToString().c_str());
    return 1;
  }
  std::fputs(paceline::testing::MaskBenchMarkdown(*report).c_str(), stdout);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << paceline::testing::MaskBenchJson(*report).dump(
               2, ' ', false, nlohmann::json::error_handler_t::replace)
        << "\n";
    if (!out) {
      std::fprintf(stderr, "maskbench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
