// Anthropic Messages bodies -> the shared chat request (server/anthropic/
// messages_request.h). Expected values come from Anthropic's API reference
// as its TypeScript client types it (the facts at the top of
// messages_request.h), not from runs.
#include "server/anthropic/messages_request.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace paceline::server::anthropic {
namespace {

using openai::OpenAiRequest;
using openai::ToolChoice;
using Json = nlohmann::ordered_json;

constexpr char kUser[] = R"("messages":[{"role":"user","content":"hi"}])";

std::string Body(const std::string& extra, const char* messages = kUser) {
  return absl::StrCat(R"({"model":"m","max_tokens":16,)", messages,
                      extra.empty() ? "" : ",", extra, "}");
}

OpenAiRequest Parse(const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseMessagesRequest(body);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

const v1::Chat& ChatOf(const OpenAiRequest& r) {
  static const v1::Chat kEmpty;
  return r.prompts.empty() ? kEmpty : r.prompts.front().chat();
}

// Refused with InvalidArgument whose message names `field`.
void ExpectError(const std::string& body, const std::string& field) {
  absl::StatusOr<OpenAiRequest> r = ParseMessagesRequest(body);
  ASSERT_FALSE(r.ok()) << body;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  EXPECT_NE(r.status().message().find(absl::StrCat("'", field, "'")),
            absl::string_view::npos)
      << body << ": " << r.status();
}

TEST(MessagesRequest, Minimal) {
  const OpenAiRequest r = Parse(Body(""));
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.model, "m");
  const v1::GenerateRequest& g = r.prompts.front();
  EXPECT_EQ(g.model(), "m");
  EXPECT_EQ(g.stopping().max_tokens(), 16);
  ASSERT_EQ(g.chat().messages_size(), 1);
  EXPECT_EQ(g.chat().messages(0).role(), "user");
  EXPECT_EQ(g.chat().messages(0).content(), "hi");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_FALSE(g.sampling().has_constraint());
}

TEST(MessagesRequest, MaxTokensIsRequired) {
  ExpectError(absl::StrCat("{", kUser, "}"), "max_tokens");
  ExpectError(absl::StrCat(R"({"max_tokens":0,)", kUser, "}"), "max_tokens");
  ExpectError(absl::StrCat(R"({"max_tokens":"8",)", kUser, "}"), "max_tokens");
}

TEST(MessagesRequest, CountTokensNeedsNoMaxTokens) {
  absl::StatusOr<OpenAiRequest> r =
      ParseCountTokensRequest(absl::StrCat("{", kUser, "}"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompts.front().chat().messages(0).content(), "hi");
}

TEST(MessagesRequest, MessagesAreRequired) {
  ExpectError(R"({"max_tokens":8})", "messages");
  ExpectError(Body("", R"("messages":[])"), "messages");
  ExpectError(Body("", R"("messages":{})"), "messages");
  ExpectError(Body("", R"("messages":[{"role":"system","content":"x"}])"),
              "messages[0].role");
  ExpectError(Body("", R"("messages":[{"role":"user"}])"),
              "messages[0].content");
  ExpectError(Body("", R"("messages":[{"role":"user","content":3}])"),
              "messages[0].content");
}

TEST(MessagesRequest, SystemStringOrTextBlocks) {
  OpenAiRequest r = Parse(Body(R"("system":"be brief")"));
  ASSERT_EQ(ChatOf(r).messages_size(), 2);
  EXPECT_EQ(ChatOf(r).messages(0).role(), "system");
  EXPECT_EQ(ChatOf(r).messages(0).content(), "be brief");
  r = Parse(
      Body(R"("system":[{"type":"text","text":"a"},{"type":"text","text":"b",)"
           R"("cache_control":{"type":"ephemeral"}}])"));
  EXPECT_EQ(ChatOf(r).messages(0).content(), "a\nb");
  ExpectError(Body(R"("system":[{"type":"image","source":{}}])"),
              "system[0].type");
  ExpectError(Body(R"("system":[{"type":"text"}])"), "system[0].text");
}

TEST(MessagesRequest, TextBlocksAndCombinedTurns) {
  const OpenAiRequest r = Parse(Body("", R"("messages":[
        {"role":"user","content":[{"type":"text","text":"one"},
                                  {"type":"text","text":"two"}]},
        {"role":"user","content":"three"},
        {"role":"assistant","content":"ok"},
        {"role":"assistant","content":[{"type":"text","text":"more"}]},
        {"role":"user","content":"four"}])"));
  const v1::Chat& chat = ChatOf(r);
  ASSERT_EQ(chat.messages_size(), 3);
  EXPECT_EQ(chat.messages(0).role(), "user");
  EXPECT_EQ(chat.messages(0).content(), "one\ntwo\nthree");
  EXPECT_EQ(chat.messages(1).role(), "assistant");
  EXPECT_EQ(chat.messages(1).content(), "ok\nmore");
  EXPECT_EQ(chat.messages(2).content(), "four");
}

TEST(MessagesRequest, UnsupportedBlocksAreRefused) {
  ExpectError(Body("", R"("messages":[{"role":"user","content":[
      {"type":"image","source":{"type":"base64","media_type":"image/png",
       "data":"AA=="}}]}])"),
              "messages[0].content[0].type");
  ExpectError(Body("", R"("messages":[{"role":"assistant","content":[
      {"type":"tool_result","tool_use_id":"x"}]}])"),
              "messages[0].content[0].type");
  ExpectError(Body("", R"("messages":[{"role":"user","content":[
      {"type":"tool_use","id":"x","name":"f","input":{}}]}])"),
              "messages[0].content[0].type");
  ExpectError(
      Body("", R"("messages":[{"role":"user","content":[{"text":"x"}]}])"),
      "messages[0].content[0].type");
}

