// `paceline inspect` on the real test model and on bad input.

#include <cstdio>
#include <filesystem>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "paceline/v1/model.pb.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/stories260k_oracle.h"
#include "tools/paceline/json_reports.pb.h"

namespace paceline::testing {
namespace {

const std::string& kModel = kStories260KPath;

class InspectCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) {
      GTEST_SKIP() << kModel << " is absent (the shared/ test data)";
    }
  }
};

// The model card in shared/models/README.md: 5 layers, 64 dims, 8 heads,
// 4 KV heads, 512 vocab, context 512; all tensors F32.
TEST_F(InspectCommandTest, ShowsStories260KHyperParameters) {
  const CommandResult r = RunPaceline({"inspect", kModel});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("architecture   llama\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers         5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("embedding      64\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("heads          8 (head dim 8)\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("kv heads       4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ffn            172\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab          512\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("context        512\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1,185,376 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chat template  no\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("512 tokens"), std::string::npos) << r.out;
}

TEST_F(InspectCommandTest, JsonHasTheSameFacts) {
  const CommandResult r = RunPaceline({"inspect", kModel, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // protobuf's JSON form: proto field names, 64-bit integers as strings.
  EXPECT_NE(r.out.find("\"file_size_bytes\": \"1185376\""), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\"layers\": \"5\""), std::string::npos) << r.out;

  tools::InspectReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &report).ok())
      << r.out;
  EXPECT_EQ(report.file(), kModel);
  EXPECT_EQ(report.file_size_bytes(), 1185376u);
  EXPECT_EQ(report.gguf_version(), 3u);
  const v1::ModelInfo& info = report.info();
  EXPECT_EQ(info.architecture(), "llama");
  EXPECT_EQ(info.layers(), 5);
  EXPECT_EQ(info.embedding_length(), 64);
  EXPECT_EQ(info.heads(), 8);
  EXPECT_EQ(info.kv_heads(), 4);
  EXPECT_EQ(info.head_dim(), 8);
  EXPECT_EQ(info.feed_forward_length(), 172);
  EXPECT_EQ(info.vocab_size(), 512);
  EXPECT_EQ(info.context_length(), 512);
  EXPECT_EQ(info.tokenizer(), "llama");
  // 260,032 weights plus the separate 64x512 output matrix.
  EXPECT_EQ(info.parameters(), 292800);
  EXPECT_FALSE(report.tied_output());
  EXPECT_EQ(report.tokenizer_vocab_size(), 512);
  EXPECT_FALSE(report.chat_template());
  ASSERT_EQ(report.tensor_types().size(), 1u);  // all F32
  EXPECT_EQ(report.tensor_types().at("F32"),
            static_cast<int64_t>(report.tensor_count()));
}

TEST(InspectCommandErrorsTest, MissingFileFailsWithItsName) {
  const CommandResult r = RunPaceline({"inspect", "/nonexistent/model.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
}

TEST(InspectCommandErrorsTest, CorruptFileFailsWithoutCrashing) {
  // Every byte, the NULs included.
  constexpr char kBytes[] = "GGUF\x03\x00\x00\x00 this is not a model";
  const std::string path =
      WriteFile("not_a_model.gguf", std::string(kBytes, sizeof(kBytes) - 1));
  const CommandResult r = RunPaceline({"inspect", path});
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("error:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("offset"), std::string::npos) << r.err;
}

TEST(InspectCommandErrorsTest, UsageErrors) {
  EXPECT_EQ(RunPaceline({"inspect"}).exit_code, 2);
  EXPECT_EQ(RunPaceline({"inspect", "a.gguf", "b.gguf"}).exit_code, 2);
  EXPECT_EQ(RunPaceline({"inspect", "--bogus", "a.gguf"}).exit_code, 2);
  const CommandResult help = RunPaceline({"inspect", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("usage: paceline inspect"), std::string::npos);
}

// The oracle's qwen3moe file (../shared/oracle/README.md: 2 layers, dim
// 256, 4 heads / 2 KV heads of 64, 8 experts of FFN 256, 2 used, vocab 512,
// separate output). Per layer: norms 2 x 256 + Q/K norms 2 x 64, Q and O
// 256 x 256 each, K and V 256 x 128 each, router 256 x 8, experts
// 8 x 3 x 256 x 256; plus embedding, output (512 x 256 each) and the final
// norm. Active: 2 of the 8 experts.
TEST(InspectMoeTest, CountsEveryExpertAndTheActiveOnes) {
  const std::string path =
      ::paceline::testing::SharedPath("oracle/models/qwen3moe-base-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const int64_t layer =
      2 * 256 + 2 * 64 + 2 * 65536 + 2 * 32768 + 2048 + 8 * 3 * 65536;
  const int64_t total = 2 * layer + 2 * 131072 + 256;
  const int64_t active = total - 2 * 6 * 3 * 65536;
  const CommandResult r = RunPaceline({"inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("experts        8 per layer, 2 used per token, FFN 256"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("parameters     3,806,720 (3.81 M)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("active params  1,447,424 (1.45 M) per token"),
            std::string::npos)
      << r.out;
  ASSERT_EQ(total, 3'806'720);
  ASSERT_EQ(active, 1'447'424);

  const CommandResult j = RunPaceline({"inspect", path, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  tools::InspectReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(j.out, &report).ok())
      << j.out;
  EXPECT_EQ(report.info().parameters(), total);
  EXPECT_EQ(report.active_parameters(), active);
  EXPECT_EQ(report.experts(), 8);
  EXPECT_EQ(report.experts_used(), 2);
  EXPECT_EQ(report.expert_feed_forward_length(), 256);
}

// oracle-next's gpt-oss MXFP4 file (README there: 2 layers, layer 0
// sliding with window 32, sinks, Q/K/V/O biases, a biased router, 8
// experts of FFN 128 with biases, the six expert tensors MXFP4): per layer
// gate and up 128 x 256 and down 256 x 128 per expert, 17 bytes per 32.
TEST(InspectMoeTest, GptOssShowsWindowsSinksBiasesAndMxfp4Bytes) {
  const std::string path = ::paceline::testing::SharedPath(
      "oracle-next/models/gpt-oss-base-mxfp4.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const int64_t expert_bytes = 2 * 8 * (3 * 128 * 256) / 32 * 17;
  ASSERT_EQ(expert_bytes, 835'584);
  const CommandResult r = RunPaceline({"inspect", path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* line :
       {"attention      sliding window 32 on layers 0, global on 1\n",
        "sinks          one learned logit per head per layer\n",
        "biases         Q/K/V, attention output, router, experts\n",
        "experts        8 per layer, 4 used per token, FFN 128\n",
        "expert bytes   835,584, ", ", MXFP4 x6\n"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
}

}  // namespace
}  // namespace paceline::testing
