// BuildChatContext: each field of v1::Chat as the template's variables, and
// every error naming its field. The oracle for the shape is
// ../shared/chat_templates/conversations.json (the variables the reference
// renderer is fed): each conversation, sent as a v1::Chat, must come back
// as the same JSON.

#include "chat/request_context.h"

#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "paceline/v1/paceline.pb.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"

namespace paceline::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A conversations.json message as a v1::ChatMessage.
v1::ChatMessage ToProto(const Json& m) {
  v1::ChatMessage out;
  out.set_role(m.value("role", ""));
  if (m.contains("content") && m["content"].is_string()) {
    out.set_content(m["content"].get<std::string>());
  } else if (m.contains("content") && m["content"].is_array()) {
    for (const Json& part : m["content"]) {
      v1::ContentPart* p = out.add_content_parts();
      p->set_type(part.value("type", ""));
      p->set_text(part.value("text", ""));
    }
  }
  if (m.contains("name")) out.set_name(m["name"].get<std::string>());
  if (m.contains("tool_call_id")) {
    out.set_tool_call_id(m["tool_call_id"].get<std::string>());
  }
  if (m.contains("reasoning_content")) {
    out.set_reasoning_content(m["reasoning_content"].get<std::string>());
  }
  for (const Json& call : m.value("tool_calls", Json::array())) {
    v1::ToolCall* c = out.add_tool_calls();
    c->set_id(call.value("id", ""));
    c->set_type(call.value("type", ""));
    c->mutable_function()->set_name(
        call["function"]["name"].get<std::string>());
    c->mutable_function()->set_arguments(Dump(call["function"]["arguments"]));
  }
  return out;
}

// A conversations.json entry as a v1::Chat.
v1::Chat ToProto(const Json& entry, Json* expected) {
  v1::Chat chat;
  *expected = Json::object();
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const std::string& key = it.key();
    if (key == "name") continue;
    (*expected)[key] = it.value();
    if (key == "messages") {
      for (const Json& m : it.value()) *chat.add_messages() = ToProto(m);
    } else if (key == "tools") {
      for (const Json& t : it.value()) {
        v1::Tool* tool = chat.add_tools();
        tool->set_type(t.value("type", ""));
        const Json& f = t["function"];
        tool->mutable_function()->set_name(f.value("name", ""));
        tool->mutable_function()->set_description(f.value("description", ""));
        tool->mutable_function()->set_parameters(Dump(f["parameters"]));
      }
    } else if (key == "add_generation_prompt") {
      chat.set_add_generation_prompt(it.value().get<bool>());
    } else {
      (*chat.mutable_template_kwargs())[key] = Dump(it.value());
    }
  }
  (*expected)["bos_token"] = "<s>";
  (*expected)["eos_token"] = "</s>";
  return chat;
}

TEST(ChatRequestTest, ConversationsJsonRoundTrip) {
  const std::string text = ::paceline::testing::ReadFile(
      ::paceline::testing::SharedPath("chat_templates/conversations.json"));
  const Json conversations = Json::parse(text, nullptr, false);
  ASSERT_TRUE(conversations.is_array()) << "conversations.json missing";
  ASSERT_GE(conversations.size(), 12u);
  for (const Json& entry : conversations) {
    Json expected;
    const v1::Chat chat = ToProto(entry, &expected);
    auto context = BuildChatContext(chat, "<s>", "</s>");
    ASSERT_TRUE(context.ok()) << entry["name"] << ": " << context.status();
    // Same values; key order aside (unordered comparison).
    EXPECT_EQ(nlohmann::json::parse(Dump(*context)),
              nlohmann::json::parse(Dump(expected)))
        << entry["name"] << "\n got: " << Dump(*context)
        << "\nwant: " << Dump(expected);
  }
}