// The assistant's thinking, text and tool_use blocks, then the user's
// tool_result blocks: one assistant message with reasoning and calls, one
// tool message per result (ids without "toolu_"), then the user's text.
TEST(MessagesRequest, ToolUseAndToolResult) {
  const OpenAiRequest r = Parse(Body(
      R"("tools":[{"name":"get_weather","input_schema":{"type":"object"}}])",
      R"("messages":[
        {"role":"user","content":"weather?"},
        {"role":"assistant","content":[
          {"type":"thinking","thinking":"need a tool","signature":"sig"},
          {"type":"redacted_thinking","data":"opaque"},
          {"type":"text","text":"Checking."},
          {"type":"tool_use","id":"toolu_abc123XYZ","name":"get_weather",
           "input":{"city":"Paris","n":1}},
          {"type":"tool_use","id":"other","name":"get_weather","input":{}}]},
        {"role":"user","content":[
          {"type":"tool_result","tool_use_id":"toolu_abc123XYZ",
           "content":"15C"},
          {"type":"tool_result","tool_use_id":"other","is_error":true,
           "content":[{"type":"text","text":"no"},{"type":"text","text":"city"}]},
          {"type":"tool_result","tool_use_id":"other"},
          {"type":"text","text":"thanks"}]}])"));
  const v1::Chat& chat = ChatOf(r);
  ASSERT_EQ(chat.messages_size(), 6);
  const v1::ChatMessage& a = chat.messages(1);
  EXPECT_EQ(a.role(), "assistant");
  EXPECT_EQ(a.reasoning_content(), "need a tool");
  EXPECT_EQ(a.content(), "Checking.");
  ASSERT_EQ(a.tool_calls_size(), 2);
  EXPECT_EQ(a.tool_calls(0).id(), "abc123XYZ");
  EXPECT_EQ(a.tool_calls(0).type(), "function");
  EXPECT_EQ(a.tool_calls(0).function().name(), "get_weather");
  EXPECT_EQ(Json::parse(a.tool_calls(0).function().arguments()),
            Json::parse(R"({"city":"Paris","n":1})"));
  EXPECT_EQ(a.tool_calls(1).id(), "other");
  EXPECT_EQ(a.tool_calls(1).function().arguments(), "{}");

  EXPECT_EQ(chat.messages(2).role(), "tool");
  EXPECT_EQ(chat.messages(2).tool_call_id(), "abc123XYZ");
  EXPECT_EQ(chat.messages(2).content(), "15C");
  EXPECT_EQ(chat.messages(3).role(), "tool");
  EXPECT_EQ(chat.messages(3).tool_call_id(), "other");
  EXPECT_EQ(chat.messages(3).content(), "Error: no\ncity");
  EXPECT_EQ(chat.messages(4).role(), "tool");
  EXPECT_EQ(chat.messages(4).content(), "");
  EXPECT_EQ(chat.messages(5).role(), "user");
  EXPECT_EQ(chat.messages(5).content(), "thanks");
}

TEST(MessagesRequest, ToolBlockErrors) {
  const std::string assistant =
      R"("messages":[{"role":"user","content":"x"},{"role":"assistant",)";
  ExpectError(Body("", (assistant + R"("content":[{"type":"tool_use",
      "id":"t","name":"f"}]}])")
                           .c_str()),
              "messages[1].content[0].input");
  ExpectError(Body("", (assistant + R"("content":[{"type":"tool_use",
      "id":"t","name":"f","input":"{}"}]}])")
                           .c_str()),
              "messages[1].content[0].input");
  ExpectError(Body("", (assistant + R"("content":[{"type":"tool_use",
      "name":"f","input":{}}]}])")
                           .c_str()),
              "messages[1].content[0].id");
  ExpectError(Body("", R"("messages":[{"role":"user","content":[
      {"type":"tool_result","content":"x"}]}])"),
              "messages[0].content[0].tool_use_id");
  ExpectError(Body("", R"("messages":[{"role":"user","content":[
      {"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}])"),
              "messages[0].content[0].is_error");
}

