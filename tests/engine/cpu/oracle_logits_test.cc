// The CPU engine's logits against llama.cpp's (../shared/oracle: random-
// weight models of every architecture and weight type, with llama.cpp's
// logits for fixed prompts and for its own greedy tokens fed back). For
// every stored position: max |log-softmax difference| over llama.cpp's top
// 20 tokens, divided by the std of llama.cpp's logits, within 0.002 for
// float files and 0.08 for quantized ones (the oracle README's "how close is
// close"), and the same argmax wherever llama.cpp's top two differ by more
// than 0.05.
//
// Files whose features the engine does not have yet (issue 17: K-quant
// kernels, YaRN, qwen3moe) are reported
// with what was measured and not asserted, by name below; every other file
// must pass. Not asserted yet either (issue 17's target): the argmax rule
// on quantized files, where today one near-tie position per Q8_0 file
// flips (both sides quantize activations to 8 bits, each its own way).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/forward_batch.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/cpu/engine_test_util.h"

namespace paceline::engine {
namespace {

using Json = nlohmann::json;
using cpu::CpuEngine;
using cpu::CpuEngineOptions;

const std::filesystem::path kOracle = PACELINE_SHARED_DIR "/oracle";

// Why a file is not expected to pass yet, or "".
std::string NotYet(const std::string& name) {
  if (absl::StrContains(name, "yarn")) return "YaRN RoPE scaling is refused";
  if (absl::StrContains(name, "_k")) {
    return "K-quants are converted to Q8_0 at load";
  }
  return "";
}

struct Measured {
  double max_rel = 0;      // the worst position's relative difference
  int positions = 0;       // positions compared
  int argmax_checked = 0;  // positions with a clear llama.cpp argmax
  int argmax_equal = 0;
};

void Compare(const std::vector<float>& ours, const Json& ref, Measured* m) {
  const size_t n = ref.size();
  ASSERT_EQ(ours.size(), n);
  std::vector<double> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = ref[i].get<double>();
  double mean = 0;
  for (double v : r) mean += v;
  mean /= static_cast<double>(n);
  double var = 0;
  for (double v : r) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / static_cast<double>(n));
  auto log_sum_exp = [](auto begin, auto end) {
    const double top = *std::max_element(begin, end);
    double s = 0;
    for (auto it = begin; it != end; ++it) s += std::exp(*it - top);
    return top + std::log(s);
  };
  const double lse_ref = log_sum_exp(r.begin(), r.end());
  const double lse_ours = log_sum_exp(ours.begin(), ours.end());
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](size_t a, size_t b) { return r[a] > r[b]; });
  double worst = 0;
  for (int k = 0; k < 20; ++k) {
    const size_t t = order[k];
    worst = std::max(worst, std::abs((ours[t] - lse_ours) - (r[t] - lse_ref)));
  }
  m->max_rel = std::max(m->max_rel, worst / sd);
  ++m->positions;
  if (r[order[0]] - r[order[1]] > 0.05) {
    ++m->argmax_checked;
    if (testing::Argmax(ours) == static_cast<int32_t>(order[0])) {
      ++m->argmax_equal;
    }
  }
}

// Feeds one reference line (prompt, then the greedy tokens) and compares
// every stored position.
void RunLine(CpuEngine& engine, const Json& line, Measured* m) {
  const std::vector<int32_t> prompt =
      line["prompt"].get<std::vector<int32_t>>();
  const std::vector<int32_t> greedy =
      line["greedy"].get<std::vector<int32_t>>();
  std::vector<int32_t> stored;
  for (const auto& [key, value] : line["logits"].items()) {
    stored.push_back(std::stoi(key));
  }
  std::sort(stored.begin(), stored.end());
  const int64_t n_vocab = engine.config().n_vocab;
  const std::vector<int32_t> blocks = testing::ContiguousBlocks(
      engine, static_cast<int64_t>(prompt.size() + greedy.size()));
  std::vector<float> logits(n_vocab);
  ForwardBatch batch;
  batch.sequences.resize(1);
  SequenceSlice& slice = batch.sequences[0];
  slice.block_table = blocks;
  int32_t done = 0;
  // Chunks ending at each stored position (its logits row is the last).
  for (int32_t p : stored) {
    batch.tokens.assign(prompt.begin() + done, prompt.begin() + p + 1);
    slice.token_count = p + 1 - done;
    slice.position_begin = done;
    slice.needs_logits = true;
    ASSERT_TRUE(engine.Forward(batch, absl::MakeSpan(logits)).ok());
    Compare(logits, line["logits"][std::to_string(p)], m);
    done = p + 1;
  }
  ASSERT_EQ(done, static_cast<int32_t>(prompt.size()));
  // Teacher-forced: the logits after each of llama.cpp's greedy tokens.
  const Json& greedy_logits = line["greedy_logits"];
  for (size_t i = 0; i < greedy.size(); ++i) {
    batch.tokens.assign(1, greedy[i]);
    slice.token_count = 1;
    slice.position_begin = static_cast<int32_t>(prompt.size() + i);
    ASSERT_TRUE(engine.Forward(batch, absl::MakeSpan(logits)).ok());
    Compare(logits, greedy_logits[i], m);
  }
}

TEST(OracleLogitsTest, EveryFileAgreesWithLlamaCpp) {
  if (!std::filesystem::is_directory(kOracle / "models")) {
    GTEST_SKIP() << "no " << kOracle;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(kOracle / "models")) {
    if (entry.path().extension() == ".gguf") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
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
    std::ifstream ref(kOracle / "ref" / (name + ".jsonl"));
    ASSERT_TRUE(ref) << "no reference for " << name;
    Measured m;
    for (std::string text; std::getline(ref, text);) {
      if (text.empty()) continue;
      const Json line = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(line.is_discarded());
      RunLine(**engine, line, &m);
    }
    const bool quantized =
        !absl::EndsWith(name, "f32") && !absl::EndsWith(name, "f16");
    const double tolerance = quantized ? 0.08 : 0.002;
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
