// OpenAI request bodies -> v1::GenerateRequest (server/openai), and the
// OpenAI error shape. Expected values come from OpenAI's API reference
// (the facts listed in server/openai/openai_request.h), not from runs.
#include "server/openai/openai_request.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

using Json = nlohmann::ordered_json;

OpenAiRequest Completion(const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseCompletionRequest(body);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

OpenAiRequest Chat(const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseChatCompletionRequest(body);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

// The request is refused with InvalidArgument naming `param`.
void ExpectParamError(const absl::StatusOr<OpenAiRequest>& r,
                      const std::string& param, const std::string& body) {
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  EXPECT_EQ(ParamOf(r.status()), param) << body << ": " << r.status();
  EXPECT_FALSE(r.status().message().empty());
}

void CompletionError(const std::string& body, const std::string& param) {
  ExpectParamError(ParseCompletionRequest(body), param, body);
}

void ChatError(const std::string& body, const std::string& param) {
  ExpectParamError(ParseChatCompletionRequest(body), param, body);
}

constexpr char kUser[] = R"("messages":[{"role":"user","content":"hi"}])";

std::string ChatBody(const std::string& extra) {
  return absl::StrCat("{", kUser, extra.empty() ? "" : ",", extra, "}");
}

std::string CompletionBody(const std::string& extra) {
  return absl::StrCat(R"({"prompt":"x")", extra.empty() ? "" : ",", extra, "}");
}

// --- Prompts -------------------------------------------------------------

TEST(OpenAiCompletion, StringPromptIsText) {
  OpenAiRequest r = Completion(R"({"model":"m","prompt":"Once upon"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text(), "Once upon");
  EXPECT_EQ(r.prompts[0].model(), "m");
  EXPECT_EQ(r.model, "m");
}

TEST(OpenAiCompletion, TokenListIsTokenIds) {
  OpenAiRequest r = Completion(R"({"prompt":[1, 2, 300]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  ASSERT_TRUE(r.prompts[0].has_token_ids());
  EXPECT_EQ(r.prompts[0].token_ids().ids_size(), 3);
  EXPECT_EQ(r.prompts[0].token_ids().ids(2), 300);
}

TEST(OpenAiCompletion, ListOfStringsIsABatch) {
  OpenAiRequest r =
      Completion(R"({"prompt":["a","b","c"],"temperature":0,"max_tokens":5})");
  ASSERT_EQ(r.prompts.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.prompts[i].text(), std::string(1, static_cast<char>('a' + i)));
    // Every prompt carries the shared options.
    EXPECT_EQ(r.prompts[i].sampling().temperature(), 0.0f);
    EXPECT_EQ(r.prompts[i].stopping().max_tokens(), 5);
  }
}

TEST(OpenAiCompletion, ListOfTokenListsIsABatch) {
  OpenAiRequest r = Completion(R"({"prompt":[[1,2],[3]]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].token_ids().ids_size(), 2);
  EXPECT_EQ(r.prompts[1].token_ids().ids(0), 3);
}

TEST(OpenAiCompletion, PromptErrorsNameTheElement) {
  CompletionError(R"({})", "prompt");
  CompletionError(R"({"prompt":null})", "prompt");
  CompletionError(R"({"prompt":[]})", "prompt");
  CompletionError(R"({"prompt":7})", "prompt");
  CompletionError(R"({"prompt":[1,"a"]})", "prompt[1]");
  CompletionError(R"({"prompt":[1,-1]})", "prompt[1]");
  CompletionError(R"({"prompt":[1,2.5]})", "prompt[1]");
  CompletionError(R"({"prompt":[1,4294967296]})", "prompt[1]");
  CompletionError(R"({"prompt":["a",3]})", "prompt[1]");
  CompletionError(R"({"prompt":["a",[]]})", "prompt[1]");
  CompletionError(R"({"prompt":[[1],[2,"x"]]})", "prompt[1][1]");
  CompletionError(R"({"prompt":["a",{}]})", "prompt[1]");
}

TEST(OpenAiCompletion, BatchIsBounded) {
  Json prompts = Json::array();
  for (int i = 0; i <= kMaxBatchPrompts; ++i) prompts.push_back("p");
  CompletionError(Json{{"prompt", prompts}}.dump(), "prompt");
  prompts.erase(prompts.begin());
  EXPECT_EQ(Completion(Json{{"prompt", prompts}}.dump()).prompts.size(),
            static_cast<size_t>(kMaxBatchPrompts));
}

// --- Defaults ------------------------------------------------------------

TEST(OpenAiCompletion, DefaultsLeaveEverythingUnset) {
  OpenAiRequest r = Completion(R"({"prompt":"x"})");
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.model, "");
  const v1::GenerateRequest& g = r.prompts[0];
  EXPECT_FALSE(g.sampling().has_temperature());
  EXPECT_FALSE(g.sampling().has_top_p());
  EXPECT_FALSE(g.sampling().has_top_k());
  EXPECT_FALSE(g.sampling().has_seed());
  EXPECT_FALSE(g.stopping().has_max_tokens());
  EXPECT_EQ(g.stopping().stop_size(), 0);
  EXPECT_FALSE(g.logprobs().enabled());
  EXPECT_EQ(g.priority(), v1::PRIORITY_UNSPECIFIED);
  EXPECT_FALSE(g.delivery().has_pace_tokens_per_s());
  EXPECT_FALSE(g.delivery().has_burst_tokens());
}

TEST(OpenAiCompletion, NullIsAbsent) {
  OpenAiRequest r = Completion(CompletionBody(
      R"("temperature":null,"stop":null,"n":null,"max_tokens":null,)"
      R"("logprobs":null,"seed":null,"stream":null,"stream_options":null,)"
      R"("echo":null,"response_format":null,"user":null)"));
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.prompts[0].sampling().has_temperature());
  EXPECT_FALSE(r.prompts[0].stopping().has_max_tokens());
}

TEST(OpenAiCompletion, UnknownFieldsAreIgnored) {
  OpenAiRequest r = Completion(CompletionBody(
      R"("frobnicate":{"deep":[1,2,3]},"metadata":{"a":"b"},"user":"u1",)"
      R"("store":true,"service_tier":"auto")"));
  EXPECT_EQ(r.prompts[0].text(), "x");
}

// --- Sampling ------------------------------------------------------------

TEST(OpenAiSampling, EveryFieldMaps) {
  OpenAiRequest r = Completion(
      CompletionBody(R"("temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,)"
                     R"("presence_penalty":-1.5,"frequency_penalty":2,)"
                     R"("repetition_penalty":1.1,"seed":42)"));
  const v1::SamplingOptions& s = r.prompts[0].sampling();
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.top_k(), 40);
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  EXPECT_FLOAT_EQ(s.presence_penalty(), -1.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), 2.0f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.1f);
  EXPECT_EQ(s.seed(), 42u);
}

