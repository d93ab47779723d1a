// ToolCallPrefix: the prefill for tool_choice "required" / named, checked
// through the real output parser — the prefix plus arguments a model could
// write must parse as a complete call with the forced name, in every
// format, and a model that writes no arguments ends with no call.

#include "server/openai/openai_tool_choice.h"

#include <memory>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {
namespace {

using chat::ChatOutputDelta;
using chat::ChatOutputFormat;
using chat::ChatOutputParser;
using chat::ToolCallFormat;

struct Parsed {
  std::string content;
  std::string name;
  std::string arguments;
  bool complete = false;
};

// The whole output (prefix, then `rest`) through a parser, pushed in two
// pieces as the server does (the prefix at construction, then tokens).
Parsed Parse(ToolCallFormat format, const std::string& prefix,
             const std::string& rest) {
  ChatOutputFormat f;
  f.tool_calls = format;
  ChatOutputParser parser(f, /*id_seed=*/7);
  Parsed out;
  auto take = [&](const ChatOutputDelta& d) {
    out.content += d.content;
    for (const auto& call : d.tool_calls) {
      if (call.index != 0) continue;
      out.name += call.name;
      out.arguments += call.arguments;
    }
  };
  take(parser.Push(prefix));
  take(parser.Push(rest));
  take(parser.Finish());
  out.complete = parser.saw_tool_calls();
  return out;
}

struct Case {
  ToolCallFormat format;
  std::string rest_named;     // what a model writes after a named prefix
  std::string rest_required;  // ... after a required prefix
};

std::vector<Case> Cases() {
  return {
      {ToolCallFormat::kHermes, R"({"city": "Paris"}}
</tool_call>)",
       R"({"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>)"},
      {ToolCallFormat::kLlama3, R"({"city": "Paris"}})",
       R"(get_weather", "parameters": {"city": "Paris"}})"},
      {ToolCallFormat::kMistral, R"({"city": "Paris"}}])",
       R"([{"name": "get_weather", "arguments": {"city": "Paris"}}])"},
      {ToolCallFormat::kMistralArgs, R"({"city": "Paris"})",
       R"(get_weather[ARGS]{"city": "Paris"})"},
  };
}

TEST(ToolCallPrefixTest, NamedPrefixPlusArgumentsIsTheForcedCall) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(std::string(chat::ToolCallFormatName(c.format)));
    absl::StatusOr<std::string> prefix =
        ToolCallPrefix(c.format, ToolChoice::kNamed, "get_weather");
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    const Parsed p = Parse(c.format, *prefix, c.rest_named);
    EXPECT_TRUE(p.complete);
    EXPECT_EQ(p.name, "get_weather");
    EXPECT_EQ(p.arguments, R"({"city": "Paris"})");
    EXPECT_EQ(p.content, "");
  }
}

TEST(ToolCallPrefixTest, RequiredPrefixLetsTheModelName) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(std::string(chat::ToolCallFormatName(c.format)));
    absl::StatusOr<std::string> prefix =
        ToolCallPrefix(c.format, ToolChoice::kRequired, "");
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    const Parsed p = Parse(c.format, *prefix, c.rest_required);
    EXPECT_TRUE(p.complete);
    EXPECT_EQ(p.name, "get_weather");
    EXPECT_EQ(p.arguments, R"({"city": "Paris"})");
  }
}

TEST(ToolCallPrefixTest, ProseAfterTheNamedPrefixIsNoCall) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(std::string(chat::ToolCallFormatName(c.format)));
    absl::StatusOr<std::string> prefix =
        ToolCallPrefix(c.format, ToolChoice::kNamed, "get_weather");
    ASSERT_TRUE(prefix.ok());
    const Parsed p = Parse(c.format, *prefix, "They went to the park.");
    EXPECT_FALSE(p.complete);
    // The broken call's text comes back as content, nothing is lost.
    EXPECT_THAT(p.content, ::testing::HasSubstr("They went to the park."));
  }
}

TEST(ToolCallPrefixTest, NameIsJsonEscaped) {
  absl::StatusOr<std::string> prefix =
      ToolCallPrefix(ToolCallFormat::kHermes, ToolChoice::kNamed, "a\"b");
  ASSERT_TRUE(prefix.ok());
  const Parsed p = Parse(ToolCallFormat::kHermes, *prefix, "{}}");
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.name, "a\"b");
}

TEST(ToolCallPrefixTest, AutoAndNoneNeedNoPrefix) {
  EXPECT_EQ(ToolCallPrefix(ToolCallFormat::kHermes, ToolChoice::kAuto, "")
                .value_or("x"),
            "");
  EXPECT_EQ(ToolCallPrefix(ToolCallFormat::kNone, ToolChoice::kNone, "")
                .value_or("x"),
            "");
}

TEST(ToolCallPrefixTest, ATemplateWithoutACallFormatIsRefusedNamingToolChoice) {
  absl::StatusOr<std::string> prefix =
      ToolCallPrefix(ToolCallFormat::kNone, ToolChoice::kNamed, "f");
  ASSERT_FALSE(prefix.ok());
  EXPECT_EQ(prefix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamOf(prefix.status()).value_or(""), "tool_choice");
}

// The prefix and the constraint's grammar agree: what the grammar accepts
// after each format's prefix is the call the parser reads, and a model
// that wanders off (the prose above) is refused by the grammar.
bool GrammarAccepts(ToolCallFormat format, ToolChoice choice,
                    const std::string& rest) {
  namespace gr = engine::grammar;
  gr::ToolCallSpec spec;
  spec.syntax =
      gr::ParseToolCallSyntax(chat::ToolCallFormatName(format)).value();
  spec.mode = choice == ToolChoice::kNamed ? gr::ToolCallMode::kNamed
                                           : gr::ToolCallMode::kRequired;
  spec.tools = {
      {"get_weather", R"({"properties": {"city": {"type": "string"}}})", true}};
  absl::StatusOr<gr::Grammar> g =
      gr::ToolCallGrammar(gr::ToolCallSpecText(spec));
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return false;
  absl::StatusOr<std::shared_ptr<const gr::CompiledGrammar>> c =
      gr::Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return false;
  gr::Matcher m(*c);
  return m.AcceptBytes(rest) && m.CanFinish();
}

TEST(ToolCallPrefixTest, TheConstraintContinuesThePrefix) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(std::string(chat::ToolCallFormatName(c.format)));
    EXPECT_TRUE(GrammarAccepts(c.format, ToolChoice::kNamed, c.rest_named));
    EXPECT_TRUE(
        GrammarAccepts(c.format, ToolChoice::kRequired, c.rest_required));
    EXPECT_FALSE(
        GrammarAccepts(c.format, ToolChoice::kNamed, "They went to the park."));
    EXPECT_FALSE(GrammarAccepts(c.format, ToolChoice::kRequired,
                                "They went to the park."));
  }
}

}  // namespace
}  // namespace paceline::server::openai