TEST(ChatRequestTest, OnlySetKeysAndDefaults) {
  v1::Chat chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("user");
  m->set_content("hi");
  auto context = BuildChatContext(chat, "", "");
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ(Dump(*context),
            R"({"messages":[{"role":"user","content":"hi"}],)"
            R"("add_generation_prompt":true,"bos_token":"","eos_token":""})");
  chat.set_add_generation_prompt(false);
  EXPECT_EQ((*BuildChatContext(chat, "", ""))["add_generation_prompt"], false);
}

TEST(ChatRequestTest, NullContentAndParts) {
  v1::Chat chat;
  chat.add_messages()->set_role("assistant");  // no content at all
  v1::ChatMessage* parts = chat.add_messages();
  parts->set_role("user");
  parts->add_content_parts()->set_text("a");  // type defaults to text
  v1::ContentPart* b = parts->add_content_parts();
  b->set_type("text");
  b->set_text("b");
  v1::ChatMessage* empty = chat.add_messages();
  empty->set_role("user");
  empty->set_content("");  // set, empty: a string
  auto context = BuildChatContext(chat, "", "");
  ASSERT_TRUE(context.ok()) << context.status();
  const Json& messages = (*context)["messages"];
  EXPECT_TRUE(messages[0]["content"].is_null());
  EXPECT_EQ(Dump(messages[1]["content"]),
            R"([{"type":"text","text":"a"},{"type":"text","text":"b"}])");
  EXPECT_EQ(messages[2]["content"], "");
}

TEST(ChatRequestTest, ToolCallArgumentsAreParsed) {
  v1::Chat chat;
  v1::ChatMessage* m = chat.add_messages();
  m->set_role("assistant");
  v1::ToolCall* call = m->add_tool_calls();
  call->mutable_function()->set_name("f");
  call->mutable_function()->set_arguments(R"({"b": [1, {"c": null}], "a": 2})");
  m->add_tool_calls()->mutable_function()->set_name("g");  // no arguments
  auto context = BuildChatContext(chat, "", "");
  ASSERT_TRUE(context.ok()) << context.status();
  const Json& calls = (*context)["messages"][0]["tool_calls"];
  EXPECT_EQ(Dump(calls[0]),
            R"({"type":"function","function":{"name":"f","arguments":)"
            R"({"b":[1,{"c":null}],"a":2}}})");
  EXPECT_EQ(Dump(calls[1]["function"]["arguments"]), "{}");
}

void ExpectInvalid(const v1::Chat& chat, absl::string_view field) {
  auto context = BuildChatContext(chat, "", "");
  ASSERT_FALSE(context.ok()) << field;
  EXPECT_EQ(context.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(context.status().message(), field))
      << context.status();
}

