// XML parameter values typed by the request's tools (parameter_value.h):
// a string parameter whose text looks like JSON stays a string.

#include "chat/tool_formats/parameter_value.h"

#include <memory>
#include <string>

#include "chat/output_parser.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "paceline/v1/paceline.pb.h"
#include "tests/chat/output_collect.h"

namespace paceline::chat {
namespace {

using Kind = ToolParameterTypes::Kind;
using json = nlohmann::ordered_json;

v1::Chat ChatWithTool(const std::string& parameters) {
  v1::Chat chat;
  v1::FunctionTool* f = chat.add_tools()->mutable_function();
  f->set_name("run");
  f->set_parameters(parameters);
  return chat;
}

TEST(ParameterTypesTest, FromTheChatsToolSchemas) {
  auto types = ToolParameterTypes::FromChat(ChatWithTool(
      R"({"properties": {"code": {"type": "string"}, "n": {"type": "number"},
          "u": {"type": ["string", "null"]}, "a": {}}})"));
  EXPECT_EQ(types->Find("run", "code"), Kind::kString);
  EXPECT_EQ(types->Find("run", "n"), Kind::kOther);
  EXPECT_EQ(types->Find("run", "u"), Kind::kUnknown);
  EXPECT_EQ(types->Find("run", "a"), Kind::kUnknown);
  EXPECT_EQ(types->Find("other", "code"), Kind::kUnknown);
  // Text that is not a JSON object: nothing known.
  types = ToolParameterTypes::FromChat(ChatWithTool("{not json"));
  EXPECT_EQ(types->Find("run", "code"), Kind::kUnknown);
}

TEST(ParameterTypesTest, AStringParameterThatLooksLikeJsonStaysAString) {
  const std::string output =
      "<tool_call>\n<function=run>\n<parameter=code>\n3\n</parameter>\n"
      "<parameter=n>\n3\n</parameter>\n<parameter=a>\n3\n</parameter>\n"
      "</function>\n</tool_call>";
  ChatOutputFormat format;
  format.tool_calls = ToolCallFormat::kQwen3Coder;
  format.parameter_types = ToolParameterTypes::FromChat(ChatWithTool(
      R"({"properties": {"code": {"type": "string"}, "n": {"type": "integer"}}})"));
  chat_test::Collected got = chat_test::Parse(format, output);
  ASSERT_EQ(got.calls.size(), 1u) << got;
  EXPECT_EQ(json::parse(got.calls[0].arguments),
            json::parse(R"({"code": "3", "n": 3, "a": 3})"));
  // Without the types, vLLM's rule: "3" is JSON.
  format.parameter_types = nullptr;
  got = chat_test::Parse(format, output);
  ASSERT_EQ(got.calls.size(), 1u) << got;
  EXPECT_EQ(json::parse(got.calls[0].arguments),
            json::parse(R"({"code": 3, "n": 3, "a": 3})"));
}

TEST(ParameterTypesTest, CdataAroundAStringIsTheTemplates) {
  EXPECT_EQ(ParameterValueJson("<![CDATA[a <b> & c]]>", Kind::kString,
                               ValueHint::kNone),
            "\"a <b> & c\"");
  EXPECT_EQ(ParameterValueJson("<![CDATA[cut", Kind::kString, ValueHint::kNone),
            "\"<![CDATA[cut\"");
}

}  // namespace
}  // namespace paceline::chat
