// OpenAI response bodies from delivery's output (server/openai/
// openai_response.h). Expected shapes are OpenAI's, as the official Node
// client types them (the facts at the top of openai_response.h); token
// strings and bytes come from a real vocabulary (shared/vocab's llama-spm,
// with byte-fallback tokens) and are checked against the input text itself.
#include "server/openai/openai_response.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "server/openai/openai_json.h"
#include "tests/testing/build_paths.h"

namespace paceline::server::openai {
namespace {

const std::string kSpmVocab =
    ::paceline::testing::SharedPath("vocab/ggml-vocab-llama-spm.gguf");
// U+1F999 LLAMA: not in the vocabulary, so it is spelled in byte tokens.
constexpr char kLlama[] = "\xF0\x9F\xA6\x99";
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

std::vector<std::string> Keys(const Json& obj) {
  std::vector<std::string> keys;
  for (auto it = obj.begin(); it != obj.end(); ++it) keys.push_back(it.key());
  return keys;
}

using Keys_ = std::vector<std::string>;

engine::SampleResult Sample(int32_t token, float logprob,
                            std::vector<engine::TokenLogprob> top = {}) {
  engine::SampleResult s;
  s.token = token;
  s.logprob = logprob;
  s.top_logprobs = std::move(top);
  return s;
}

Outgoing TextDelta(std::string text) {
  Outgoing d;
  d.kind = Outgoing::Kind::kDelta;
  d.text = std::move(text);
  return d;
}

// A tool-call delta: index, id, name, arguments.
using Call = chat::ChatToolCallDelta;

ResponseContext Context(Api api, bool logprobs = false,
                        bool include_usage = false) {
  ResponseContext c;
  c.id = ResponseId(api, 0x1234);
  c.created = 1700000000;
  c.model = "stories";
  c.api = api;
  c.logprobs = logprobs;
  c.include_usage = include_usage;
  return c;
}

class OpenAiResponseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kSpmVocab)) return;
    auto file = engine::GgufFile::Open(kSpmVocab);
    ASSERT_TRUE(file.ok()) << file.status();
    auto tok = engine::Tokenizer::FromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << "no " << kSpmVocab;
  }

  // `text` as token ids (no BOS), and the tokens' concatenated bytes.
  static std::vector<int32_t> Encode(const std::string& text) {
    return tokenizer_->Encode(text, /*add_bos=*/false);
  }
  static std::string Bytes(const std::vector<int32_t>& ids) {
    std::string out;
    for (int32_t id : ids) out += tokenizer_->TokenBytes(id);
    return out;
  }

  static engine::Tokenizer* tokenizer_;
};
engine::Tokenizer* OpenAiResponseTest::tokenizer_ = nullptr;

// The completions text_offset oracle for valid UTF-8 `text` = the tokens'
// bytes: a token's offset is the number of characters that end at or
// before its first byte.
std::vector<int64_t> ExpectedOffsets(const std::string& text,
                                     const std::vector<std::string>& pieces) {
  std::vector<size_t> char_ends;  // byte offset just past each character
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    const size_t len = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    i += len;
    char_ends.push_back(i);
  }
  std::vector<int64_t> out;
  size_t start = 0;
  for (const std::string& piece : pieces) {
    int64_t n = 0;
    for (size_t end : char_ends) n += end <= start ? 1 : 0;
    out.push_back(n);
    start += piece.size();
  }
  return out;
}

// --- Ids, finish reasons, usage -------------------------------------------

TEST(OpenAiResponse, IdsArePrefixedHex) {
  EXPECT_EQ(ResponseId(Api::kCompletion, 0xabc), "cmpl-0000000000000abc");
  EXPECT_EQ(ResponseId(Api::kChat, 0xFFFFFFFFFFFFFFFFull),
            "chatcmpl-ffffffffffffffff");
}