constexpr char kTools[] =
    R"("tools":[{"name":"get_weather","description":"Weather of a city",)"
    R"("input_schema":{"type":"object","properties":{"city":{"type":"string"}},)"
    R"("required":["city"]}},{"type":"custom","name":"noop",)"
    R"("input_schema":{"type":"object"}}])";

TEST(MessagesRequest, Tools) {
  const OpenAiRequest r = Parse(Body(kTools));
  const v1::Chat& chat = ChatOf(r);
  ASSERT_EQ(chat.tools_size(), 2);
  EXPECT_EQ(chat.tools(0).type(), "function");
  EXPECT_EQ(chat.tools(0).function().name(), "get_weather");
  EXPECT_EQ(chat.tools(0).function().description(), "Weather of a city");
  EXPECT_EQ(Json::parse(chat.tools(0).function().parameters())["required"],
            Json::parse(R"(["city"])"));
  EXPECT_EQ(chat.tools(1).function().name(), "noop");
  // auto without strict tools: no constraint.
  EXPECT_FALSE(r.prompts.front().sampling().has_constraint());

  ExpectError(Body(R"("tools":[{"name":"f"}])"), "tools[0].input_schema");
  ExpectError(Body(R"("tools":[{"input_schema":{}}])"), "tools[0].name");
  ExpectError(Body(R"("tools":[{"name":"","input_schema":{}}])"),
              "tools[0].name");
  ExpectError(Body(R"("tools":[{"type":"bash_20250124","name":"bash"}])"),
              "tools[0].type");
  ExpectError(Body(R"("tools":{})"), "tools");
}

TEST(MessagesRequest, ToolChoice) {
  OpenAiRequest r =
      Parse(Body(absl::StrCat(kTools, R"(,"tool_choice":{"type":"auto"})")));
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(ChatOf(r).tools_size(), 2);

  r = Parse(Body(absl::StrCat(kTools, R"(,"tool_choice":{"type":"any"})")));
  EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
  const v1::ToolCalls& any =
      r.prompts.front().sampling().constraint().tool_calls();
  EXPECT_EQ(any.mode(), v1::ToolCalls::MODE_REQUIRED);
  EXPECT_EQ(any.tools_size(), 2);
  EXPECT_TRUE(any.parallel());

  r = Parse(Body(absl::StrCat(kTools,
                              R"(,"tool_choice":{"type":"tool","name":"noop",)"
                              R"("disable_parallel_tool_use":true})")));
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "noop");
  const v1::ToolCalls& named =
      r.prompts.front().sampling().constraint().tool_calls();
  EXPECT_EQ(named.mode(), v1::ToolCalls::MODE_NAMED);
  ASSERT_EQ(named.tools_size(), 1);
  EXPECT_EQ(named.tools(0).name(), "noop");
  EXPECT_FALSE(named.parallel());

  r = Parse(Body(absl::StrCat(kTools, R"(,"tool_choice":{"type":"none"})")));
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  EXPECT_EQ(ChatOf(r).tools_size(), 0);

  ExpectError(Body(absl::StrCat(
                  kTools, R"(,"tool_choice":{"type":"tool","name":"x"})")),
              "tool_choice.name");
  ExpectError(Body(absl::StrCat(kTools, R"(,"tool_choice":{"type":"tool"})")),
              "tool_choice.name");
  ExpectError(Body(absl::StrCat(kTools, R"(,"tool_choice":{"type":"some"})")),
              "tool_choice.type");
  ExpectError(Body(absl::StrCat(kTools, R"(,"tool_choice":"any")")),
              "tool_choice");
  ExpectError(Body(R"("tool_choice":{"type":"any"})"), "tool_choice");
}

TEST(MessagesRequest, StrictToolIsEnforcedUnderAuto) {
  const OpenAiRequest r = Parse(Body(
      R"("tools":[{"name":"f","strict":true,"input_schema":{"type":"object"}}])"));
  const v1::ToolCalls& calls =
      r.prompts.front().sampling().constraint().tool_calls();
  EXPECT_EQ(calls.mode(), v1::ToolCalls::MODE_AUTO);
  ASSERT_EQ(calls.tools_size(), 1);
  EXPECT_TRUE(calls.tools(0).strict());
}

