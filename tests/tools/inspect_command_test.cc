// `paceline inspect` on the real test model and on bad input.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/tools/run_command.h"

namespace paceline::testing {
namespace {

const std::string kModel =
    std::string(PACELINE_SHARED_DIR) + "/models/stories260K.gguf";

class InspectCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) {
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
  for (const char* field :
       {"\"layers\": 5,", "\"embedding_length\": 64,", "\"heads\": 8,",
        "\"kv_heads\": 4,", "\"vocab_size\": 512,", "\"context_length\": 512,",
        "\"file_size_bytes\": 1185376,", "\"tokenizer\": \"llama\",",
        "\"chat_template\": false"}) {
    EXPECT_NE(r.out.find(field), std::string::npos) << field << "\n" << r.out;
  }
  // 260,032 weights plus the separate 64x512 output matrix.
  EXPECT_NE(r.out.find("\"parameters\": 292800,"), std::string::npos) << r.out;
}

TEST(InspectCommandErrorsTest, MissingFileFailsWithItsName) {
  const CommandResult r = RunPaceline({"inspect", "/nonexistent/model.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
}

TEST(InspectCommandErrorsTest, CorruptFileFailsWithoutCrashing) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "paceline_not_a_model.gguf")
          .string();
  {
    std::ofstream out(path, std::ios::binary);
    out << "GGUF\x03\x00\x00\x00 this is not a model";
  }
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

}  // namespace
}  // namespace paceline::testing
