// The CPU engine's logits against llama.cpp's (../shared/oracle: random-
// weight models of every architecture and weight type, with llama.cpp's
// logits for fixed prompts and for its own greedy tokens fed back), by
// tests/testing/oracle_logits.h's comparison: within 0.002 of the logit std
// for float files and 0.08 for quantized ones (the oracle README's "how
// close is close"), and the same argmax wherever llama.cpp's top two differ
// by more than 0.05.
//
// Files whose features the engine does not have yet (issue 17: K-quant
// kernels, qwen3moe) are reported
// with what was measured and not asserted, by name below; every other file
// must pass. Not asserted yet either (issue 17's target): the argmax rule
// on quantized files, where today one near-tie position per Q8_0 file
// flips (both sides quantize activations to 8 bits, each its own way).

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::engine {
namespace {

using cpu::CpuEngine;
using cpu::CpuEngineOptions;

// Why a file is not expected to pass yet, or "".
std::string NotYet(const std::string& name) {
  if (absl::StrContains(name, "_k")) {
    return "K-quants are converted to Q8_0 at load";
  }
  return "";
}

TEST(OracleLogitsTest, EveryFileAgreesWithLlamaCpp) {
  const std::vector<std::filesystem::path> files =
      ::paceline::testing::OracleModelFiles();
  if (files.empty()) GTEST_SKIP() << "no " << ::paceline::testing::OracleDir();
  int passed_files = 0;
  for (const std::filesystem::path& file : files) {
    const std::string name = file.stem().string();
    SCOPED_TRACE(name);
    const std::string why_not = NotYet(name);
    absl::StatusOr<LoadedModel> model = OpenModel(file.string());
    if (!model.ok()) {
      EXPECT_FALSE(why_not.empty()) << model.status();
      std::cout << name << ": refused at load (" << why_not << ")\n";
      continue;
    }
    CpuEngineOptions options;
    options.num_blocks = 128;
    options.max_tokens_per_step = 128;
    options.num_threads = 2;
    absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
        CpuEngine::Create(model->weights, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ::paceline::testing::OracleMeasure m;
    const absl::Status run =
        ::paceline::testing::MeasureOracleFile(**engine, name, {}, &m);
    ASSERT_TRUE(run.ok()) << run;
    const bool quantized = ::paceline::testing::OracleIsQuantized(name);
    const double tolerance = ::paceline::testing::OracleTolerance(name);
    std::cout << name << ": max rel. diff " << m.max_rel << " over "
              << m.positions << " positions, argmax " << m.argmax_equal << "/"
              << m.argmax_checked
              << (why_not.empty() ? "" : absl::StrCat(" (", why_not, ")"))
              << "\n";
    if (!why_not.empty()) continue;
    EXPECT_LE(m.max_rel, tolerance);
    if (!quantized) {
      EXPECT_EQ(m.argmax_equal, m.argmax_checked);
    }
    ++passed_files;
  }
  EXPECT_GT(passed_files, 0);
}

}  // namespace
}  // namespace paceline::engine
