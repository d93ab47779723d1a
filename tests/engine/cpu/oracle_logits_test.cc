// The CPU engine's logits against llama.cpp's (../shared/oracle: random-
// weight models of every architecture and weight type, with llama.cpp's
// logits for fixed prompts and for its own greedy tokens fed back), by
// tests/testing/oracle_logits.h's comparison: within 0.002 of the logit std
// for float files and 0.08 for quantized ones (the oracle README's "how
// close is close"), and the same argmax wherever llama.cpp's top two differ
// by more than 0.05.
//
// The references were made with llama.cpp's default F16 KV cache (flash
// attention off), whose attention rounds K, V, q and the normalized
// softmax weights to F16; the engine's F16 cache computes attention that
// way too (kernels/attention.h), so every file runs with it and must pass.
// Measured: float files 0.0001-0.0003 of the logit std (0.0017 for the F16
// file, whose weights are F16 in both), quantized files 0.03-0.065, Q2_K
// 0.062. Float files also run with the F32 cache: 0.0008-0.0011.
//
// The argmax rule holds everywhere but at one position of llama-base-q8_0
// (kKnownFlips): llama.cpp's top two differ by 0.053 there, just over the
// 0.05 of the rule, and ours by -0.021, an error of 0.018 of the logit std
// (the file's worst is 0.035). It stays at every ISA level and with RoPE
// angles computed as llama.cpp does (a cumulative float product, tried and
// reverted: it moves other files' near-ties instead), so it is the 8-bit
// activation rounding amplifying summation-order differences, not a
// mistake in a formula. With the F32 cache the quantized files measure
// 0.035-0.082 (Q2_K over the 0.08) and 1-3 near-ties per K file flip.

#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/forward_batch.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/memory_plan.h"
#include "engine/model/weights.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::engine {
namespace {

using cpu::CpuEngine;
using cpu::CpuEngineOptions;

// Positions per file where our argmax may differ from llama.cpp's clear
// one (see the top comment); every other file has none.
int KnownFlips(const std::string& name, GgmlType kv_type) {
  return kv_type == GgmlType::kF16 && name == "llama-base-q8_0" ? 1 : 0;
}

// Runs every oracle file through a CPU engine with a `kv_type` cache
// (float files only unless `quantized_too`), asserting the tolerance and
// the argmax rule on each.
void ExpectEveryFileAgrees(GgmlType kv_type, bool quantized_too) {
  const std::vector<std::filesystem::path> files =
      ::paceline::testing::OracleModelFiles();
  if (files.empty()) GTEST_SKIP() << "no " << ::paceline::testing::OracleDir();
  int files_checked = 0;
  for (const std::filesystem::path& file : files) {
    const std::string name = file.stem().string();
    if (!quantized_too && ::paceline::testing::OracleIsQuantized(name)) {
      continue;
    }
    SCOPED_TRACE(name);
    absl::StatusOr<LoadedModel> model = OpenModel(file.string());
    ASSERT_TRUE(model.ok()) << model.status();
    CpuEngineOptions options;
    options.num_blocks = 128;
    options.max_tokens_per_step = 128;
    options.num_threads = 2;
    options.kv_type = kv_type;
    absl::StatusOr<std::unique_ptr<CpuEngine>> engine =
        CpuEngine::Create(model->weights, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ::paceline::testing::OracleMeasure m;
    const absl::Status run =
        ::paceline::testing::MeasureOracleFile(**engine, name, {}, &m);
    ASSERT_TRUE(run.ok()) << run;
    std::cout << name << " (KV " << DtypeName(kv_type) << "): max rel. diff "
              << m.max_rel << " over " << m.positions << " positions, argmax "
              << m.argmax_equal << "/" << m.argmax_checked << "\n";
    EXPECT_LE(m.max_rel, ::paceline::testing::OracleTolerance(name));
    EXPECT_GE(m.argmax_equal, m.argmax_checked - KnownFlips(name, kv_type));
    EXPECT_GT(m.positions, 0);
    ++files_checked;
  }
  EXPECT_GT(files_checked, 0);
}

TEST(OracleLogitsTest, EveryFileAgreesWithLlamaCppWithItsF16Cache) {
  ExpectEveryFileAgrees(GgmlType::kF16, /*quantized_too=*/true);
}

TEST(OracleLogitsTest, FloatFilesAgreeWithAnF32Cache) {
  ExpectEveryFileAgrees(GgmlType::kF32, /*quantized_too=*/false);
}

// The K-quant files' matrices load in their file types, in place (no
// conversion): every view points at its tensor's bytes with its type, and
// the resident matrix bytes are the file's.
TEST(OracleLogitsTest, KQuantFilesLoadInTheirFileTypes) {
  const std::filesystem::path oracle = ::paceline::testing::OracleDir();
  if (!std::filesystem::is_directory(oracle / "models")) {
    GTEST_SKIP() << "no " << oracle;
  }
  const std::map<std::string, std::set<GgmlType>> expected = {
      {"llama-base-q4_k_m", {GgmlType::kQ4_K, GgmlType::kQ6_K}},
      {"llama-base-q5_k_m", {GgmlType::kQ5_K, GgmlType::kQ6_K}},
      {"llama-base-q6_k", {GgmlType::kQ6_K}},
      {"llama-base-q3_k_m", {GgmlType::kQ3_K}},
      {"llama-base-q2_k", {GgmlType::kQ2_K}},
      {"llama-llama3rope-q4_k_m", {GgmlType::kQ4_K}},
      {"qwen2-base-q4_k_m", {GgmlType::kQ4_K}},
      {"qwen3-base-q4_k_m", {GgmlType::kQ4_K}},
  };
  for (const auto& [name, must_have] : expected) {
    SCOPED_TRACE(name);
    const std::string path = (oracle / "models" / (name + ".gguf")).string();
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    const GgufFile& f = **file;  // owned by the weights from here on
    ::testing::internal::CaptureStderr();
    absl::StatusOr<std::unique_ptr<ModelWeights>> w =
        ModelWeights::FromGguf(*std::move(file));
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(log.find("converted"), std::string::npos) << log;
    std::set<GgmlType> types;
    uint64_t file_bytes = 0;
    const auto check = [&](const WeightView& v, const std::string& tensor) {
      const GgufTensorInfo* t = f.FindTensor(tensor);
      ASSERT_NE(t, nullptr) << tensor;
      EXPECT_EQ(v.type, t->type) << tensor;
      EXPECT_EQ(v.data, t->data) << tensor;
      types.insert(v.type);
      file_bytes += t->size_bytes;
    };
    for (size_t i = 0; i < (*w)->layers().size(); ++i) {
      const LayerWeights& l = (*w)->layers()[i];
      const std::string p = absl::StrCat("blk.", i, ".");
      check(l.attn_q, p + "attn_q.weight");
      check(l.attn_k, p + "attn_k.weight");
      check(l.attn_v, p + "attn_v.weight");
      check(l.attn_output, p + "attn_output.weight");
      check(l.ffn_gate, p + "ffn_gate.weight");
      check(l.ffn_up, p + "ffn_up.weight");
      check(l.ffn_down, p + "ffn_down.weight");
    }
    check((*w)->output(), f.FindTensor("output.weight") != nullptr
                              ? "output.weight"
                              : "token_embd.weight");
    for (GgmlType t : must_have) EXPECT_EQ(types.count(t), 1u);
    EXPECT_EQ((*w)->MatMulBytesPerToken(), file_bytes);
  }
}

}  // namespace
}  // namespace paceline::engine
