// Greedy completions over the OpenAI HTTP API equal the stories260K oracle
// (../shared/models/README.md, through stories260k_oracle.h) and the gRPC
// Complete answer of the same daemon: the prompt as text and as token ids,
// 64 tokens (llama.cpp's reference) and 252 (llama2.c run.c's). Skips when
// ../shared/models is absent.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "paceline/v1/paceline.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/http_post.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::server {
namespace {

using ::paceline::testing::DaemonProcess;
using ::paceline::testing::HaveStories260K;
using ::paceline::testing::HttpPost;
using ::paceline::testing::HttpResponse;
using ::paceline::testing::kGreedy252Text;
using ::paceline::testing::kGreedy64Ids;
using ::paceline::testing::kGreedy64Text;
using ::paceline::testing::kOnceUponATime;
using ::paceline::testing::kOnceUponATimePrompt;
using ::paceline::testing::kStories260KPath;
using ::paceline::testing::MakeClientContext;
using Json = nlohmann::ordered_json;

constexpr char kKey[] = "alice-test-key";

// The greedy HTTP completion's single choice: its text, finish reason and
// usage; text empty and `error` set when the answer is not a 200 with one
// well-formed choice.
struct HttpCompletion {
  std::string error;
  std::string text;
  std::string finish_reason;
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
};

HttpCompletion ParseCompletion(const HttpResponse& r) {
  HttpCompletion out;
  const Json body = Json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (r.status != 200 || body.is_discarded() || !body.is_object() ||
      !body.contains("choices") || !body["choices"].is_array() ||
      body["choices"].size() != 1 || !body["choices"][0].contains("text") ||
      !body["choices"][0]["text"].is_string() || !body.contains("usage")) {
    out.error = absl::StrCat("HTTP ", r.status, ": ", r.body);
    return out;
  }
  const Json& choice = body["choices"][0];
  out.text = choice["text"].get<std::string>();
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    out.finish_reason = choice["finish_reason"].get<std::string>();
  }
  const Json& usage = body["usage"];
  if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number()) {
    out.prompt_tokens = usage["prompt_tokens"].get<int64_t>();
  }
  if (usage.contains("completion_tokens") &&
      usage["completion_tokens"].is_number()) {
    out.completion_tokens = usage["completion_tokens"].get<int64_t>();
  }
  return out;
}

class OpenAiOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
    ASSERT_TRUE(
        daemon_
            .Start({"--model", kStories260KPath, "--listen", "127.0.0.1:0",
                    "--tenant", absl::StrCat("alice:", kKey), "--allow-root"})
            .ok())
        << daemon_.stderr_text();
    ASSERT_GT(daemon_.http_port(), 0) << daemon_.stderr_text();
    stub_ = v1::Paceline::NewStub(daemon_.Channel());
  }

  void TearDown() override {
    if (daemon_.pid() > 0) {
      EXPECT_EQ(daemon_.Drain().value_or(-1), 0) << daemon_.stderr_text();
    }
  }

  // POST /v1/completions at temperature 0 with `prompt` (a JSON string or
  // token-id array) and `max_tokens`.
  HttpCompletion Http(const Json& prompt, int max_tokens) {
    Json body = {{"model", "stories260K"},
                 {"prompt", prompt},
                 {"max_tokens", max_tokens},
                 {"temperature", 0}};
    return ParseCompletion(
        HttpPost(daemon_.http_port(), "/v1/completions", body.dump(), kKey));
  }

  // gRPC Complete at temperature 0 with the prompt as text.
  v1::CompleteResponse Grpc(const std::string& prompt, int max_tokens) {
    v1::GenerateRequest request;
    request.set_text(prompt);
    request.mutable_sampling()->set_temperature(0);
    request.mutable_stopping()->set_max_tokens(max_tokens);
    v1::CompleteResponse out;
    auto ctx = MakeClientContext(kKey);
    const grpc::Status st = stub_->Complete(ctx.get(), request, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return out;
  }

  DaemonProcess daemon_;
  std::unique_ptr<v1::Paceline::Stub> stub_;
};

TEST_F(OpenAiOracleTest, Greedy64TextPromptEqualsOracleAndGrpc) {
  const HttpCompletion http = Http(kOnceUponATime, 64);
  ASSERT_TRUE(http.error.empty()) << http.error;
  EXPECT_EQ(http.text, kGreedy64Text);
  EXPECT_EQ(http.finish_reason, "length");
  EXPECT_EQ(http.prompt_tokens,
            static_cast<int64_t>(kOnceUponATimePrompt.size()));
  EXPECT_EQ(http.completion_tokens, 64);

  const v1::CompleteResponse grpc = Grpc(kOnceUponATime, 64);
  EXPECT_EQ(grpc.text(), http.text);
  EXPECT_EQ(
      std::vector<int32_t>(grpc.token_ids().begin(), grpc.token_ids().end()),
      kGreedy64Ids);
  EXPECT_EQ(grpc.accepted().prompt_tokens(), http.prompt_tokens);
  EXPECT_EQ(grpc.finished().usage().completion_tokens(),
            http.completion_tokens);
}

TEST_F(OpenAiOracleTest, Greedy64TokenIdPromptEqualsOracleAndGrpc) {
  const HttpCompletion http =
      Http(Json(std::vector<int32_t>(kOnceUponATimePrompt)), 64);
  ASSERT_TRUE(http.error.empty()) << http.error;
  EXPECT_EQ(http.text, kGreedy64Text);
  EXPECT_EQ(http.prompt_tokens,
            static_cast<int64_t>(kOnceUponATimePrompt.size()));
  EXPECT_EQ(http.completion_tokens, 64);
  EXPECT_EQ(Grpc(kOnceUponATime, 64).text(), http.text);
}

TEST_F(OpenAiOracleTest, Greedy252EqualsRunCAndGrpc) {
  const HttpCompletion text = Http(kOnceUponATime, 252);
  ASSERT_TRUE(text.error.empty()) << text.error;
  EXPECT_EQ(text.text, kGreedy252Text);
  EXPECT_EQ(text.completion_tokens, 252);
  const HttpCompletion ids =
      Http(Json(std::vector<int32_t>(kOnceUponATimePrompt)), 252);
  ASSERT_TRUE(ids.error.empty()) << ids.error;
  EXPECT_EQ(ids.text, kGreedy252Text);
  EXPECT_EQ(Grpc(kOnceUponATime, 252).text(), text.text);
}

}  // namespace
}  // namespace paceline::server
