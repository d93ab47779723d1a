// The load-time inventory: a tensor or `<arch>.*` key the engine does not
// understand fails the load (naming it) or is named in a warning; and
// every model file in ../shared loads without either.

#include "engine/model/model_inventory.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/gguf/gguf_file.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/gguf_builder.h"

namespace paceline::engine {
namespace {

namespace gt = ::paceline::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A tiny model (gt::AddTinyModel) with `extra` applied first, parsed; the
// bytes stay alive with the file.
struct Model {
  std::string bytes;
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
};

template <typename Extra>
Model Tiny(const gt::TinyModelSpec& spec, Extra&& extra) {
  gt::GgufBuilder b;
  extra(b);
  gt::AddTinyModel(b, spec);
  Model m;
  m.bytes = b.Build();
  auto file = GgufFile::FromBuffer(
      reinterpret_cast<const uint8_t*>(m.bytes.data()), m.bytes.size());
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return m;
  m.file = *std::move(file);
  auto config = ModelConfigFromGguf(*m.file);
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) m.config = *config;
  return m;
}

Model Tiny(const gt::TinyModelSpec& spec = {}) {
  return Tiny(spec, [](gt::GgufBuilder&) {});
}

absl::StatusOr<InventoryReport> Check(const Model& m) {
  return CheckModelInventory(*m.file, m.config);
}

TEST(ModelInventoryTest, TinyModelsOfEveryArchitectureAreClean) {
  for (const gt::TinyModelSpec& spec :
       {gt::TinyModelSpec{}, gt::TinyModelSpec{.tied_output = true},
        gt::TinyModelSpec{.arch = "llama", .qkv_bias = true},
        gt::TinyModelSpec{.arch = "qwen2", .qkv_bias = true},
        gt::TinyModelSpec{.arch = "qwen3", .head_dim = 8, .qk_norm = true}}) {
    SCOPED_TRACE(spec.arch);
    const Model m = Tiny(spec);
    auto report = Check(m);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_THAT(report->WarningLines(), IsEmpty());
  }
}

TEST(ModelInventoryTest, ATensorThatWouldChangeTheMathFailsNamingIt) {
  // An output-projection bias the llama graph does not add.
  Model m = Tiny({}, [](gt::GgufBuilder& b) {
    b.AddF32Tensor("blk.1.attn_output.bias", {16});
  });
  absl::Status s = Check(m).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'blk.1.attn_output.bias'"));
  EXPECT_THAT(s.message(), HasSubstr("architecture 'llama'"));

  // Low-rank attention (deepseek's attn_q_a) and a layer past block_count.
  m = Tiny({}, [](gt::GgufBuilder& b) {
    b.AddF32Tensor("blk.0.attn_q_a.weight", {16, 4});
    b.AddF32Tensor("blk.2.attn_q.weight", {16, 16});
  });
  s = Check(m).status();
  EXPECT_THAT(s.message(), HasSubstr("tensors 'blk.0.attn_q_a.weight', "
                                     "'blk.2.attn_q.weight'"));

  // Biases are read only when attn_q.bias is there: a lone attn_k.bias
  // would be dropped.
  m = Tiny(
      {}, [](gt::GgufBuilder& b) { b.AddF32Tensor("blk.0.attn_k.bias", {8}); });
  EXPECT_THAT(Check(m).status().message(), HasSubstr("'blk.0.attn_k.bias'"));

  // Qwen3 has no QKV biases.
  m = Tiny(
      {.arch = "qwen3", .head_dim = 8, .qk_norm = true},
      [](gt::GgufBuilder& b) { b.AddF32Tensor("blk.0.attn_q.bias", {32}); });
  EXPECT_THAT(Check(m).status().message(), HasSubstr("'blk.0.attn_q.bias'"));
}

TEST(ModelInventoryTest, FromGgufRefusesTheFileNamingTheTensor) {
  Model m = Tiny({}, [](gt::GgufBuilder& b) {
    b.AddF32Tensor("blk.0.ffn_down.bias", {16});
  });
  auto w = ModelWeights::FromGguf(std::move(m.file));
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("'blk.0.ffn_down.bias'"));
}