TEST(OpenAiSampling, IntegerTemperatureIsANumber) {
  EXPECT_FLOAT_EQ(Completion(CompletionBody(R"("temperature":1)"))
                      .prompts[0]
                      .sampling()
                      .temperature(),
                  1.0f);
}

TEST(OpenAiSampling, TopKOffValues) {
  // vLLM's -1 and 0 both mean "off": left unset.
  EXPECT_FALSE(Completion(CompletionBody(R"("top_k":-1)"))
                   .prompts[0]
                   .sampling()
                   .has_top_k());
  EXPECT_FALSE(Completion(CompletionBody(R"("top_k":0)"))
                   .prompts[0]
                   .sampling()
                   .has_top_k());
}

TEST(OpenAiSampling, SeedTakesAny64BitInteger) {
  EXPECT_EQ(Completion(CompletionBody(R"("seed":18446744073709551615)"))
                .prompts[0]
                .sampling()
                .seed(),
            18446744073709551615ull);
  EXPECT_EQ(
      Completion(CompletionBody(R"("seed":-1)")).prompts[0].sampling().seed(),
      18446744073709551615ull);
  CompletionError(CompletionBody(R"("seed":1.5)"), "seed");
  CompletionError(CompletionBody(R"("seed":"42")"), "seed");
  CompletionError(CompletionBody(R"("seed":1e30)"), "seed");
}

TEST(OpenAiSampling, WrongTypesAndRangesNameTheField) {
  CompletionError(CompletionBody(R"("temperature":"1")"), "temperature");
  CompletionError(CompletionBody(R"("temperature":true)"), "temperature");
  CompletionError(CompletionBody(R"("temperature":-0.1)"), "temperature");
  CompletionError(CompletionBody(R"("temperature":1e300)"), "temperature");
  CompletionError(CompletionBody(R"("repetition_penalty":1e39)"),
                  "repetition_penalty");
  CompletionError(CompletionBody(R"("top_p":0)"), "top_p");
  CompletionError(CompletionBody(R"("top_p":1.01)"), "top_p");
  CompletionError(CompletionBody(R"("min_p":-0.5)"), "min_p");
  CompletionError(CompletionBody(R"("min_p":2)"), "min_p");
  CompletionError(CompletionBody(R"("presence_penalty":2.5)"),
                  "presence_penalty");
  CompletionError(CompletionBody(R"("frequency_penalty":-3)"),
                  "frequency_penalty");
  CompletionError(CompletionBody(R"("repetition_penalty":0)"),
                  "repetition_penalty");
  CompletionError(CompletionBody(R"("repetition_penalty":1e-45)"),
                  "repetition_penalty");
  CompletionError(CompletionBody(R"("top_k":-2)"), "top_k");
  CompletionError(CompletionBody(R"("top_k":2.5)"), "top_k");
  CompletionError(CompletionBody(R"("top_k":99999999999)"), "top_k");
}

// --- Stopping ------------------------------------------------------------

TEST(OpenAiStopping, MaxTokensAndStop) {
  OpenAiRequest r =
      Completion(CompletionBody(R"("max_tokens":16,"stop":["\n","END"])"));
  const v1::StoppingOptions& s = r.prompts[0].stopping();
  EXPECT_EQ(s.max_tokens(), 16);
  ASSERT_EQ(s.stop_size(), 2);
  EXPECT_EQ(s.stop(0), "\n");
  EXPECT_EQ(s.stop(1), "END");
}