TEST(OpenAiResponse, FinishReasons) {
  scheduler::FinishInfo f;
  f.reason = scheduler::FinishReason::kStop;
  EXPECT_EQ(FinishReasonName(f, false), "stop");
  EXPECT_EQ(FinishReasonName(f, true), "tool_calls");
  f.stop_string = "\n\n";  // a stop string ends a tool-calling answer too
  EXPECT_EQ(FinishReasonName(f, true), "tool_calls");
  f.reason = scheduler::FinishReason::kLength;
  EXPECT_EQ(FinishReasonName(f, false), "length");
  EXPECT_EQ(FinishReasonName(f, true), "length");  // cut: not a call
  f.reason = scheduler::FinishReason::kCancelled;
  EXPECT_EQ(FinishReasonName(f, true), "abort");
  f.reason = scheduler::FinishReason::kError;
  EXPECT_EQ(FinishReasonName(f, false), "error");
}

TEST(OpenAiResponse, UsageShape) {
  const Json u = UsageJson(7, 5, 3);
  EXPECT_EQ(Keys(u), (Keys_{"prompt_tokens", "completion_tokens",
                            "total_tokens", "prompt_tokens_details"}));
  EXPECT_EQ(u["prompt_tokens"], 7);
  EXPECT_EQ(u["completion_tokens"], 5);
  EXPECT_EQ(u["total_tokens"], 12);
  EXPECT_EQ(u["prompt_tokens_details"], Json::parse(R"({"cached_tokens":3})"));
}

TEST(OpenAiResponse, UsageCountsEachPromptOnceAndEveryChoice) {
  scheduler::Usage a{
      .prompt_tokens = 10, .completion_tokens = 4, .cached_prompt_tokens = 8};
  scheduler::Usage b{
      .prompt_tokens = 10, .completion_tokens = 6, .cached_prompt_tokens = 10};
  scheduler::Usage c{.prompt_tokens = 3, .completion_tokens = 2};
  UsageCounter counter;
  counter.Add(a, true);   // prompt 0, choice 0
  counter.Add(b, false);  // prompt 0, choice 1 (forked: shares the prompt)
  counter.Add(c, true);   // prompt 1
  EXPECT_EQ(counter.ToJson(), UsageJson(13, 12, 8));
}

TEST(OpenAiResponse, UsageSaysWhatSpeculationAcceptedAndRejected) {
  scheduler::Usage a{.prompt_tokens = 5, .completion_tokens = 9};
  a.draft_tokens = 8;
  a.accepted_draft_tokens = 6;
  scheduler::Usage b{.prompt_tokens = 5, .completion_tokens = 3};
  b.draft_tokens = 2;
  UsageCounter counter;
  counter.Add(a, true);
  counter.Add(b, false);
  Json want = UsageJson(5, 12, 0);
  want["completion_tokens_details"] = Json::parse(
      R"({"accepted_prediction_tokens":6,"rejected_prediction_tokens":4})");
  EXPECT_EQ(counter.ToJson(), want);
}

// --- Non-streamed bodies --------------------------------------------------

TEST(OpenAiResponse, CompletionBody) {
  const ResponseContext ctx = Context(Api::kCompletion);
  ChoiceBuilder choice(&ctx, nullptr);
  choice.Add(TextDelta("Once"));
  choice.Add(TextDelta(" upon"));
  Outgoing finished;
  finished.kind = Outgoing::Kind::kFinished;
  finished.text = "ignored";
  choice.Add(finished);
  const Json c = choice.ToJson(0, "length");
  EXPECT_EQ(Keys(c), (Keys_{"index", "text", "logprobs", "finish_reason"}));
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["text"], "Once upon");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(c["finish_reason"], "length");

  const Json body = ResponseJson(ctx, Json::array({c}), UsageJson(5, 2, 0));
  EXPECT_EQ(Keys(body),
            (Keys_{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(body["id"], "cmpl-0000000000001234");
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "stories");
  EXPECT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["usage"]["total_tokens"], 7);
}

