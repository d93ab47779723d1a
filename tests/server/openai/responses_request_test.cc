// POST /v1/responses bodies -> OpenAiRequest (server/openai). Expected
// values come from OpenAI's API reference (the facts listed in
// server/openai/responses_request.h), not from runs.
#include "server/openai/responses_request.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

OpenAiRequest Parse(const std::string& body, ResponsesEcho* echo = nullptr) {
  absl::StatusOr<OpenAiRequest> r = ParseResponsesRequest(body, echo);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

// Refused with InvalidArgument naming `param`; returns the message.
std::string Error(const std::string& body, const std::string& param) {
  absl::StatusOr<OpenAiRequest> r = ParseResponsesRequest(body);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  EXPECT_EQ(ParamOf(r.status()), param) << body << ": " << r.status();
  return std::string(r.status().message());
}

const v1::Chat& ChatOf(const OpenAiRequest& r) {
  static const v1::Chat kEmpty;
  return r.prompts.size() == 1 ? r.prompts[0].chat() : kEmpty;
}

TEST(ResponsesRequest, StringInputIsOneUserMessage) {
  const OpenAiRequest r = Parse(
      R"({"model":"m","input":"hi","instructions":"be brief",)"
      R"("max_output_tokens":7,"temperature":0.5,"top_p":0.9,"stream":true})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.n, 1);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.model, "m");
  const v1::GenerateRequest& g = r.prompts[0];
  EXPECT_EQ(g.model(), "m");
  EXPECT_EQ(g.stopping().max_tokens(), 7);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  ASSERT_EQ(g.chat().messages_size(), 2);
  EXPECT_EQ(g.chat().messages(0).role(), "system");
  EXPECT_EQ(g.chat().messages(0).content(), "be brief");
  EXPECT_EQ(g.chat().messages(1).role(), "user");
  EXPECT_EQ(g.chat().messages(1).content(), "hi");
}

TEST(ResponsesRequest, ChatOnlyFieldsAreNotRead) {
  // max_tokens and n are chat's: the Responses API has max_output_tokens
  // and no n.
  const OpenAiRequest r = Parse(R"({"input":"x","max_tokens":5,"n":3})");
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.prompts[0].stopping().max_tokens(), 0);
}

TEST(ResponsesRequest, ItemsBecomeChatTurns) {
  // A tool round trip as the openai client sends it back: the user turn,
  // the model's reasoning, message and call, the call's output.
  const OpenAiRequest r = Parse(R"({"input":[
    {"role":"developer","content":"dev"},
    {"type":"message","role":"user","content":[
      {"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
    {"type":"reasoning","id":"rs_1","summary":[],
     "content":[{"type":"reasoning_text","text":"think"}]},
    {"type":"message","role":"assistant","id":"msg_1","status":"completed",
     "content":[{"type":"output_text","text":"let me look","annotations":[]}]},
    {"type":"function_call","id":"fc_1","call_id":"call_9","name":"get",
     "arguments":"{\"q\":1}","status":"completed"},
    {"type":"function_call","call_id":"call_10","name":"put",
     "arguments":"{}"},
    {"type":"function_call_output","call_id":"call_9","output":"sunny"},
    {"type":"function_call_output","call_id":"call_10",
     "output":[{"type":"input_text","text":"done"}]}
  ]})");
  const v1::Chat& chat = ChatOf(r);
  ASSERT_EQ(chat.messages_size(), 5);
  EXPECT_EQ(chat.messages(0).role(), "developer");
  EXPECT_EQ(chat.messages(1).role(), "user");
  EXPECT_EQ(chat.messages(1).content(), "ab");
  const v1::ChatMessage& assistant = chat.messages(2);
  EXPECT_EQ(assistant.role(), "assistant");
  EXPECT_EQ(assistant.reasoning_content(), "think");
  EXPECT_EQ(assistant.content(), "let me look");
  ASSERT_EQ(assistant.tool_calls_size(), 2);
  EXPECT_EQ(assistant.tool_calls(0).id(), "call_9");
  EXPECT_EQ(assistant.tool_calls(0).type(), "function");
  EXPECT_EQ(assistant.tool_calls(0).function().name(), "get");
  EXPECT_EQ(assistant.tool_calls(0).function().arguments(), R"({"q":1})");
  EXPECT_EQ(assistant.tool_calls(1).id(), "call_10");
  EXPECT_EQ(chat.messages(3).role(), "tool");
  EXPECT_EQ(chat.messages(3).tool_call_id(), "call_9");
  EXPECT_EQ(chat.messages(3).name(), "get");
  EXPECT_EQ(chat.messages(3).content(), "sunny");
  EXPECT_EQ(chat.messages(4).tool_call_id(), "call_10");
  EXPECT_EQ(chat.messages(4).content(), "done");
}

TEST(ResponsesRequest, SeparateAssistantTurnsStaySeparate) {
  const OpenAiRequest r = Parse(R"({"input":[
    {"role":"user","content":"1"},
    {"role":"assistant","content":"one"},
    {"role":"assistant","content":"two"},
    {"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},
    {"type":"function_call","call_id":"c","name":"f","arguments":"{}"}
  ]})");
  const v1::Chat& chat = ChatOf(r);
  ASSERT_EQ(chat.messages_size(), 4);
  EXPECT_EQ(chat.messages(1).content(), "one");
  EXPECT_EQ(chat.messages(2).content(), "two");
  // The summary stands in for reasoning without content; the call joins it.
  EXPECT_EQ(chat.messages(3).reasoning_content(), "s");
  EXPECT_EQ(chat.messages(3).tool_calls_size(), 1);
  EXPECT_TRUE(chat.messages(3).content().empty());
}

TEST(ResponsesRequest, FlatFunctionToolsAndChoices) {
  const std::string tools =
      R"("tools":[{"type":"function","name":"get","description":"d",)"
      R"("parameters":{"type":"object"},"strict":false}])";
  OpenAiRequest r = Parse(R"({"input":"x",)" + tools + "}");
  ASSERT_EQ(ChatOf(r).tools_size(), 1);
  EXPECT_EQ(ChatOf(r).tools(0).type(), "function");
  EXPECT_EQ(ChatOf(r).tools(0).function().name(), "get");
  EXPECT_EQ(ChatOf(r).tools(0).function().description(), "d");
  EXPECT_EQ(ChatOf(r).tools(0).function().parameters(), R"({"type":"object"})");
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_FALSE(r.prompts[0].sampling().has_constraint());

  r = Parse(R"({"input":"x","tool_choice":"required",)" + tools + "}");
  EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(r.prompts[0].sampling().constraint().tool_calls().mode(),
            v1::ToolCalls::MODE_REQUIRED);

  r = Parse(R"({"input":"x","tool_choice":{"type":"function","name":"get"},)" +
            tools + "}");
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "get");

  r = Parse(R"({"input":"x","tool_choice":"none",)" + tools + "}");
  EXPECT_EQ(ChatOf(r).tools_size(), 0);

  // A strict tool under auto is constrained lazily.
  r = Parse(R"({"input":"x","tools":[{"type":"function","name":"g",)"
            R"("parameters":{"type":"object"},"strict":true}]})");
  EXPECT_EQ(r.prompts[0].sampling().constraint().tool_calls().mode(),
            v1::ToolCalls::MODE_AUTO);
  r = Parse(R"({"input":"x","parallel_tool_calls":false,"tool_choice":)"
            R"("required",)" +
            tools + "}");
  EXPECT_FALSE(r.prompts[0].sampling().constraint().tool_calls().parallel());
}