TEST(OpenAiStopping, StopAsOneString) {
  OpenAiRequest r = Completion(CompletionBody(R"("stop":"###")"));
  ASSERT_EQ(r.prompts[0].stopping().stop_size(), 1);
  EXPECT_EQ(r.prompts[0].stopping().stop(0), "###");
}

TEST(OpenAiStopping, StopErrors) {
  CompletionError(CompletionBody(R"("stop":["a",1])"), "stop[1]");
  CompletionError(CompletionBody(R"("stop":["a",""])"), "stop[1]");
  CompletionError(CompletionBody(R"("stop":"")"), "stop");
  CompletionError(CompletionBody(R"("stop":3)"), "stop");
  // OpenAI: "up to 4 sequences".
  CompletionError(CompletionBody(R"("stop":["a","b","c","d","e"])"), "stop");
  EXPECT_EQ(Completion(CompletionBody(R"("stop":["a","b","c","d"])"))
                .prompts[0]
                .stopping()
                .stop_size(),
            4);
}

TEST(OpenAiStopping, MaxTokensErrors) {
  CompletionError(CompletionBody(R"("max_tokens":0)"), "max_tokens");
  CompletionError(CompletionBody(R"("max_tokens":"16")"), "max_tokens");
  CompletionError(CompletionBody(R"("max_tokens":1e20)"), "max_tokens");
  CompletionError(CompletionBody(R"("max_tokens":99999999999999999999999)"),
                  "max_tokens");
  ChatError(ChatBody(R"("max_completion_tokens":-5)"), "max_completion_tokens");
}

TEST(OpenAiStopping, MaxCompletionTokensWinsInChat) {
  EXPECT_EQ(Chat(ChatBody(R"("max_tokens":10,"max_completion_tokens":20)"))
                .prompts[0]
                .stopping()
                .max_tokens(),
            20);
  EXPECT_EQ(
      Chat(ChatBody(R"("max_tokens":10)")).prompts[0].stopping().max_tokens(),
      10);
  // Completions has max_tokens only.
  EXPECT_FALSE(Completion(CompletionBody(R"("max_completion_tokens":20)"))
                   .prompts[0]
                   .stopping()
                   .has_max_tokens());
}

TEST(OpenAiStopping, VllmExtras) {
  OpenAiRequest r =
      Completion(CompletionBody(R"("ignore_eos":true,"stop_token_ids":[2,7])"));
  EXPECT_TRUE(r.prompts[0].stopping().ignore_eos());
  ASSERT_EQ(r.prompts[0].stopping().stop_token_ids_size(), 2);
  EXPECT_EQ(r.prompts[0].stopping().stop_token_ids(1), 7);
  CompletionError(CompletionBody(R"("stop_token_ids":[2,-7])"),
                  "stop_token_ids[1]");
  CompletionError(CompletionBody(R"("ignore_eos":1)"), "ignore_eos");
}

// --- Logprobs ------------------------------------------------------------

TEST(OpenAiLogprobs, CompletionsTakesAnInteger) {
  OpenAiRequest r = Completion(CompletionBody(R"("logprobs":3)"));
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_TRUE(r.prompts[0].logprobs().enabled());
  EXPECT_EQ(r.prompts[0].logprobs().top_n(), 3);
  // 0: the chosen tokens' logprobs only.
  OpenAiRequest zero = Completion(CompletionBody(R"("logprobs":0)"));
  EXPECT_TRUE(zero.prompts[0].logprobs().enabled());
  EXPECT_EQ(zero.prompts[0].logprobs().top_n(), 0);
  CompletionError(CompletionBody(R"("logprobs":true)"), "logprobs");
  CompletionError(CompletionBody(R"("logprobs":21)"), "logprobs");
  CompletionError(CompletionBody(R"("logprobs":-1)"), "logprobs");
}

TEST(OpenAiLogprobs, ChatTakesABoolAndTopLogprobs) {
  OpenAiRequest r = Chat(ChatBody(R"("logprobs":true,"top_logprobs":5)"));
  EXPECT_TRUE(r.prompts[0].logprobs().enabled());
  EXPECT_EQ(r.prompts[0].logprobs().top_n(), 5);
  EXPECT_FALSE(
      Chat(ChatBody(R"("logprobs":false)")).prompts[0].logprobs().enabled());
  ChatError(ChatBody(R"("logprobs":3)"), "logprobs");
  ChatError(ChatBody(R"("top_logprobs":2)"), "top_logprobs");
  ChatError(ChatBody(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs");
}

// --- Transport -----------------------------------------------------------

TEST(OpenAiTransport, StreamAndUsage) {
  OpenAiRequest r = Chat(
      ChatBody(R"("stream":true,"stream_options":{"include_usage":true})"));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  ChatError(ChatBody(R"("stream_options":{"include_usage":true})"),
            "stream_options");
  ChatError(ChatBody(R"("stream":"yes")"), "stream");
  ChatError(ChatBody(R"("stream":true,"stream_options":{"include_usage":1})"),
            "stream_options.include_usage");
  ChatError(ChatBody(R"("stream":true,"stream_options":[])"), "stream_options");
}

TEST(OpenAiTransport, NIsBounded) {
  EXPECT_EQ(Completion(CompletionBody(R"("n":2)")).n, 2);
  EXPECT_EQ(Chat(ChatBody(absl::StrCat("\"n\":", kMaxChoices))).n, kMaxChoices);
  CompletionError(CompletionBody(R"("n":0)"), "n");
  CompletionError(CompletionBody(absl::StrCat("\"n\":", kMaxChoices + 1)), "n");
  ChatError(ChatBody(R"("n":"2")"), "n");
}

TEST(OpenAiTransport, ModelMustBeAString) {
  CompletionError(R"({"prompt":"x","model":5})", "model");
}

// --- Refused features ----------------------------------------------------

TEST(OpenAiRefused, NotSupportedNamesTheField) {
  CompletionError(CompletionBody(R"("echo":true)"), "echo");
  EXPECT_EQ(Completion(CompletionBody(R"("echo":false)")).prompts.size(), 1u);
  CompletionError(CompletionBody(R"("best_of":3)"), "best_of");
  EXPECT_EQ(Completion(CompletionBody(R"("best_of":2,"n":2)")).n, 2);
  CompletionError(CompletionBody(R"("suffix":"tail")"), "suffix");
}

// OpenAI's logit_bias: token ids as keys, biases in [-100, 100], onto
// every prompt's sampling; malformed entries name the field.
TEST(OpenAiLogitBias, ParsedOntoEveryPrompt) {
  const OpenAiRequest r = Completion(
      R"({"prompt":["a","b"],"logit_bias":{"50256":-100,"7":2.5,"0":100}})");
  ASSERT_EQ(r.prompts.size(), 2u);
  for (const v1::GenerateRequest& g : r.prompts) {
    const auto& bias = g.sampling().logit_bias();
    ASSERT_EQ(bias.size(), 3u);
    EXPECT_EQ(bias.at(50256), -100.0f);
    EXPECT_EQ(bias.at(7), 2.5f);
    EXPECT_EQ(bias.at(0), 100.0f);
  }
  const OpenAiRequest chat = Chat(ChatBody(R"("logit_bias":{"3":1})"));
  ASSERT_EQ(chat.prompts.size(), 1u);
  EXPECT_EQ(chat.prompts[0].sampling().logit_bias().at(3), 1.0f);
  const OpenAiRequest none = Completion(CompletionBody(R"("logit_bias":{})"));
  ASSERT_EQ(none.prompts.size(), 1u);
  EXPECT_TRUE(none.prompts[0].sampling().logit_bias().empty());
}

TEST(OpenAiLogitBias, MalformedEntriesNameTheField) {
  for (const char* bad :
       {R"("logit_bias":[1])", R"("logit_bias":{"x":1})",
        R"("logit_bias":{"-3":1})", R"("logit_bias":{"07":1})",
        R"("logit_bias":{"99999999999":1})"}) {
    CompletionError(CompletionBody(bad), "logit_bias");
  }
  CompletionError(CompletionBody(R"("logit_bias":{"5":100.5})"),
                  "logit_bias.5");
  ChatError(ChatBody(R"("logit_bias":{"5":"high"})"), "logit_bias.5");
}

TEST(OpenAiResponseFormat, EachApiSetsTheConstraint) {
  EXPECT_FALSE(Chat(ChatBody(R"("response_format":{"type":"text"})"))
                   .prompts[0]
                   .sampling()
                   .has_constraint());
  const v1::Constraint object =
      Chat(ChatBody(R"("response_format":{"type":"json_object"})"))
          .prompts[0]
          .sampling()
          .constraint();
  EXPECT_TRUE(object.json_object());
  const v1::Constraint schema =
      Chat(ChatBody(R"("response_format":{"type":"json_schema",)"
                    R"("json_schema":{"name":"x","strict":true,)"
                    R"("schema":{"type":"integer"}}})"))
          .prompts[0]
          .sampling()
          .constraint();
  EXPECT_EQ(nlohmann::json::parse(schema.json_schema()),
            nlohmann::json::parse(R"({"type":"integer"})"));
  // vLLM's and llama.cpp's spellings.
  EXPECT_EQ(Completion(CompletionBody(R"("structured_outputs":{"regex":"a+"})"))
                .prompts[0]
                .sampling()
                .constraint()
                .regex(),
            "a+");
  const v1::Constraint choice =
      Completion(CompletionBody(R"("guided_choice":["a","b"])"))
          .prompts[0]
          .sampling()
          .constraint();
  ASSERT_EQ(choice.choice().values_size(), 2);
  EXPECT_EQ(choice.choice().values(1), "b");
  EXPECT_EQ(Completion(CompletionBody(R"("grammar":"root ::= \"x\"")"))
                .prompts[0]
                .sampling()
                .constraint()
                .grammar(),
            "root ::= \"x\"");
  EXPECT_EQ(nlohmann::json::parse(
                Completion(CompletionBody(R"("json_schema":{"const":1})"))
                    .prompts[0]
                    .sampling()
                    .constraint()
                    .json_schema()),
            nlohmann::json::parse(R"({"const":1})"));
}

TEST(OpenAiResponseFormat, MalformedOrConflictingIsAParamError) {
  const std::pair<const char*, const char*> cases[] = {
      {R"("response_format":{"type":"xml"})", "response_format.type"},
      {R"("response_format":{})", "response_format.type"},
      {R"("response_format":"text")", "response_format"},
      {R"("response_format":{"type":"json_schema"})",
       "response_format.json_schema"},
      {R"("response_format":{"type":"json_schema","json_schema":{}})",
       "response_format.json_schema.name"},
      {R"("response_format":{"type":"json_schema","json_schema":)"
       R"({"name":"x","schema":3}})",
       "response_format.json_schema.schema"},
      {R"("structured_outputs":{})", "structured_outputs"},
      {R"("structured_outputs":{"regex":"a","choice":["b"]})",
       "structured_outputs"},
      {R"("guided_choice":[])", "guided_choice"},
      {R"("response_format":{"type":"json_object"},"grammar":"x")", "grammar"},
  };
  for (const auto& [fields, param] : cases) {
    const std::string body = ChatBody(fields);
    ExpectParamError(ParseChatCompletionRequest(body), param, body);
  }
}

// --- Paceline's own fields -----------------------------------------------

TEST(OpenAiPaceline, PacingAndPriority) {
  OpenAiRequest r = Chat(ChatBody(
      R"("pace_tokens_per_s":12.5,"burst_tokens":4,"priority":"batch")"));
  const v1::GenerateRequest& g = r.prompts[0];
  EXPECT_DOUBLE_EQ(g.delivery().pace_tokens_per_s(), 12.5);
  EXPECT_EQ(g.delivery().burst_tokens(), 4);
  EXPECT_EQ(g.priority(), v1::PRIORITY_BATCH);
  EXPECT_EQ(Completion(CompletionBody(R"("priority":"interactive")"))
                .prompts[0]
                .priority(),
            v1::PRIORITY_INTERACTIVE);
  EXPECT_EQ(Completion(CompletionBody(R"("priority":"standard")"))
                .prompts[0]
                .priority(),
            v1::PRIORITY_STANDARD);
  // 0 = as fast as generated.
  EXPECT_TRUE(Completion(CompletionBody(R"("pace_tokens_per_s":0)"))
                  .prompts[0]
                  .delivery()
                  .has_pace_tokens_per_s());
}

TEST(OpenAiPaceline, Speculation) {
  EXPECT_FALSE(Completion(CompletionBody("")).prompts[0].has_speculation());
  const v1::GenerateRequest g =
      Chat(ChatBody(R"("speculation":{"max_draft_tokens":6})")).prompts[0];
  ASSERT_TRUE(g.speculation().has_max_draft_tokens());
  EXPECT_EQ(g.speculation().max_draft_tokens(), 6);
  EXPECT_TRUE(
      Completion(CompletionBody(R"("speculation":{"max_draft_tokens":0})"))
          .prompts[0]
          .speculation()
          .has_max_draft_tokens());
  CompletionError(CompletionBody(R"("speculation":{"max_draft_tokens":17})"),
                  "speculation.max_draft_tokens");
  CompletionError(CompletionBody(R"("speculation":{"max_draft_tokens":-1})"),
                  "speculation.max_draft_tokens");
  CompletionError(CompletionBody(R"("speculation":4)"), "speculation");
}

TEST(OpenAiPaceline, Errors) {
  CompletionError(CompletionBody(R"("pace_tokens_per_s":-1)"),
                  "pace_tokens_per_s");
  CompletionError(CompletionBody(R"("pace_tokens_per_s":"fast")"),
                  "pace_tokens_per_s");
  CompletionError(CompletionBody(R"("burst_tokens":0)"), "burst_tokens");
  CompletionError(CompletionBody(R"("burst_tokens":1.5)"), "burst_tokens");
  CompletionError(CompletionBody(R"("priority":"urgent")"), "priority");
  CompletionError(CompletionBody(R"("priority":1)"), "priority");
}

// --- Chat ----------------------------------------------------------------

TEST(OpenAiChat, MessagesMap) {
  OpenAiRequest r = Chat(R"({"messages":[
    {"role":"system","content":"be brief"},
    {"role":"user","name":"ann","content":[{"type":"text","text":"a"},
                                           {"type":"text","text":"b"}]},
    {"role":"assistant","content":null,"reasoning_content":"think",
     "tool_calls":[{"id":"call_1","type":"function",
                    "function":{"name":"get","arguments":"{\"x\": 1}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"42"}]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  ASSERT_TRUE(r.prompts[0].has_chat());
  const v1::Chat& chat = r.prompts[0].chat();
  ASSERT_EQ(chat.messages_size(), 4);
  EXPECT_EQ(chat.messages(0).role(), "system");
  EXPECT_EQ(chat.messages(0).content(), "be brief");
  const v1::ChatMessage& user = chat.messages(1);
  EXPECT_EQ(user.name(), "ann");
  EXPECT_FALSE(user.has_content());
  ASSERT_EQ(user.content_parts_size(), 2);
  EXPECT_EQ(user.content_parts(1).type(), "text");
  EXPECT_EQ(user.content_parts(1).text(), "b");
  const v1::ChatMessage& assistant = chat.messages(2);
  EXPECT_FALSE(assistant.has_content());
  EXPECT_EQ(assistant.reasoning_content(), "think");
  ASSERT_EQ(assistant.tool_calls_size(), 1);
  EXPECT_EQ(assistant.tool_calls(0).id(), "call_1");
  EXPECT_EQ(assistant.tool_calls(0).type(), "function");
  EXPECT_EQ(assistant.tool_calls(0).function().name(), "get");
  EXPECT_EQ(assistant.tool_calls(0).function().arguments(), "{\"x\": 1}");
  EXPECT_EQ(chat.messages(3).tool_call_id(), "call_1");
  EXPECT_EQ(chat.messages(3).content(), "42");
  EXPECT_FALSE(chat.has_add_generation_prompt());
}

TEST(OpenAiChat, ObjectArgumentsBecomeJsonText) {
  OpenAiRequest r = Chat(R"({"messages":[{"role":"assistant",
    "tool_calls":[{"id":"c","type":"function",
                   "function":{"name":"f","arguments":{"a":[1,"b"]}}}]}]})");
  const std::string& args =
      r.prompts[0].chat().messages(0).tool_calls(0).function().arguments();
  EXPECT_EQ(Json::parse(args), Json::parse(R"({"a":[1,"b"]})"));
}

TEST(OpenAiChat, MessageErrorsNameTheField) {
  ChatError(R"({})", "messages");
  ChatError(R"({"messages":[]})", "messages");
  ChatError(R"({"messages":{}})", "messages");
  ChatError(R"({"messages":[{"role":"user","content":"a"},"hi"]})",
            "messages[1]");
  ChatError(R"({"messages":[{"content":"a"}]})", "messages[0].role");
  ChatError(R"({"messages":[{"role":3,"content":"a"}]})", "messages[0].role");
  ChatError(R"({"messages":[{"role":"bad","content":"a"}]})",
            "messages[0].role");
  ChatError(
      R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":5}]})",
      "messages[1].content");
  ChatError(R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
            "messages[0].content[0].text");
  ChatError(
      R"({"messages":[{"role":"user","content":[{"type":"text","text":1}]}]})",
      "messages[0].content[0].text");
  ChatError(R"({"messages":[{"role":"user","content":[{"type":"image_url",
              "image_url":{"url":"http://x"}}]}]})",
            "messages[0].content[0].type");
  ChatError(R"({"messages":[{"role":"user","content":["a"]}]})",
            "messages[0].content[0]");
  ChatError(R"({"messages":[{"role":"user","content":"a","name":1}]})",
            "messages[0].name");
  ChatError(R"({"messages":[{"role":"tool","content":"a","tool_call_id":1}]})",
            "messages[0].tool_call_id");
  ChatError(R"({"messages":[{"role":"assistant","reasoning_content":[]}]})",
            "messages[0].reasoning_content");
  ChatError(R"({"messages":[{"role":"assistant","tool_calls":{}}]})",
            "messages[0].tool_calls");
  ChatError(R"({"messages":[{"role":"assistant","tool_calls":[
              {"id":"c","type":"function","function":{"arguments":"{}"}}]}]})",
            "messages[0].tool_calls[0].function.name");
  ChatError(R"({"messages":[{"role":"assistant","tool_calls":[
              {"id":"c","type":"function",
               "function":{"name":"f","arguments":5}}]}]})",
            "messages[0].tool_calls[0].function.arguments");
  ChatError(R"({"messages":[{"role":"assistant","tool_calls":[
              {"id":"c","type":"custom","custom":{"name":"f"}}]}]})",
            "messages[0].tool_calls[0].type");
}