TEST(OpenAiResponse, ChatBodyWithContentAndReasoning) {
  const ResponseContext ctx = Context(Api::kChat);
  ChoiceBuilder choice(&ctx, nullptr);
  Outgoing d1 = TextDelta("");
  d1.reasoning = "think";
  Outgoing d2 = TextDelta("Hi");
  d2.reasoning = "ing";
  choice.Add(d1);
  choice.Add(d2);
  choice.Add(TextDelta(" there"));
  const Json c = choice.ToJson(1, "stop");
  EXPECT_EQ(Keys(c), (Keys_{"index", "message", "logprobs", "finish_reason"}));
  EXPECT_EQ(c["index"], 1);
  const Json& m = c["message"];
  EXPECT_EQ(Keys(m),
            (Keys_{"role", "content", "refusal", "reasoning_content"}));
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "Hi there");
  EXPECT_TRUE(m["refusal"].is_null());
  EXPECT_EQ(m["reasoning_content"], "thinking");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(ResponseJson(ctx, Json::array({c}), UsageJson(1, 1, 0))["object"],
            "chat.completion");
}

TEST(OpenAiResponse, ChatEmptyAnswerHasEmptyContent) {
  const ResponseContext ctx = Context(Api::kChat);
  ChoiceBuilder choice(&ctx, nullptr);
  const Json m = choice.ToJson(0, "length")["message"];
  EXPECT_EQ(Keys(m), (Keys_{"role", "content", "refusal"}));
  EXPECT_EQ(m["content"], "");
}

// Two calls, the first split over three deltas, a third announced and then
// broken; no content.
std::vector<Outgoing> ToolCallDeltas() {
  std::vector<Outgoing> out(4, TextDelta(""));
  out[0].tool_calls = {Call{0, "call_a", "get_weather", "{\"city\":"}};
  out[1].tool_calls = {Call{0, "", "", " \"Paris\""},
                       Call{1, "call_b", "get_time", "{"}};
  out[2].tool_calls = {Call{0, "", "", "}"}, Call{1, "", "", "}"},
                       Call{2, "call_c", "oops", "{\"x\""}};
  out[3].broken_tool_calls = {2};
  return out;
}

TEST(OpenAiResponse, ChatToolCallsMergedAndBrokenDropped) {
  const ResponseContext ctx = Context(Api::kChat);
  ChoiceBuilder choice(&ctx, nullptr);
  for (const Outgoing& d : ToolCallDeltas()) choice.Add(d);
  const Json m = choice.ToJson(0, "tool_calls")["message"];
  EXPECT_EQ(Keys(m), (Keys_{"role", "content", "refusal", "tool_calls"}));
  EXPECT_TRUE(m["content"].is_null());  // no text, but calls
  const Json want = Json::parse(R"([
    {"id": "call_a", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "call_b", "type": "function",
     "function": {"name": "get_time", "arguments": "{}"}}])");
  EXPECT_EQ(m["tool_calls"], want);
  EXPECT_EQ(Keys(m["tool_calls"][0]), (Keys_{"id", "type", "function"}));
}

TEST(OpenAiResponse, ChatContentKeptBesideToolCalls) {
  const ResponseContext ctx = Context(Api::kChat);
  ChoiceBuilder choice(&ctx, nullptr);
  Outgoing d = TextDelta("Let me check.");
  d.tool_calls = {Call{0, "call_a", "f", "{}"}};
  choice.Add(d);
  const Json m = choice.ToJson(0, "tool_calls")["message"];
  EXPECT_EQ(m["content"], "Let me check.");
  EXPECT_EQ(m["tool_calls"].size(), 1u);
}

// --- Streams --------------------------------------------------------------

// What a client (the openai SDK's stream accumulation) makes of chat
// chunks: content and reasoning concatenated, tool calls per index with id,
// type and name from their first piece and arguments concatenated.
Json Reassemble(const std::vector<Json>& chunks) {
  std::string content, reasoning;
  std::vector<Json> calls;
  for (const Json& chunk : chunks) {
    const Json& d = chunk["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) {
      reasoning += d["reasoning_content"].get<std::string>();
    }
    if (!d.contains("tool_calls")) continue;
    for (const Json& piece : d["tool_calls"]) {
      const size_t i = piece["index"].get<size_t>();
      if (calls.size() <= i) calls.resize(i + 1);
      if (piece.contains("id")) {
        calls[i]["id"] = piece["id"];
        calls[i]["type"] = piece["type"];
        calls[i]["function"]["name"] = piece["function"]["name"];
        calls[i]["function"]["arguments"] = "";
      }
      calls[i]["function"]["arguments"] =
          calls[i]["function"]["arguments"].get<std::string>() +
          piece["function"]["arguments"].get<std::string>();
    }
  }
  Json m = Json::object();
  m["role"] = "assistant";
  m["content"] = content.empty() && !calls.empty() ? Json() : Json(content);
  m["refusal"] = nullptr;
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = calls;
  return m;
}