TEST(ResponsesRequest, TextFormatIsStructuredOutput) {
  OpenAiRequest r =
      Parse(R"({"input":"x","text":{"format":{"type":"json_schema","name":"n",)"
            R"("schema":{"type":"object"},"strict":true}}})");
  EXPECT_EQ(r.prompts[0].sampling().constraint().json_schema(),
            R"({"type":"object"})");
  r = Parse(R"({"input":"x","text":{"format":{"type":"json_object"}}})");
  EXPECT_TRUE(r.prompts[0].sampling().constraint().json_object());
  r = Parse(R"({"input":"x","text":{"format":{"type":"text"},)"
            R"("verbosity":"low"}})");
  EXPECT_FALSE(r.prompts[0].sampling().has_constraint());
  // Chat's response_format is not this API's field.
  r = Parse(R"({"input":"x","response_format":{"type":"json_object"}})");
  EXPECT_FALSE(r.prompts[0].sampling().has_constraint());
  Error(R"({"input":"x","text":{"format":{"type":"json_schema"}}})",
        "text.format.name");
  Error(R"({"input":"x","text":{"format":{"type":"xml"}}})",
        "text.format.type");
  Error(R"({"input":"x","text":{"format":{"type":"json_object"}},)"
        R"("guided_regex":"a"})",
        "guided_regex");
}