constexpr char kTools[] =
    R"("tools":[{"type":"function","function":{"name":"get_weather",
      "description":"Weather now","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}},"required":["city"]}}},
      {"type":"function","function":{"name":"now"}}])";

TEST(OpenAiChat, ToolsMap) {
  OpenAiRequest r = Chat(ChatBody(kTools));
  const v1::Chat& chat = r.prompts[0].chat();
  ASSERT_EQ(chat.tools_size(), 2);
  EXPECT_EQ(chat.tools(0).type(), "function");
  EXPECT_EQ(chat.tools(0).function().name(), "get_weather");
  EXPECT_EQ(chat.tools(0).function().description(), "Weather now");
  EXPECT_EQ(Json::parse(chat.tools(0).function().parameters()),
            Json::parse(R"({"type":"object","properties":{"city":
              {"type":"string"}},"required":["city"]})"));
  // Omitted parameters: an empty parameter list, left empty.
  EXPECT_EQ(chat.tools(1).function().parameters(), "");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
}

TEST(OpenAiChat, ToolErrors) {
  ChatError(ChatBody(R"("tools":{})"), "tools");
  ChatError(ChatBody(R"("tools":[{"type":"function"}])"), "tools[0].function");
  ChatError(ChatBody(R"("tools":[{"type":"function","function":{}}])"),
            "tools[0].function.name");
  ChatError(ChatBody(R"("tools":[{"function":{"name":"f"}}])"),
            "tools[0].type");
  ChatError(ChatBody(R"("tools":[{"type":"custom","custom":{"name":"f"}}])"),
            "tools[0].type");
  ChatError(
      ChatBody(
          R"("tools":[{"type":"function","function":{"name":"f","parameters":"{}"}}])"),
      "tools[0].function.parameters");
}