TEST(OpenAiResponse, ChatChunksReassembleIntoTheMessage) {
  const ResponseContext ctx = Context(Api::kChat, false, true);
  ChoiceStream stream(&ctx, nullptr, 0);
  ChoiceBuilder choice(&ctx, nullptr);
  std::vector<Json> chunks = {stream.Chunk(Outgoing{})};  // the role chunk
  Outgoing lead = TextDelta("");
  lead.reasoning = "hmm";
  std::vector<Outgoing> deltas = {lead};
  for (const Outgoing& d : ToolCallDeltas()) deltas.push_back(d);
  for (const Outgoing& d : deltas) {
    choice.Add(d);
    if (HasVisibleOutput(ctx, d)) chunks.push_back(stream.Chunk(d));
  }
  EXPECT_EQ(chunks.size(), 5u);  // role, reasoning, 3 call deltas

  const Json& first = chunks[0];
  EXPECT_EQ(Keys(first),
            (Keys_{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["id"], "chatcmpl-0000000000001234");
  EXPECT_TRUE(first["usage"].is_null());
  EXPECT_EQ(first["choices"][0],
            Json::parse(R"({"index":0,"delta":{"role":"assistant",
              "content":""},"logprobs":null,"finish_reason":null})"));
  EXPECT_EQ(chunks[1]["choices"][0]["delta"],
            Json::parse(R"({"reasoning_content":"hmm"})"));
  // The second piece of call 0 and the first of call 1.
  EXPECT_EQ(chunks[3]["choices"][0]["delta"], Json::parse(R"({"tool_calls":[
      {"index":0,"function":{"arguments":" \"Paris\""}},
      {"index":1,"id":"call_b","type":"function",
       "function":{"name":"get_time","arguments":"{"}}]})"));

  Json want = choice.ToJson(0, "tool_calls")["message"];
  // The stream already sent call 2's opening piece (it cannot take it back);
  // a client drops it from its message on its own, as the broken list says.
  Json got = Reassemble(chunks);
  ASSERT_EQ(got["tool_calls"].size(), 3u);
  EXPECT_EQ(got["tool_calls"][2]["id"], "call_c");
  got["tool_calls"].erase(2);
  EXPECT_EQ(got, want);

  const Json fin = FinishChunkJson(ctx, 0, "tool_calls");
  EXPECT_EQ(fin["choices"][0],
            Json::parse(R"({"index":0,"delta":{},"logprobs":null,
              "finish_reason":"tool_calls"})"));
  EXPECT_TRUE(fin["usage"].is_null());
}

