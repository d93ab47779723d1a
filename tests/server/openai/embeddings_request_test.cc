// POST /v1/embeddings bodies (every input shape of openai-node's
// EmbeddingCreateParams, encoding_format, dimensions) and the
// CreateEmbeddingResponse answer (float and little-endian float32 base64).

#include "server/openai/embeddings_request.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

TEST(EmbeddingsRequestTest, EveryInputShape) {
  auto one_text = ParseEmbeddingsRequest(R"({"input":"hi","model":"m"})");
  ASSERT_TRUE(one_text.ok()) << one_text.status();
  EXPECT_EQ(one_text->texts, std::vector<std::string>{"hi"});
  EXPECT_TRUE(one_text->token_inputs.empty());
  EXPECT_EQ(one_text->model, "m");
  EXPECT_FALSE(one_text->base64);

  auto texts = ParseEmbeddingsRequest(R"({"input":["a","b"]})");
  ASSERT_TRUE(texts.ok()) << texts.status();
  EXPECT_EQ(texts->texts, (std::vector<std::string>{"a", "b"}));

  auto ids = ParseEmbeddingsRequest(R"({"input":[1,2,3]})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->token_inputs, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));

  auto lists = ParseEmbeddingsRequest(R"({"input":[[1],[2,3]]})");
  ASSERT_TRUE(lists.ok()) << lists.status();
  EXPECT_EQ(lists->token_inputs,
            (std::vector<std::vector<int32_t>>{{1}, {2, 3}}));
}

TEST(EmbeddingsRequestTest, RefusalsNameTheField) {
  for (const char* body :
       {R"({})", R"({"input":""})", R"({"input":[]})", R"({"input":[""]})",
        R"({"input":[[]]})", R"({"input":[1,-2]})", R"({"input":["a",[1]]})",
        R"({"input":[[1],"a"]})", R"({"input":7})",
        R"({"input":"a","encoding_format":"int8"})",
        R"({"input":"a","dimensions":0})"}) {
    auto r = ParseEmbeddingsRequest(body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_TRUE(ParamOf(r.status()).has_value()) << body;
  }
  std::string many = R"({"input":[)";
  for (int i = 0; i < 2049; ++i) many += i ? ",\"x\"" : "\"x\"";
  EXPECT_FALSE(ParseEmbeddingsRequest(many + "]}").ok());
}

TEST(EmbeddingsRequestTest, DimensionsOnlyTheModelsWidth) {
  auto r = ParseEmbeddingsRequest(R"({"input":"a","dimensions":256})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(CheckDimensions(*r, 256).ok());
  const absl::Status refused = CheckDimensions(*r, 1024);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamOf(refused), "dimensions");
}

TEST(EmbeddingsRequestTest, AnswerInBothFormats) {
  const std::vector<std::vector<float>> vectors = {{1.0f, -0.5f}, {0.25f, 0}};
  const Json floats = EmbeddingsJson(vectors, 7, "m", false);
  EXPECT_EQ(floats["object"], "list");
  EXPECT_EQ(floats["model"], "m");
  EXPECT_EQ(floats["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(floats["usage"]["total_tokens"], 7);
  ASSERT_EQ(floats["data"].size(), 2u);
  EXPECT_EQ(floats["data"][1]["object"], "embedding");
  EXPECT_EQ(floats["data"][1]["index"], 1);
  EXPECT_EQ(floats["data"][0]["embedding"][1].get<double>(), -0.5);

  const Json b64 = EmbeddingsJson(vectors, 7, "m", true);
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape(
      b64["data"][0]["embedding"].get<std::string>(), &bytes));
  // 1.0f = 0x3f800000, -0.5f = 0xbf000000, little-endian.
  EXPECT_EQ(bytes, std::string("\x00\x00\x80\x3f\x00\x00\x00\xbf", 8));
}

}  // namespace
}  // namespace paceline::server::openai