TEST(ChatRequestTest, ErrorsNameTheField) {
  v1::Chat base;
  base.add_messages()->set_role("user");
  {
    v1::Chat c = base;
    c.add_messages();
    ExpectInvalid(c, "chat.messages[1].role is empty");
  }
  {
    v1::Chat c = base;
    c.mutable_messages(0)->set_content("x");
    c.mutable_messages(0)->add_content_parts()->set_text("y");
    ExpectInvalid(c, "chat.messages[0] has both content and content_parts");
  }
  {
    v1::Chat c = base;
    c.mutable_messages(0)->add_content_parts()->set_type("image_url");
    ExpectInvalid(c, "chat.messages[0].content_parts[0].type must be \"text\"");
  }
  for (const char* bad : {"{", "[1]", "\"x\"", "{\"a\": 1} trailing"}) {
    v1::Chat c = base;
    v1::ToolCall* call = c.add_messages()->add_tool_calls();
    c.mutable_messages(1)->set_role("assistant");
    call->mutable_function()->set_name("f");
    call->mutable_function()->set_arguments(bad);
    ExpectInvalid(c, "chat.messages[1].tool_calls[0].function.arguments ");
  }
  {
    v1::Chat c = base;
    c.mutable_messages(0)->add_tool_calls();
    ExpectInvalid(c, "chat.messages[0].tool_calls[0].function.name is empty");
  }
  {
    v1::Chat c = base;
    c.add_tools()->mutable_function()->set_name("f");
    c.add_tools()->mutable_function()->set_name("g");
    c.mutable_tools(1)->mutable_function()->set_parameters("{nope");
    ExpectInvalid(c, "chat.tools[1].function.parameters is not valid JSON");
  }
  {
    v1::Chat c = base;
    c.add_tools();
    ExpectInvalid(c, "chat.tools[0].function.name is empty");
  }
  {
    v1::Chat c = base;
    (*c.mutable_template_kwargs())["enable_thinking"] = "flase";
    ExpectInvalid(c, "chat.template_kwargs[\"enable_thinking\"] is not valid");
  }
  for (const char* name : {"messages", "tools", "add_generation_prompt",
                           "bos_token", "eos_token"}) {
    v1::Chat c = base;
    (*c.mutable_template_kwargs())[name] = "1";
    ExpectInvalid(c, absl::StrCat("chat.template_kwargs[\"", name,
                                  "\"] may not replace"));
  }
  {
    v1::Chat c = base;
    std::string deep;
    for (int i = 0; i <= kMaxJsonDepth; ++i) deep += "{\"a\":";
    deep += "1";
    for (int i = 0; i <= kMaxJsonDepth; ++i) deep += "}";
    v1::ToolCall* call = c.mutable_messages(0)->add_tool_calls();
    call->mutable_function()->set_name("f");
    call->mutable_function()->set_arguments(deep);
    ExpectInvalid(c,
                  "chat.messages[0].tool_calls[0].function.arguments (at "
                  "'a.a.a");
  }
  {
    // Each kwarg is an entry of the template's variables: as many as an
    // object may hold keys.
    v1::Chat c = base;
    for (int i = 0; i <= kMaxJsonObjectKeys; ++i) {
      (*c.mutable_template_kwargs())[absl::StrCat("k", i)] = "1";
    }
    ExpectInvalid(c, "chat.template_kwargs has more than 4096 entries");
  }
  {
    v1::Chat c = base;
    c.add_tools()->mutable_function()->set_name("f");
    std::string params = "{";
    for (int i = 0; i <= kMaxJsonObjectKeys; ++i) {
      absl::StrAppend(&params, i == 0 ? "" : ",", "\"p", i, "\":{}");
    }
    c.mutable_tools(0)->mutable_function()->set_parameters(params + "}");
    ExpectInvalid(c,
                  "chat.tools[0].function.parameters has more than 4096 "
                  "keys");
  }
}

TEST(ChatRequestTest, ManyKwargsAreTakenInLinearTime) {
  // 4096 kwargs (each appended, not searched for): the context holds them
  // all, in name order, after the server's variables.
  v1::Chat chat;
  for (int i = 0; i < kMaxJsonObjectKeys; ++i) {
    (*chat.mutable_template_kwargs())[absl::StrCat("k", 10000 + i)] =
        absl::StrCat(i);
  }
  auto context = BuildChatContext(chat, "", "");
  ASSERT_TRUE(context.ok()) << context.status();
  ASSERT_EQ(context->size(), 4u + kMaxJsonObjectKeys);
  EXPECT_EQ((*context)["k10000"], 0);
  EXPECT_EQ((*context)["k14095"], 4095);
  EXPECT_EQ(std::next(context->begin(), 4).key(), "k10000");
}

TEST(ChatRequestTest, KwargsParsedInNameOrder) {
  v1::Chat chat;
  (*chat.mutable_template_kwargs())["zeta"] = "\"z\"";
  (*chat.mutable_template_kwargs())["enable_thinking"] = "false";
  (*chat.mutable_template_kwargs())["alpha"] = "{\"k\": [1]}";
  auto context = BuildChatContext(chat, "<s>", "</s>");
  ASSERT_TRUE(context.ok()) << context.status();
  EXPECT_EQ(Dump(*context),
            R"({"messages":[],"add_generation_prompt":true,"bos_token":"<s>",)"
            R"("eos_token":"</s>","alpha":{"k":[1]},"enable_thinking":false,)"
            R"("zeta":"z"})");
}

}  // namespace
}  // namespace paceline::chat