TEST(OpenAiResponse, ChatChunkDropsCallBrokenInTheSameDelta) {
  const ResponseContext ctx = Context(Api::kChat);
  ChoiceStream stream(&ctx, nullptr, 0);
  Outgoing d = TextDelta("{\"name\"");
  d.tool_calls = {Call{0, "call_a", "f", "{"}};
  d.broken_tool_calls = {0};
  const Json chunk = stream.Chunk(d);
  EXPECT_EQ(chunk["choices"][0]["delta"],
            Json::parse(R"({"role":"assistant","content":"{\"name\""})"));
  EXPECT_FALSE(chunk.contains("usage"));  // include_usage off
  Outgoing only_broken = TextDelta("");
  only_broken.tool_calls = d.tool_calls;
  only_broken.broken_tool_calls = {0};
  EXPECT_FALSE(HasVisibleOutput(ctx, only_broken));
  EXPECT_TRUE(HasVisibleOutput(ctx, TextDelta("x")));
}

TEST(OpenAiResponse, LaterChatChunksCarryNoRole) {
  const ResponseContext ctx = Context(Api::kChat);
  ChoiceStream stream(&ctx, nullptr, 2);
  stream.Chunk(TextDelta("a"));
  const Json c = stream.Chunk(TextDelta("b"));
  EXPECT_EQ(c["choices"][0], Json::parse(R"({"index":2,"delta":{"content":"b"},
      "logprobs":null,"finish_reason":null})"));
}

TEST(OpenAiResponse, CompletionChunks) {
  const ResponseContext ctx = Context(Api::kCompletion, false, true);
  ChoiceStream stream(&ctx, nullptr, 1);
  const Json c = stream.Chunk(TextDelta("Once"));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(Keys(c),
            (Keys_{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(c["choices"][0], Json::parse(R"({"index":1,"text":"Once",
      "logprobs":null,"finish_reason":null})"));
  EXPECT_EQ(FinishChunkJson(ctx, 1, "stop")["choices"][0],
            Json::parse(R"({"index":1,"text":"","logprobs":null,
              "finish_reason":"stop"})"));
  const Json u = UsageChunkJson(ctx, UsageJson(4, 2, 1));
  EXPECT_EQ(Keys(u),
            (Keys_{"id", "object", "created", "model", "choices", "usage"}));
  EXPECT_EQ(u["object"], "text_completion");
  EXPECT_EQ(u["choices"], Json::array());
  EXPECT_EQ(u["usage"], UsageJson(4, 2, 1));
  EXPECT_EQ(UsageChunkJson(Context(Api::kChat), UsageJson(1, 1, 0))["object"],
            "chat.completion.chunk");
}

// --- Logprobs with a real vocabulary --------------------------------------

TEST_F(OpenAiResponseTest, ByteTokensSplitACharacter) {
  const std::vector<int32_t> ids = Encode(std::string("a") + kLlama + "b");
  const std::string text = Bytes(ids);
  ASSERT_NE(text.find(kLlama), std::string::npos);
  // The llama is spelled in its four byte tokens, none valid UTF-8 alone.
  for (const char* b : {"<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}) {
    const int32_t id = tokenizer_->TokenId(b);
    ASSERT_GE(id, 0) << b;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), id), 1) << b;
  }
}

TEST_F(OpenAiResponseTest, CompletionLogprobsShapeAndOffsets) {
  const std::string input = std::string("Hi ") + kLlama + " ok";
  const std::vector<int32_t> ids = Encode(input);
  const std::string text = Bytes(ids);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(tokenizer_->TokenBytes(id));

  const ResponseContext ctx = Context(Api::kCompletion, true);
  ChoiceBuilder choice(&ctx, tokenizer_);
  // Two deltas: the offsets carry over.
  const size_t half = ids.size() / 2;
  for (size_t start : {size_t{0}, half}) {
    Outgoing d = TextDelta("");
    for (size_t i = start; i < (start == 0 ? half : ids.size()); ++i) {
      d.ids.push_back(ids[i]);
      d.samples.push_back(Sample(ids[i], -0.5f - static_cast<float>(i)));
    }
    choice.Add(d);
  }
  const Json lp = choice.ToJson(0, "stop")["logprobs"];
  EXPECT_EQ(Keys(lp),
            (Keys_{"tokens", "token_logprobs", "top_logprobs", "text_offset"}));
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  std::vector<int64_t> offsets = lp["text_offset"].get<std::vector<int64_t>>();
  EXPECT_EQ(offsets, ExpectedOffsets(text, pieces));
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& bytes = pieces[i];
    const bool partial = bytes.size() == 1 && (bytes[0] & 0x80) != 0;
    EXPECT_EQ(lp["tokens"][i], partial ? std::string(kReplacement) : bytes);
    EXPECT_FLOAT_EQ(lp["token_logprobs"][i].get<float>(),
                    -0.5f - static_cast<float>(i));
    // logprobs 0: the sampled token alone.
    EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
    EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i]));
  }
}