TEST(ModelInventoryTest, AKnownUnusedTensorIsNamedInAWarning) {
  Model m = Tiny({}, [](gt::GgufBuilder& b) {
    b.AddF32Tensor("blk.0.attn_rot_embd.weight", {2});
    b.AddF32Tensor("blk.1.attn_rot_embd.weight", {2});
  });
  auto report = Check(m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(
      report->unused_tensors,
      ElementsAre("blk.0.attn_rot_embd.weight", "blk.1.attn_rot_embd.weight"));
  ASSERT_EQ(report->WarningLines().size(), 1u);
  EXPECT_THAT(report->WarningLines()[0],
              HasSubstr("blk.0.attn_rot_embd.weight, "
                        "blk.1.attn_rot_embd.weight"));

  ::testing::internal::CaptureStderr();
  auto w = ModelWeights::FromGguf(std::move(m.file));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_THAT(log, HasSubstr("paceline: warning: ignoring tensors"));
  EXPECT_THAT(log, HasSubstr("blk.1.attn_rot_embd.weight"));
}

TEST(ModelInventoryTest, AKeyThatWouldChangeTheMathFailsNamingIt) {
  const auto with = [](const char* key, gt::GgufValueBytes v) {
    return Tiny({}, [&](gt::GgufBuilder& b) { b.Add(key, v); });
  };
  for (const auto& [key, value] :
       {std::pair{"llama.attn_logit_softcapping", gt::F32(50)},
        std::pair{"llama.final_logit_softcapping", gt::F32(30)},
        std::pair{"llama.attention.sliding_window", gt::U32(4096)},
        std::pair{"llama.expert_count", gt::U32(8)},
        std::pair{"llama.expert_used_count", gt::U32(2)},
        std::pair{"llama.rope.scaling.yarn_log_multiplier", gt::F32(0.1f)},
        std::pair{"llama.attention.causal", gt::Bool(false)},
        std::pair{"llama.logit_scale", gt::F32(0.5f)}}) {
    SCOPED_TRACE(key);
    const Model m = with(key, value);
    const absl::Status s = Check(m).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("'", key, "'")));
  }
  // The same keys at their neutral values change nothing.
  for (const auto& [key, value] :
       {std::pair{"llama.attn_logit_softcapping", gt::F32(0)},
        std::pair{"llama.expert_count", gt::U32(0)},
        std::pair{"llama.attention.causal", gt::Bool(true)},
        std::pair{"llama.logit_scale", gt::F32(1)}}) {
    SCOPED_TRACE(key);
    auto report = Check(with(key, value));
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_THAT(report->WarningLines(), IsEmpty());
  }
}

TEST(ModelInventoryTest, AnUnknownKeyIsNamedInAWarning) {
  Model m = Tiny({}, [](gt::GgufBuilder& b) {
    b.Add("llama.shiny_new_setting", gt::U32(3))
        .Add("split.count", gt::U16(1))
        // Read or informational: no warning.
        .Add("llama.rope.scaling.finetuned", gt::Bool(true))
        .Add("llama.rope.freq_base", gt::F32(10000))
        // Out of the rule's scope.
        .Add("general.license", gt::Str("mit"))
        .Add("tokenizer.ggml.add_bos_token", gt::Bool(true))
        .Add("quantize.imatrix.file", gt::Str("x.dat"));
  });
  auto report = Check(m);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->unused_tensors, IsEmpty());
  EXPECT_THAT(report->unknown_keys,
              ElementsAre("llama.shiny_new_setting", "split.count"));
  ASSERT_EQ(report->WarningLines().size(), 1u);
  EXPECT_THAT(report->WarningLines()[0],
              HasSubstr("llama.shiny_new_setting, split.count"));

  ::testing::internal::CaptureStderr();
  auto w = ModelWeights::FromGguf(std::move(m.file));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_THAT(log, HasSubstr("paceline: warning: ignoring metadata keys"));
  EXPECT_THAT(log, HasSubstr("llama.shiny_new_setting"));
}

// Every model in ../shared: it loads with nothing refused or warned about,
// or (an architecture not supported yet) is refused by name.
TEST(ModelInventoryTest, EverySharedModelIsClean) {
  const std::filesystem::path shared = ::paceline::testing::SharedDir();
  std::vector<std::filesystem::path> files;
  for (const char* dir : {"models", "oracle/models"}) {
    if (!std::filesystem::is_directory(shared / dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(shared / dir)) {
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    }
  }
  if (files.empty()) GTEST_SKIP() << "no models under " << shared;
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& path : files) {
    SCOPED_TRACE(path.string());
    auto file = GgufFile::Open(path.string());
    ASSERT_TRUE(file.ok()) << file.status();
    auto config = ModelConfigFromGguf(**file);
    if (!config.ok()) {
      EXPECT_THAT(config.status().message(),
                  HasSubstr("unsupported architecture"));
      std::cout << path.filename().string() << ": " << config.status() << "\n";
      continue;
    }
    ASSERT_TRUE(CheckModelTensors(**file, *config).ok());
    auto report = CheckModelInventory(**file, *config);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_THAT(report->WarningLines(), IsEmpty());
    std::cout << path.filename().string() << ": clean ("
              << (*file)->tensors().size() << " tensors, "
              << (*file)->metadata().size() << " keys)\n";
  }
}

}  // namespace
}  // namespace paceline::engine
