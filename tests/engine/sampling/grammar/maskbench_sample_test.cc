// MaskBench (shared/structured/README.md) on a fixed sample: every 60th
// schema of the file (151), through JsonSchemaToGrammar and the Llama 3
// vocabulary, as bench/maskbench runs all of them. (Every 30th took 24 s of
// CPU, 47 s on a loaded 2-core machine: too long for a unit test; the
// benchmark's --sample 30 runs it.) The bar:
//   - no invalid instance accepted (an invalidation error is a plain bug),
//     and the mask never disagreeing with Accept,
//   - no timeout (30 s a schema),
//   - every compile error an Unimplemented or InvalidArgument with a
//     message (a keyword the engine names, never a silent "anything"), or
//     a compile limit (ResourceExhausted, DeadlineExceeded),
//   - at least 80% of the sample passing.
// The table and the errors are printed (ctest --output-on-failure, or run
// the binary). Skipped when npm could not install the vocabulary.

#include <iostream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/llama3_vocab.h"
#include "tests/testing/maskbench.h"

namespace paceline::testing {
namespace {

constexpr int32_t kSampleEvery = 60;

TEST(MaskBenchSampleTest, EverySixtiethSchema) {
  const std::string missing = Llama3VocabMissing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  auto vocab = LoadLlama3Vocab();
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto file = ReadGzipFile(MaskBenchPath());
  ASSERT_TRUE(file.ok()) << file.status();

  MaskBenchOptions options;
  options.to_grammar = MaskBenchJsonSchema();
  options.sample_every = kSampleEvery;
  options.shared = std::make_shared<engine::grammar::SharedEntries>();
  auto report = RunMaskBench(*file, *vocab->tokenizer, vocab->trie, options);
  ASSERT_TRUE(report.ok()) << report.status();
  std::cout << MaskBenchMarkdown(*report);

  const int64_t n = static_cast<int64_t>(report->schemas.size());
  EXPECT_EQ(n, 151);
  EXPECT_EQ(report->invalidation_errors(), 0);
  int64_t mismatches = 0;
  for (const SchemaResult& r : report->schemas) {
    mismatches += r.mask_accept_mismatches;
  }
  EXPECT_EQ(mismatches, 0) << "the mask and Accept disagree";
  EXPECT_EQ(report->timeouts(), 0);
  for (const SchemaResult& r : report->schemas) {
    if (r.compile.ok()) continue;
    // Refused by name, or past a compile limit (also a clear error).
    EXPECT_TRUE(r.compile.code() == absl::StatusCode::kUnimplemented ||
                r.compile.code() == absl::StatusCode::kInvalidArgument ||
                r.compile.code() == absl::StatusCode::kResourceExhausted ||
                r.compile.code() == absl::StatusCode::kDeadlineExceeded)
        << r.name << ": " << r.compile;
    EXPECT_FALSE(r.compile.message().empty()) << r.name;
  }
  EXPECT_GE(report->passing() * 5, n * 4)
      << report->passing() << " of " << n << " schemas pass";
}

}  // namespace
}  // namespace paceline::testing