TEST(ResponsesRequest, ReasoningEffortIsATemplateVariable) {
  OpenAiRequest r =
      Parse(R"({"input":"x","reasoning":{"effort":"low","summary":"auto"}})");
  EXPECT_EQ(ChatOf(r).template_kwargs().at("reasoning_effort"), "\"low\"");
  // chat_template_kwargs, vLLM's, may still set it.
  r = Parse(R"({"input":"x","reasoning":{"effort":"low"},)"
            R"("chat_template_kwargs":{"reasoning_effort":"high"}})");
  EXPECT_EQ(ChatOf(r).template_kwargs().at("reasoning_effort"), "\"high\"");
  Error(R"({"input":"x","reasoning":{"effort":3}})", "reasoning.effort");
}

TEST(ResponsesRequest, StatelessFieldsAreRefusedSayingSo) {
  std::string message =
      Error(R"({"input":"x","previous_response_id":"resp_1"})",
            "previous_response_id");
  EXPECT_NE(message.find("stateless"), std::string::npos) << message;
  EXPECT_NE(message.find("input"), std::string::npos) << message;
  Error(R"({"input":"x","conversation":"conv_1"})", "conversation");
  Error(R"({"input":[{"type":"item_reference","id":"msg_1"}]})",
        "input[0].type");
  // store: true (the clients' default) is accepted; nothing is kept.
  ResponsesEcho echo;
  Parse(R"({"input":"x","store":true,"metadata":{"k":"v"}})", &echo);
  EXPECT_EQ(echo["store"], false);
  EXPECT_EQ(echo["metadata"]["k"], "v");
  Error(R"({"input":"x","background":true})", "background");
  Error(R"({"input":"x","prompt":{"id":"p"}})", "prompt");
}

TEST(ResponsesRequest, EchoRepeatsTheRequestOrItsDefaults) {
  ResponsesEcho echo;
  Parse(R"({"input":"x","tools":[{"type":"function","name":"f"}],)"
        R"("tool_choice":"required","temperature":0.2})",
        &echo);
  EXPECT_EQ(echo["tool_choice"], "required");
  EXPECT_EQ(echo["tools"][0]["name"], "f");
  EXPECT_EQ(echo["temperature"], 0.2);
  EXPECT_EQ(echo["top_p"], nullptr);
  EXPECT_EQ(echo["instructions"], nullptr);
  EXPECT_EQ(echo["parallel_tool_calls"], true);
  EXPECT_EQ(echo["text"]["format"]["type"], "text");
  EXPECT_EQ(echo["reasoning"]["effort"], nullptr);
}

TEST(ResponsesRequest, ErrorsNameTheField) {
  Error(R"({})", "input");
  Error(R"({"input":[]})", "input");
  Error(R"({"input":5})", "input");
  Error(R"({"input":[{"role":"robot","content":"x"}]})", "input[0].role");
  Error(R"({"input":[{"role":"user"}]})", "input[0].content");
  Error(R"({"input":[{"role":"user","content":[{"type":"input_image",)"
        R"("image_url":"u"}]}]})",
        "input[0].content[0].type");
  Error(R"({"input":[{"type":"function_call","name":"f"}]})",
        "input[0].call_id");
  Error(R"({"input":[{"type":"function_call_output","call_id":"c"}]})",
        "input[0].output");
  Error(R"({"input":[{"type":"computer_call","call_id":"c"}]})",
        "input[0].type");
  Error(R"({"input":"x","tools":[{"type":"web_search"}]})", "tools[0].type");
  Error(R"({"input":"x","tools":[{"type":"function"}]})", "tools[0].name");
  Error(R"({"input":"x","tool_choice":{"type":"function","name":"nope"},)"
        R"("tools":[{"type":"function","name":"f"}]})",
        "tool_choice.name");
  Error(R"({"input":"x","tool_choice":{"type":"file_search"}})",
        "tool_choice.type");
  Error(R"({"input":"x","tool_choice":"required"})", "tool_choice");
  Error(R"({"input":"x","max_output_tokens":0})", "max_output_tokens");
  Error(R"({"input":"x","top_logprobs":2})", "top_logprobs");
  Error(R"({"input":"x","temperature":-1})", "temperature");
}

}  // namespace
}  // namespace paceline::server::openai