TEST(OpenAiChat, ToolChoiceNoneHidesTheTools) {
  OpenAiRequest r =
      Chat(ChatBody(absl::StrCat(kTools, R"(,"tool_choice":"none")")));
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  EXPECT_EQ(r.prompts[0].chat().tools_size(), 0);
}

TEST(OpenAiChat, ToolChoiceModes) {
  EXPECT_EQ(Chat(ChatBody(absl::StrCat(kTools, R"(,"tool_choice":"auto")")))
                .tool_choice,
            ToolChoice::kAuto);
  OpenAiRequest required =
      Chat(ChatBody(absl::StrCat(kTools, R"(,"tool_choice":"required")")));
  EXPECT_EQ(required.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(required.prompts[0].chat().tools_size(), 2);
  OpenAiRequest named = Chat(ChatBody(absl::StrCat(
      kTools,
      R"(,"tool_choice":{"type":"function","function":{"name":"now"}})")));
  EXPECT_EQ(named.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(named.tool_choice_name, "now");
  EXPECT_EQ(named.prompts[0].chat().tools_size(), 2);
}

TEST(OpenAiChat, ToolChoiceErrors) {
  ChatError(ChatBody(absl::StrCat(kTools, R"(,"tool_choice":"always")")),
            "tool_choice");
  ChatError(ChatBody(absl::StrCat(kTools, R"(,"tool_choice":1)")),
            "tool_choice");
  ChatError(ChatBody(R"("tool_choice":"required")"), "tool_choice");
  ChatError(
      ChatBody(absl::StrCat(
          kTools,
          R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})")),
      "tool_choice.function.name");
  ChatError(
      ChatBody(absl::StrCat(kTools, R"(,"tool_choice":{"type":"function"})")),
      "tool_choice.function");
  ChatError(
      ChatBody(absl::StrCat(
          kTools,
          R"(,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}})")),
      "tool_choice.type");
}

// tool_choice required / named and strict tools under auto constrain the
// calls (sampling.constraint.tool_calls; the format is the template's).
TEST(OpenAiChat, ToolChoiceConstrainsTheCalls) {
  OpenAiRequest required =
      Chat(ChatBody(absl::StrCat(kTools, R"(,"tool_choice":"required")")));
  const v1::SamplingOptions& s = required.prompts[0].sampling();
  ASSERT_TRUE(s.constraint().has_tool_calls());
  const v1::ToolCalls& calls = s.constraint().tool_calls();
  EXPECT_EQ(calls.mode(), v1::ToolCalls::MODE_REQUIRED);
  EXPECT_EQ(calls.format(), "");
  EXPECT_TRUE(calls.parallel());  // OpenAI's default
  ASSERT_EQ(calls.tools_size(), 2);
  EXPECT_EQ(calls.tools(0).name(), "get_weather");
  EXPECT_EQ(calls.tools(0).parameters(),
            required.prompts[0].chat().tools(0).function().parameters());
  EXPECT_FALSE(calls.tools(0).strict());
  EXPECT_EQ(calls.tools(1).name(), "now");
  EXPECT_EQ(calls.tools(1).parameters(), "");

  OpenAiRequest named = Chat(ChatBody(absl::StrCat(
      kTools, R"(,"tool_choice":{"type":"function","function":{"name":"now"}})",
      R"(,"parallel_tool_calls":true)")));
  const v1::ToolCalls& one =
      named.prompts[0].sampling().constraint().tool_calls();
  EXPECT_EQ(one.mode(), v1::ToolCalls::MODE_NAMED);
  ASSERT_EQ(one.tools_size(), 1);
  EXPECT_EQ(one.tools(0).name(), "now");
  EXPECT_FALSE(one.parallel());

  OpenAiRequest serial = Chat(ChatBody(absl::StrCat(
      kTools, R"(,"tool_choice":"required","parallel_tool_calls":false)")));
  EXPECT_FALSE(
      serial.prompts[0].sampling().constraint().tool_calls().parallel());
  // Auto (and none) without strict tools: free text, as before.
  for (const char* choice :
       {"", R"(,"tool_choice":"auto")", R"(,"tool_choice":"none")"}) {
    OpenAiRequest r = Chat(ChatBody(absl::StrCat(kTools, choice)));
    EXPECT_FALSE(r.prompts[0].sampling().has_constraint()) << choice;
  }
  ChatError(ChatBody(absl::StrCat(kTools, R"(,"parallel_tool_calls":1)")),
            "parallel_tool_calls");
}

constexpr char kStrictTools[] =
    R"("tools":[{"type":"function","function":{"name":"get_weather",
      "strict":true,"parameters":{"type":"object","properties":
      {"city":{"type":"string"}},"required":["city"],
      "additionalProperties":false}}},
      {"type":"function","function":{"name":"now","strict":false}}])";