TEST_F(OpenAiResponseTest, CompletionTopLogprobsAddTheSampledToken) {
  const int32_t a = Encode("a")[0];
  const int32_t b = Encode("b")[0];
  const int32_t f0 = tokenizer_->TokenId("<0xF0>");
  const int32_t f1 = tokenizer_->TokenId("<0xF1>");
  ASSERT_GE(f0, 0);
  ASSERT_GE(f1, 0);
  const ResponseContext ctx = Context(Api::kCompletion, true);
  ChoiceBuilder choice(&ctx, tokenizer_);
  Outgoing d = TextDelta("");
  // Sampled `a`, not in the top 3; two top tokens read the same (U+FFFD):
  // the more likely keeps the key.
  d.samples = {
      Sample(a, -3.0f, {{b, -0.1f}, {f0, -1.0f}, {f1, -2.0f}}),
      Sample(b, -std::numeric_limits<float>::infinity(), {{b, std::nanf("")}})};
  choice.Add(d);
  const Json lp = choice.ToJson(0, "stop")["logprobs"];
  const Json& top = lp["top_logprobs"][0];
  EXPECT_EQ(Keys(top), (Keys_{tokenizer_->TokenBytes(b), kReplacement,
                              tokenizer_->TokenBytes(a)}));
  EXPECT_FLOAT_EQ(top[kReplacement].get<float>(), -1.0f);
  EXPECT_FLOAT_EQ(top[tokenizer_->TokenBytes(a)].get<float>(), -3.0f);
  // -inf and NaN are OpenAI's -9999.0.
  EXPECT_EQ(lp["token_logprobs"][1], -9999.0);
  EXPECT_EQ(lp["top_logprobs"][1][tokenizer_->TokenBytes(b)], -9999.0);
}

TEST_F(OpenAiResponseTest, ChatLogprobsBytesRebuildTheText) {
  const std::vector<int32_t> ids = Encode(std::string("x") + kLlama);
  const std::string text = Bytes(ids);
  const int32_t eos = tokenizer_->eos_id();
  ASSERT_TRUE(tokenizer_->IsControl(eos));

  const ResponseContext ctx = Context(Api::kChat, true);
  ChoiceBuilder choice(&ctx, tokenizer_);
  Outgoing d = TextDelta(text);
  for (int32_t id : ids) d.samples.push_back(Sample(id, -1.0f, {{id, -1.0f}}));
  d.samples.back().top_logprobs.push_back({eos, -4.0f});
  choice.Add(d);
  const Json lp = choice.ToJson(0, "stop")["logprobs"];
  EXPECT_EQ(Keys(lp), (Keys_{"content", "refusal"}));
  EXPECT_TRUE(lp["refusal"].is_null());
  ASSERT_EQ(lp["content"].size(), ids.size());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& e = lp["content"][i];
    EXPECT_EQ(Keys(e), (Keys_{"token", "logprob", "bytes", "top_logprobs"}));
    std::string bytes;
    for (const Json& b : e["bytes"]) bytes.push_back(b.get<int>());
    EXPECT_EQ(bytes, tokenizer_->TokenBytes(ids[i]));
    joined += bytes;
    const bool partial = bytes.size() == 1 && (bytes[0] & 0x80) != 0;
    EXPECT_EQ(e["token"], partial ? std::string(kReplacement) : bytes);
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    EXPECT_EQ(e["top_logprobs"][0]["bytes"], e["bytes"]);
    EXPECT_EQ(Keys(e["top_logprobs"][0]), (Keys_{"token", "logprob", "bytes"}));
  }
  EXPECT_EQ(joined, text);  // the raw bytes combine into the text
  // A control token reads as its vocabulary text.
  const Json& eos_entry = lp["content"].back()["top_logprobs"][1];
  EXPECT_EQ(eos_entry["token"], tokenizer_->TokenText(eos));
  EXPECT_EQ(eos_entry["bytes"].size(), tokenizer_->TokenText(eos).size());
}

TEST_F(OpenAiResponseTest, StreamedLogprobsMatchTheWholeAnswer) {
  const std::vector<int32_t> ids = Encode(std::string("Hi ") + kLlama + "!");
  for (Api api : {Api::kCompletion, Api::kChat}) {
    const ResponseContext ctx = Context(api, true);
    ChoiceBuilder choice(&ctx, tokenizer_);
    ChoiceStream stream(&ctx, tokenizer_, 0);
    Json streamed_offsets = Json::array();
    Json streamed_content = Json::array();
    for (int32_t id : ids) {
      Outgoing d = TextDelta("");
      d.ids = {id};
      d.samples = {Sample(id, -1.0f)};
      choice.Add(d);
      const Json lp = stream.Chunk(d)["choices"][0]["logprobs"];
      if (api == Api::kCompletion) {
        ASSERT_EQ(lp["tokens"].size(), 1u);
        streamed_offsets.push_back(lp["text_offset"][0]);
      } else {
        EXPECT_TRUE(lp["refusal"].is_null());
        streamed_content.push_back(lp["content"][0]);
      }
    }
    const Json whole = choice.ToJson(0, "stop")["logprobs"];
    if (api == Api::kCompletion) {
      EXPECT_EQ(streamed_offsets, whole["text_offset"]);
    } else {
      EXPECT_EQ(streamed_content, whole["content"]);
    }
  }
}