TEST(MessagesRequest, ThinkingSetsEnableThinking) {
  OpenAiRequest r =
      Parse(Body(R"("thinking":{"type":"enabled","budget_tokens":1024})"));
  EXPECT_EQ(ChatOf(r).template_kwargs().at("enable_thinking"), "true");
  r = Parse(Body(R"("thinking":{"type":"adaptive"})"));
  EXPECT_EQ(ChatOf(r).template_kwargs().at("enable_thinking"), "true");
  r = Parse(Body(R"("thinking":{"type":"disabled"})"));
  EXPECT_EQ(ChatOf(r).template_kwargs().at("enable_thinking"), "false");
  r = Parse(Body(""));
  EXPECT_EQ(ChatOf(r).template_kwargs().count("enable_thinking"), 0u);
  ExpectError(Body(R"("thinking":{"type":"on"})"), "thinking.type");
  ExpectError(Body(R"("thinking":{"type":"enabled","budget_tokens":-1})"),
              "thinking.budget_tokens");
}

// Structured outputs: output_config.format (and the beta's output_format)
// hold the answer to the schema as chat's response_format does.
TEST(MessagesRequest, OutputConfigFormatIsAJsonSchemaConstraint) {
  const char kSchema[] =
      R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  for (const char* field : {R"("output_config":{"format":)", R"("output_format":)"}) {
    SCOPED_TRACE(field);
    const OpenAiRequest r = Parse(Body(absl::StrCat(
        field, R"({"type":"json_schema","schema":)", kSchema, "}",
        absl::StartsWith(field, "\"output_config") ? "}" : "")));
    const v1::Constraint& c = r.prompts.front().sampling().constraint();
    ASSERT_TRUE(c.has_json_schema());
    EXPECT_EQ(nlohmann::json::parse(c.json_schema()),
              nlohmann::json::parse(kSchema));
  }
  EXPECT_FALSE(Parse(Body(R"("output_config":{"format":null})"))
                   .prompts.front()
                   .sampling()
                   .has_constraint());
  ExpectError(Body(R"("output_config":{"format":{"type":"json_object"}})"),
              "output_config.format.type");
  ExpectError(Body(R"("output_config":{"format":{"type":"json_schema"}})"),
              "output_config.format.schema");
  ExpectError(Body(R"("output_config":{"format":{"type":"json_schema",)"
                   R"("schema":{}},"effort":"high"},)"
                   R"("output_format":{"type":"json_schema","schema":{}})"),
              "output_config.format");
  ExpectError(Body(R"("output_config":7)"), "output_config");
}

TEST(MessagesRequest, OutputConfigEffortIsTheTemplatesReasoningEffort) {
  const OpenAiRequest r = Parse(Body(R"("output_config":{"effort":"low"})"));
  EXPECT_EQ(ChatOf(r).template_kwargs().at("reasoning_effort"), "\"low\"");
  EXPECT_EQ(ChatOf(Parse(Body(""))).template_kwargs().count("reasoning_effort"),
            0u);
  ExpectError(Body(R"("output_config":{"effort":3})"), "output_config.effort");
}

TEST(MessagesRequest, SamplingStoppingStream) {
  const OpenAiRequest r = Parse(
      Body(R"("temperature":0.5,"top_p":0.9,"top_k":40,"stream":true,)"
           R"("stop_sequences":["END","\n\n"],"metadata":{"user_id":"u1"},)"
           R"("seed":7,"priority":"batch")"));
  EXPECT_TRUE(r.stream);
  const v1::GenerateRequest& g = r.prompts.front();
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 40);
  EXPECT_EQ(g.sampling().seed(), 7u);
  EXPECT_EQ(g.priority(), v1::PRIORITY_BATCH);
  ASSERT_EQ(g.stopping().stop_size(), 2);
  EXPECT_EQ(g.stopping().stop(0), "END");
  EXPECT_EQ(g.stopping().stop(1), "\n\n");

  ExpectError(Body(R"("temperature":-1)"), "temperature");
  ExpectError(Body(R"("top_p":0)"), "top_p");
  ExpectError(Body(R"("stop_sequences":"END")"), "stop_sequences");
  ExpectError(Body(R"("stop_sequences":[""])"), "stop_sequences[0]");
  ExpectError(Body(R"("stream":"yes")"), "stream");
  ExpectError(Body(R"("metadata":"x")"), "metadata");
}

TEST(MessagesRequest, NullIsAbsentAndUnknownFieldsAreIgnored) {
  const OpenAiRequest r = Parse(
      Body(R"("system":null,"tools":null,"tool_choice":null,"thinking":null,)"
           R"("service_tier":"auto","stop_sequences":null)"));
  EXPECT_EQ(ChatOf(r).messages_size(), 1);
}

TEST(MessagesRequest, MalformedBody) {
  absl::StatusOr<OpenAiRequest> r = ParseMessagesRequest("{");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = ParseMessagesRequest("[]");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paceline::server::anthropic