TEST(OpenAiChat, StrictToolsUnderAutoAreHeldLazily) {
  for (const char* choice : {"", R"(,"tool_choice":"auto")"}) {
    OpenAiRequest r = Chat(ChatBody(absl::StrCat(kStrictTools, choice)));
    const v1::Constraint& c = r.prompts[0].sampling().constraint();
    ASSERT_TRUE(c.has_tool_calls()) << choice;
    EXPECT_EQ(c.tool_calls().mode(), v1::ToolCalls::MODE_AUTO);
    ASSERT_EQ(c.tool_calls().tools_size(), 2);
    EXPECT_TRUE(c.tool_calls().tools(0).strict());
    EXPECT_FALSE(c.tool_calls().tools(1).strict());
  }
  // "none" drops the tools, strict or not.
  EXPECT_FALSE(
      Chat(ChatBody(absl::StrCat(kStrictTools, R"(,"tool_choice":"none")")))
          .prompts[0]
          .sampling()
          .has_constraint());
  ChatError(ChatBody(R"("tools":[{"type":"function","function":{"name":"f",)"
                     R"("strict":"yes"}}])"),
            "tools[0].function.strict");
}

TEST(OpenAiChat, ToolConstraintsAndResponseFormat) {
  const std::string format = R"(,"response_format":{"type":"json_object"})";
  // A forced call has no content for the format to shape: the call's
  // constraint replaces it.
  OpenAiRequest r = Chat(
      ChatBody(absl::StrCat(kTools, R"(,"tool_choice":"required")", format)));
  EXPECT_TRUE(r.prompts[0].sampling().constraint().has_tool_calls());
  // Strict tools under auto and a format would need both at once.
  ChatError(ChatBody(absl::StrCat(kStrictTools, format)), "response_format");
  // Non-strict tools leave the format alone.
  EXPECT_TRUE(Chat(ChatBody(absl::StrCat(kTools, format)))
                  .prompts[0]
                  .sampling()
                  .constraint()
                  .json_object());
}