TEST_F(OpenAiResponseTest, LogprobsOnWithoutSamples) {
  const ResponseContext completion = Context(Api::kCompletion, true);
  EXPECT_EQ(
      ChoiceBuilder(&completion, tokenizer_).ToJson(0, "stop")["logprobs"],
      Json::parse(R"({"tokens":[],"token_logprobs":[],
              "top_logprobs":[],"text_offset":[]})"));
  const ResponseContext chat = Context(Api::kChat, true);
  EXPECT_EQ(ChoiceBuilder(&chat, tokenizer_).ToJson(0, "stop")["logprobs"],
            Json::parse(R"({"content":[],"refusal":null})"));
  ChoiceStream stream(&chat, tokenizer_, 0);
  EXPECT_EQ(stream.Chunk(TextDelta("x"))["choices"][0]["logprobs"],
            Json::parse(R"({"content":[],"refusal":null})"));
}

// --- Models, tokenize, detokenize, invalid UTF-8 --------------------------

TEST(OpenAiResponse, Models) {
  const Json m = ModelJson("stories", 1700000000, "paceline");
  EXPECT_EQ(m, Json::parse(R"({"id":"stories","object":"model",
      "created":1700000000,"owned_by":"paceline"})"));
  EXPECT_EQ(Keys(m), (Keys_{"id", "object", "created", "owned_by"}));
  const Json list = ModelListJson({m});
  EXPECT_EQ(Keys(list), (Keys_{"object", "data"}));
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"], Json::array({m}));
  EXPECT_EQ(ModelListJson({})["data"], Json::array());
}

TEST_F(OpenAiResponseTest, TokenizeAndDetokenize) {
  const std::vector<int32_t> ids = {tokenizer_->TokenId("<0xF0>"),
                                    Encode("a")[0]};
  const Json t = TokenizeJson(ids, 4096);
  EXPECT_EQ(Keys(t), (Keys_{"count", "max_model_len", "tokens"}));
  EXPECT_EQ(t["count"], 2);
  EXPECT_EQ(t["max_model_len"], 4096);
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), ids);
  const Json s = TokenizeJson(ids, 4096, tokenizer_);
  EXPECT_EQ(s["token_strs"],
            Json::array({"<0xF0>", tokenizer_->TokenText(ids[1])}));
  EXPECT_EQ(DetokenizeJson("ok"), Json::parse(R"({"prompt":"ok"})"));
  EXPECT_EQ(DetokenizeJson("a\xF0"),
            Json({{"prompt", std::string("a") + kReplacement}}));
}

TEST(OpenAiResponse, InvalidUtf8NeverThrows) {
  ResponseContext ctx = Context(Api::kChat, false, true);
  ctx.model = "bad\xFF";
  ChoiceBuilder choice(&ctx, nullptr);
  Outgoing d = TextDelta("\xC3(\xFE");
  d.reasoning = "\xE2\x82";
  d.tool_calls = {Call{0, "id\x80", "n\xFF", "{\xC0}"}};
  choice.Add(d);
  ChoiceStream stream(&ctx, nullptr, 0);
  for (const Json& j :
       {ResponseJson(ctx, Json::array({choice.ToJson(0, "stop")}),
                     UsageJson(1, 1, 0)),
        stream.Chunk(d), FinishChunkJson(ctx, 0, "stop"),
        ModelJson("m\xFF", 0, "o\xFE")}) {
    const std::string text = Dump(j);
    const Json back = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(back.is_discarded()) << text;
    EXPECT_NE(text.find(kReplacement), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace paceline::server::openai
