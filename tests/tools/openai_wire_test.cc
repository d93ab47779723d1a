// The OpenAI wire format of `paceline bench --api openai`: request bodies
// read back by Paceline's own OpenAI parser (server/openai, the server
// side of the same contract), chunks, error answers and model lists in the
// shapes OpenAI's API reference, vLLM and llama-server publish, the
// timing of a stream, and --url.

#include "tools/paceline/openai_wire.h"

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/openai/openai_error.h"
#include "server/openai/openai_request.h"
#include "tools/paceline/http_client.h"
#include "tools/paceline/openai_sender.h"

namespace paceline::tools::bench {
namespace {

using Json = nlohmann::ordered_json;
using Clock = CompletionStream::Clock;

Json Parse(const std::string& text) {
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

v1::GenerateRequest IdsRequest() {
  v1::GenerateRequest r;
  for (int id : {3, 17, 258, 4}) r.mutable_token_ids()->add_ids(id);
  r.mutable_stopping()->set_max_tokens(24);
  r.mutable_stopping()->set_ignore_eos(true);
  r.mutable_sampling()->set_seed(0xfedcba9876543210ULL);  // past INT64_MAX
  return r;
}

TEST(CompletionBodyTest, PacelineReadsBackTheSameRequest) {
  v1::GenerateRequest sent = IdsRequest();
  sent.mutable_sampling()->set_temperature(0.7f);
  sent.mutable_delivery()->set_pace_tokens_per_s(50);
  auto got = server::openai::ParseCompletionRequest(
      CompletionBody(sent, "stories260K"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->model, "stories260K");
  EXPECT_TRUE(got->stream);
  EXPECT_TRUE(got->include_usage);
  EXPECT_EQ(got->n, 1);
  ASSERT_EQ(got->prompts.size(), 1u);
  const v1::GenerateRequest& r = got->prompts[0];
  ASSERT_TRUE(r.has_token_ids());
  EXPECT_EQ(r.token_ids().ids().size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.token_ids().ids(i), sent.token_ids().ids(i));
  }
  EXPECT_EQ(r.stopping().max_tokens(), 24);
  EXPECT_TRUE(r.stopping().ignore_eos());
  EXPECT_EQ(r.sampling().seed(), sent.sampling().seed());
  ASSERT_TRUE(r.sampling().has_temperature());
  EXPECT_EQ(r.sampling().temperature(), 0.7f);
  EXPECT_EQ(r.delivery().pace_tokens_per_s(), 50);
}

TEST(CompletionBodyTest, FieldsAsJson) {
  const Json body = Parse(CompletionBody(IdsRequest(), "m"));
  ASSERT_TRUE(body.is_object());
  EXPECT_EQ(body["prompt"], Json::array({3, 17, 258, 4}));
  EXPECT_EQ(body["stream_options"], Json({{"include_usage", true}}));
  EXPECT_EQ(body["ignore_eos"], true);
  // OpenAI's seed is an int64: the same bits, signed.
  ASSERT_TRUE(body["seed"].is_number_integer());
  EXPECT_EQ(body["seed"].get<int64_t>(),
            static_cast<int64_t>(0xfedcba9876543210ULL));
  // Unset options are left to the server.
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("pace_tokens_per_s"));
  // A float temperature goes in its short form.
  v1::GenerateRequest t = IdsRequest();
  t.mutable_sampling()->set_temperature(0.7f);
  EXPECT_TRUE(
      absl::StrContains(CompletionBody(t, "m"), "\"temperature\":0.7,"));
}

TEST(CompletionBodyTest, TextPrompt) {
  v1::GenerateRequest sent;
  sent.set_text("Once upon a time \xff");  // invalid UTF-8 is replaced
  sent.mutable_stopping()->set_max_tokens(5);
  auto got = server::openai::ParseCompletionRequest(CompletionBody(sent, "m"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->prompts[0].text(), "Once upon a time \xEF\xBF\xBD");
  EXPECT_EQ(got->prompts[0].stopping().max_tokens(), 5);
}

// --extra-body: its members go in last, replacing the bench's own, and
// Paceline reads llama.cpp's json_schema out of a completions body.
TEST(CompletionBodyTest, ExtraBodyIsMergedLast) {
  const std::string extra =
      R"({"json_schema": {"type": "object", "properties": )"
      R"({"ok": {"type": "boolean"}}, "required": ["ok"]},)"
      R"( "ignore_eos": false, "n_probs": 0})";
  ASSERT_TRUE(CheckExtraBody(extra).ok());
  const std::string text = CompletionBody(IdsRequest(), "m", extra);
  const Json body = Parse(text);
  EXPECT_EQ(body["ignore_eos"], false);
  EXPECT_EQ(body["n_probs"], 0);
  EXPECT_EQ(body["json_schema"]["required"], Json::array({"ok"}));
  EXPECT_EQ(body["max_tokens"], 24);  // the rest as without it
  auto got = server::openai::ParseCompletionRequest(text);
  ASSERT_TRUE(got.ok()) << got.status();
  const v1::GenerateRequest& r = got->prompts[0];
  EXPECT_FALSE(r.stopping().ignore_eos());
  ASSERT_TRUE(r.sampling().has_constraint());
  EXPECT_TRUE(absl::StrContains(r.sampling().constraint().json_schema(),
                                "\"boolean\""));
}

TEST(CompletionBodyTest, ExtraBodyMustBeAnObject) {
  for (const char* bad : {"", "[1]", "\"x\"", "{\"a\":", "null"}) {
    EXPECT_EQ(CheckExtraBody(bad).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(CheckExtraBody("{}").ok());
}

TEST(ParseStreamChunkTest, PublishedShapes) {
  // OpenAI's API reference, the completions streaming object.
  auto openai = ParseStreamChunk(
      R"({"id":"cmpl-7iA7iJjj8V2zOkCGvWF2hAkDWBQZe","object":"text_completion",)"
      R"("created":1690759702,"choices":[{"text":"This","index":0,)"
      R"("logprobs":null,"finish_reason":null}],)"
      R"("model":"gpt-3.5-turbo-instruct","system_fingerprint":"fp_44709d6fcb"})");
  ASSERT_TRUE(openai.ok());
  EXPECT_EQ(openai->kind, StreamChunk::Kind::kData);
  EXPECT_EQ(openai->text, "This");
  EXPECT_FALSE(openai->completion_tokens);
  // The include_usage chunk: no choices, the usage.
  auto usage = ParseStreamChunk(
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m",)"
      R"("choices":[],"usage":{"prompt_tokens":5,"total_tokens":21,)"
      R"("completion_tokens":16}})");
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->text, "");
  EXPECT_EQ(usage->prompt_tokens, 5);
  EXPECT_EQ(usage->completion_tokens, 16);
  auto done = ParseStreamChunk("[DONE]");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->kind, StreamChunk::Kind::kDone);
}

TEST(ParseStreamChunkTest, ErrorsAndJunk) {
  auto error = ParseStreamChunk(
      R"({"error":{"message":"engine failed","type":"server_error",)"
      R"("param":null,"code":null}})");
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->kind, StreamChunk::Kind::kError);
  EXPECT_EQ(error->error, "server_error: engine failed");
  EXPECT_EQ(ParseStreamChunk("{\"choices\": [").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStreamChunk("[1, 2]").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A usage that is not numbers is no usage.
  auto odd = ParseStreamChunk(R"({"usage":{"completion_tokens":"7"}})");
  ASSERT_TRUE(odd.ok());
  EXPECT_FALSE(odd->completion_tokens);
}

TEST(HttpErrorTextTest, OpenAiErrorBodies) {
  // The body Paceline's server answers a RESOURCE_EXHAUSTED with.
  const server::openai::ErrorResponse e = server::openai::ToErrorResponse(
      absl::ResourceExhaustedError("tenant alice is over its limit"));
  ASSERT_EQ(e.http_status, 429);
  EXPECT_EQ(HttpErrorText(e.http_status, e.body, "1200", "2"),
            "HTTP 429 rate_limit_exceeded: tenant alice is over its limit "
            "(retry after 1200 ms)");
  EXPECT_EQ(HttpErrorText(429, e.body, std::nullopt, "2"),
            "HTTP 429 rate_limit_exceeded: tenant alice is over its limit "
            "(retry after 2 s)");
  // No code: the type.
  EXPECT_EQ(HttpErrorText(
                400,
                R"({"error":{"message":"bad","type":"invalid_request_error",)"
                R"("param":"temperature","code":null}})",
                std::nullopt, std::nullopt),
            "HTTP 400 invalid_request_error: bad");
  EXPECT_EQ(HttpErrorText(502, "Bad Gateway", std::nullopt, std::nullopt),
            "HTTP 502: \"Bad Gateway\"");
  EXPECT_EQ(HttpErrorText(500, "", std::nullopt, std::nullopt), "HTTP 500");
}

TEST(FirstServedModelTest, OpenAiAndLlamaServerLists) {
  // OpenAI's API reference, GET /v1/models.
  auto openai = FirstServedModel(
      R"({"object":"list","data":[{"id":"model-id-0","object":"model",)"
      R"("created":1686935002,"owned_by":"organization-owner"},)"
      R"({"id":"model-id-1","object":"model","created":1686935002,)"
      R"("owned_by":"organization-owner"}]})");
  ASSERT_TRUE(openai.ok());
  EXPECT_EQ(openai->id, "model-id-0");
  EXPECT_FALSE(openai->vocab_size);
  // llama-server adds meta.
  auto llama = FirstServedModel(
      R"({"object":"list","data":[{"id":"qwen.gguf","object":"model",)"
      R"("created":1,"owned_by":"llamacpp","meta":{"vocab_type":2,)"
      R"("n_vocab":151936,"n_ctx_train":32768}}]})");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->vocab_size, 151936);
  for (const char* bad : {"", "[]", R"({"data":[]})", R"({"data":[{}]})",
                          R"({"data":[{"id":7}]})"}) {
    EXPECT_EQ(FirstServedModel(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

// A stream fed at known times.
class CompletionStreamTest : public ::testing::Test {
 protected:
  Clock::time_point At(int ms) { return t0_ + std::chrono::milliseconds(ms); }
  bool Feed(const std::string& piece, int ms) {
    return stream_.Feed(piece, At(ms));
  }
  static std::string Text(const std::string& t) {
    return "data: {\"choices\":[{\"index\":0,\"text\":\"" + t + "\"}]}\n\n";
  }
  const Clock::time_point t0_ = Clock::now();
  CompletionStream stream_;
  RequestRecord rec_;
};

TEST_F(CompletionStreamTest, TimesAndUsage) {
  ASSERT_TRUE(Feed(": hello\n\n", 5));  // a comment is no text
  ASSERT_TRUE(Feed(Text("a"), 10));
  ASSERT_TRUE(Feed(Text("b") + Text(""), 30));  // "" is not a text chunk
  // "cd" stands for two tokens: usage says 4 in all.
  ASSERT_TRUE(Feed(Text("cd") +
                       "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
                       "\"completion_tokens\":4}}\n\n",
                   60));
  ASSERT_TRUE(Feed("data: [DONE]\n\n", 70));
  ASSERT_TRUE(Feed(Text("late"), 90));  // after [DONE]: ignored
  stream_.Fill(At(0), /*prompt_ids=*/3, &rec_);
  EXPECT_TRUE(rec_.ok) << rec_.error;
  EXPECT_EQ(rec_.prompt_tokens, 9);  // usage wins over the ids sent
  EXPECT_EQ(rec_.completion_tokens, 4);
  EXPECT_FALSE(rec_.tokens_from_chunks);
  EXPECT_DOUBLE_EQ(*rec_.ttft_delivered, 0.010);
  EXPECT_DOUBLE_EQ(*rec_.e2e_delivered, 0.070);
  EXPECT_DOUBLE_EQ(*rec_.tpot_delivered, 0.050 / 3);
  ASSERT_EQ(rec_.itl_delivered.size(), 3u);  // tokens - 1
  EXPECT_DOUBLE_EQ(rec_.itl_delivered[0], 0.020);
  EXPECT_DOUBLE_EQ(rec_.itl_delivered[1], 0.030);
  EXPECT_DOUBLE_EQ(rec_.itl_delivered[2], 0.0);  // the coalesced token
  EXPECT_FALSE(rec_.ttft_computed);              // no server timings
}

TEST_F(CompletionStreamTest, NoUsageCountsChunks) {
  ASSERT_TRUE(Feed(Text("a") + Text("b") + Text("c"), 10));
  ASSERT_TRUE(Feed("data: [DONE]\n\n", 20));
  stream_.Fill(At(0), /*prompt_ids=*/7, &rec_);
  EXPECT_TRUE(rec_.ok);
  EXPECT_TRUE(rec_.tokens_from_chunks);
  EXPECT_EQ(rec_.completion_tokens, 3);
  EXPECT_EQ(rec_.prompt_tokens, 7);
  EXPECT_EQ(rec_.itl_delivered, std::vector<double>({0, 0}));
}

TEST_F(CompletionStreamTest, ErrorChunkAndUnfinishedStream) {
  ASSERT_TRUE(Feed(Text("a"), 10));
  EXPECT_FALSE(Feed(
      "data: {\"error\":{\"message\":\"cancelled\",\"type\":\"server_error\"}}"
      "\n\n",
      20));
  EXPECT_FALSE(Feed("data: [DONE]\n\n", 30));  // broken for good
  stream_.Fill(At(0), 1, &rec_);
  EXPECT_FALSE(rec_.ok);
  EXPECT_EQ(rec_.error, "error in the stream: server_error: cancelled");

  CompletionStream cut;
  ASSERT_TRUE(cut.Feed(Text("a"), At(10)));
  RequestRecord rec;
  cut.Fill(At(0), 1, &rec);
  EXPECT_FALSE(rec.ok);
  EXPECT_EQ(rec.error, "the stream ended without data: [DONE]");

  CompletionStream junk;
  EXPECT_FALSE(junk.Feed("data: not json\n\n", At(1)));
  EXPECT_TRUE(absl::StrContains(junk.error(), "not a JSON object"));
}

// --outputs: the whole text and the last finish_reason, one line each.
TEST_F(CompletionStreamTest, TextAndFinishReasonMakeTheOutputLine) {
  ASSERT_TRUE(Feed(Text("{\\\"a\\\"") + Text(": 1}"), 10));
  ASSERT_TRUE(
      Feed("data: {\"choices\":[{\"index\":0,\"text\":\"\","
           "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
           20));
  EXPECT_EQ(stream_.text(), "{\"a\": 1}");
  EXPECT_EQ(stream_.finish_reason(), "stop");
  stream_.Fill(At(0), 1, &rec_);
  const Json line =
      Parse(OutputLine(2, 7, rec_, stream_.text(), stream_.finish_reason()));
  EXPECT_EQ(line, Json({{"salt", 2},
                        {"index", 7},
                        {"ok", true},
                        {"finish_reason", "stop"},
                        {"completion_tokens", 2},
                        {"text", "{\"a\": 1}"}}));
  RequestRecord failed;
  failed.error = "HTTP 400";
  const Json bad = Parse(OutputLine(1, 0, failed, "\xff", ""));
  EXPECT_EQ(bad["ok"], false);
  EXPECT_EQ(bad["error"], "HTTP 400");
  EXPECT_EQ(bad["text"], "\xEF\xBF\xBD");  // invalid UTF-8 replaced
}

TEST(ParseBenchUrlTest, Forms) {
  auto plain = ParseBenchUrl("http://127.0.0.1:8000");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->host, "127.0.0.1");
  EXPECT_EQ(plain->port, "8000");
  EXPECT_EQ(plain->prefix, "");
  auto v1 = ParseBenchUrl("http://localhost:8000/v1/");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->prefix, "");  // the OpenAI clients' base URL
  auto prefixed = ParseBenchUrl("HTTP://[::1]:9/pool/a/v1");
  ASSERT_TRUE(prefixed.ok());
  EXPECT_EQ(prefixed->host, "::1");
  EXPECT_EQ(prefixed->prefix, "/pool/a");
  EXPECT_EQ(prefixed->ToString(), "http://[::1]:9/pool/a");
  auto default_port = ParseHttpUrl("http://example.org");
  ASSERT_TRUE(default_port.ok());
  EXPECT_EQ(default_port->port, "80");
  EXPECT_FALSE(default_port->tls);
  auto https = ParseHttpUrl("https://example.org/v1");
  ASSERT_TRUE(https.ok());
  EXPECT_TRUE(https->tls);
  EXPECT_EQ(https->port, "443");
  EXPECT_EQ(https->ToString(), "https://example.org:443/v1");
  for (const char* bad :
       {"ftp://h", "h:80", "https://", "http://", "http://:80", "http://u@h:1",
        "http://h:0", "http://h:65536", "http://h:8a", "http://h:1?x=1",
        "http://h:1/#f", "http://::1:80", "http://[::1"}) {
    EXPECT_EQ(ParseHttpUrl(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace paceline::tools::bench