TEST(OpenAiChat, TemplateKwargsAreJsonText) {
  OpenAiRequest r =
      Chat(ChatBody(R"("chat_template_kwargs":{"enable_thinking":false,"n":3,)"
                    R"("s":"x","o":{"a":[1]}},"add_generation_prompt":false)"));
  const auto& kwargs = r.prompts[0].chat().template_kwargs();
  ASSERT_EQ(kwargs.size(), 4u);
  EXPECT_EQ(kwargs.at("enable_thinking"), "false");
  EXPECT_EQ(kwargs.at("n"), "3");
  EXPECT_EQ(kwargs.at("s"), "\"x\"");
  EXPECT_EQ(Json::parse(kwargs.at("o")), Json::parse(R"({"a":[1]})"));
  EXPECT_TRUE(r.prompts[0].chat().has_add_generation_prompt());
  EXPECT_FALSE(r.prompts[0].chat().add_generation_prompt());
  ChatError(ChatBody(R"("chat_template_kwargs":[])"), "chat_template_kwargs");
  ChatError(ChatBody(R"("add_generation_prompt":"no")"),
            "add_generation_prompt");
}

// --- Bodies --------------------------------------------------------------

void ExpectBodyError(const std::string& body) {
  for (const absl::StatusOr<OpenAiRequest>& r :
       {ParseCompletionRequest(body), ParseChatCompletionRequest(body)}) {
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(r.status().message().empty());
    EXPECT_EQ(ParamOf(r.status()), std::nullopt);
  }
}

