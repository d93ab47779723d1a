#include "engine/model_loader.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::engine {
namespace {

const std::string& kStories = ::paceline::testing::kStories260KPath;

TEST(ModelSourceTest, OpensAGgufFile) {
  auto model = OpenModel(kStories);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->weights->config().architecture, "llama");
  EXPECT_EQ(model->tokenizer->Encode("Once upon a time", true),
            (std::vector<int32_t>{1, 403, 407, 261, 378}));
}

TEST(ModelSourceTest, OpensADummySpec) {
  ModelSourceOptions options;
  options.dummy_type = GgmlType::kBF16;
  auto model = OpenModel("dummy:stories15m", options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->weights->config().n_embd, 288);
  EXPECT_EQ(model->weights->layers()[0].attn_q.type, GgmlType::kBF16);
  EXPECT_EQ(model->tokenizer->vocab_size(), 32000);
  auto q4 = OpenModel("dummy:stories15m:q4_0");
  ASSERT_TRUE(q4.ok()) << q4.status();
  EXPECT_EQ(q4->weights->layers()[0].ffn_down.type, GgmlType::kQ4_0);
}

TEST(ModelSourceTest, ErrorsPassThrough) {
  EXPECT_EQ(OpenModel("dummy:nope").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(OpenModel("dummy:stories15m:q9").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenModel("/nonexistent/model.gguf").status().code(),
            absl::StatusCode::kNotFound);
}

// model.chat_template_file: read at load, replacing the model's templates.
TEST(ModelSourceTest, ChatTemplateFile) {
  ModelSourceOptions options;
  options.chat_template_file = "/nonexistent/chat.jinja";
  auto missing = OpenModel("dummy:stories15m", options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      absl::StrContains(missing.status().message(), "/nonexistent/chat.jinja"))
      << missing.status();

  auto plain = OpenModel("dummy:stories15m");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->chat_templates.source, ChatTemplateSource::kNone);

  const std::string text = "{% for m in messages %}{{ m.content }}{% endfor %}";
  options.chat_template_file =
      ::paceline::testing::WriteFile("chat.jinja", text);
  auto model = OpenModel("dummy:stories15m", options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->chat_templates.source, ChatTemplateSource::kConfig);
  EXPECT_EQ(model->chat_templates.main, text);
  EXPECT_EQ(model->chat_templates.main_name, options.chat_template_file);
  // Parsing it is chat/'s (model_templates_test), when the daemon loads.
}

TEST(ByteLevelTokenizerTest, EveryByteIsOneToken) {
  auto tok = MakeByteLevelTokenizer(300);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "Hi \xC3\xA9!\n\x01";
  std::vector<int32_t> want = {256};
  for (unsigned char ch : text) want.push_back(ch);
  EXPECT_EQ((*tok)->Encode(text, (*tok)->add_bos()), want);
  EXPECT_EQ((*tok)->Decode(want), text);
  EXPECT_EQ((*tok)->bos_id(), 256);
  EXPECT_EQ((*tok)->eos_id(), 257);
  EXPECT_TRUE((*tok)->IsEog(257));
  EXPECT_EQ((*tok)->TokenBytes(299), "");  // filler
  EXPECT_FALSE(MakeByteLevelTokenizer(257).ok());
}

}  // namespace
}  // namespace paceline::engine