TEST(OpenAiBody, MalformedJson) {
  ExpectBodyError("");
  ExpectBodyError("{");
  ExpectBodyError(R"({"prompt":"x",})");
  ExpectBodyError(R"({"prompt":"x"} trailing)");
  ExpectBodyError("{\"prompt\":\"\xff\xfe\"}");              // invalid UTF-8
  ExpectBodyError(R"({"prompt":"x","temperature":1e400})");  // overflows
}

TEST(OpenAiBody, NotAnObject) {
  ExpectBodyError("[]");
  ExpectBodyError("\"prompt\"");
  ExpectBodyError("42");
  ExpectBodyError("null");
}

TEST(OpenAiBody, DeepNestingIsRefusedBeforeParsing) {
  // A million levels would overflow a recursive parser's stack.
  const int depth = 1000000;
  std::string body = R"({"prompt":"x","extra":)";
  body += std::string(depth, '[');
  body += std::string(depth, ']');
  body += "}";
  ExpectBodyError(body);
  // Brackets inside strings do not count.
  EXPECT_EQ(
      Completion(absl::StrCat(R"({"prompt":")", std::string(1000, '['), "\"}"))
          .prompts.size(),
      1u);
}

TEST(OpenAiBody, NestingWithinTheBoundIsFine) {
  // The body is level 1; the unknown field's arrays fill the rest.
  std::string body = R"({"prompt":"x","extra":)";
  body += std::string(kMaxBodyDepth - 1, '[');
  body += std::string(kMaxBodyDepth - 1, ']');
  body += "}";
  EXPECT_EQ(Completion(body).prompts.size(), 1u);
}

// --- Errors --------------------------------------------------------------

Json ErrorJson(const ErrorResponse& response) {
  Json body = Json::parse(response.body, nullptr, false);
  EXPECT_FALSE(body.is_discarded()) << response.body;
  EXPECT_TRUE(body.contains("error")) << response.body;
  const Json& error = body["error"];
  for (const char* key : {"message", "type", "param", "code"}) {
    EXPECT_TRUE(error.contains(key)) << key << " in " << response.body;
  }
  return error;
}

TEST(OpenAiError, ParseErrorIs400WithParam) {
  absl::StatusOr<OpenAiRequest> r =
      ParseChatCompletionRequest(ChatBody(R"("temperature":"1")"));
  ErrorResponse response = ToErrorResponse(r.status());
  EXPECT_EQ(response.http_status, 400);
  Json error = ErrorJson(response);
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_EQ(error["param"], "temperature");
  EXPECT_TRUE(error["code"].is_null());
  EXPECT_EQ(error["message"], std::string(r.status().message()));
}

TEST(OpenAiError, StatusTable) {
  struct Case {
    absl::Status status;
    int http;
    const char* type;
    Json code;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("bad"), 400, "invalid_request_error",
       nullptr},
      {absl::FailedPreconditionError("the model has no chat template"), 400,
       "invalid_request_error", nullptr},
      {absl::UnauthenticatedError("no key"), 401, "authentication_error",
       "invalid_api_key"},
      {absl::PermissionDeniedError("no"), 403, "permission_error", nullptr},
      {absl::NotFoundError("no such model"), 404, "invalid_request_error",
       nullptr},
      {absl::ResourceExhaustedError("queue full"), 429, "requests",
       "rate_limit_exceeded"},
      {absl::UnavailableError("draining"), 503, "server_error", nullptr},
      {absl::DeadlineExceededError("slow"), 504, "server_error", nullptr},
      {absl::InternalError("bug"), 500, "server_error", nullptr},
      {absl::UnknownError("?"), 500, "server_error", nullptr},
  };
  for (const Case& c : cases) {
    ErrorResponse response = ToErrorResponse(c.status);
    EXPECT_EQ(response.http_status, c.http) << c.status;
    Json error = ErrorJson(response);
    EXPECT_EQ(error["type"], c.type) << c.status;
    EXPECT_EQ(error["code"], c.code) << c.status;
    EXPECT_TRUE(error["param"].is_null()) << c.status;
    EXPECT_EQ(error["message"], std::string(c.status.message()));
  }
}

TEST(OpenAiError, CodeOverride) {
  absl::Status status = WithErrorCode(
      absl::NotFoundError("The model `x` does not exist"), "model_not_found");
  EXPECT_EQ(ErrorCodeOf(status), "model_not_found");
  ErrorResponse response = ToErrorResponse(status);
  EXPECT_EQ(response.http_status, 404);
  EXPECT_EQ(ErrorJson(response)["code"], "model_not_found");
  EXPECT_TRUE(WithErrorCode(absl::OkStatus(), "x").ok());
}

TEST(OpenAiError, OkIsACallerBug) {
  EXPECT_EQ(ToErrorResponse(absl::OkStatus()).http_status, 500);
}

TEST(OpenAiError, InvalidUtf8InAMessageIsReplaced) {
  ErrorResponse response =
      ToErrorResponse(InvalidParam("stop[0]", "bad \xff byte"));
  Json error = ErrorJson(response);
  EXPECT_EQ(error["param"], "stop[0]");
  EXPECT_NE(error["message"].get<std::string>().find("\xEF\xBF\xBD"),
            std::string::npos);
}

TEST(OpenAiError, ErrorBodyForTransportStatuses) {
  Json body =
      Json::parse(ErrorBody("body too large", "invalid_request_error",
                            std::nullopt, std::string("request_too_large")));
  EXPECT_EQ(body["error"]["message"], "body too large");
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_EQ(body["error"]["code"], "request_too_large");
}

}  // namespace
}  // namespace paceline::server::openai
