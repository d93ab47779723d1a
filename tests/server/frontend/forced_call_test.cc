// Forced tool calls in the chat families (chat/tool_formats/call_writing.h
// and tool_call_grammar.h's CallMarkup, joined by ForcedCallMarkup): for
// each template, what jinja2 renders for an assistant turn with calls is
// the oracle. After the forced opening (ForcedCallOpening), the grammar
// accepts the rest of the rendered calls (required, named, auto whole),
// and the parser reads the opening and the rest back as the calls. Calls
// the template renders with a wrong name, a missing required parameter or
// a value of the wrong type or outside an enum are refused.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "chat/output_parser.h"
#include "chat/tool_formats/call_writing.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/matcher.h"
#include "engine/sampling/grammar/tool_call_grammar.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/frontend/tool_call_constraint.h"
#include "tests/chat/output_collect.h"
#include "tests/testing/chat_template_reference.h"
#include "tests/testing/files.h"

namespace paceline::server {
namespace {

namespace gr = engine::grammar;
using chat::ToolCallFormat;
using json = nlohmann::ordered_json;

const char kWeather[] = R"({"type": "object", "properties": {
    "city": {"type": "string"},
    "days": {"type": "integer"},
    "unit": {"type": "string", "enum": ["C", "F"]}},
  "required": ["city"]})";
const char kTime[] = R"({"type": "object", "properties": {
    "tz": {"type": "string"}}, "required": ["tz"]})";

json Tools() {
  json tools = json::array();
  for (const auto& [name, schema] :
       {std::pair{"get_weather", kWeather}, std::pair{"get_time", kTime}}) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", name},
                       {"description", "Look it up"},
                       {"parameters", json::parse(schema)}}}});
  }
  return tools;
}

gr::ToolCallSpec Spec(ToolCallFormat format, gr::ToolCallMode mode,
                      bool parallel) {
  gr::ToolCallSpec spec;
  spec.syntax = gr::ToolCallSyntax::kMarkup;
  spec.markup = ForcedCallMarkup(format).value();
  spec.mode = mode;
  spec.parallel = parallel;
  spec.tools = {{"get_weather", kWeather, true}};
  if (mode != gr::ToolCallMode::kNamed) {
    spec.tools.push_back({"get_time", kTime, true});
  }
  return spec;
}

bool Matches(const gr::ToolCallSpec& spec, absl::string_view text) {
  absl::StatusOr<gr::Grammar> g =
      gr::ToolCallGrammar(gr::ToolCallSpecText(spec));
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return false;
  absl::StatusOr<std::shared_ptr<const gr::CompiledGrammar>> c =
      gr::Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return false;
  gr::Matcher m(*c);
  return m.AcceptBytes(text) && m.CanFinish();
}

// Spec() with get_weather's city held to `city` (a string schema).
gr::ToolCallSpec CitySpec(ToolCallFormat format, const char* city) {
  gr::ToolCallSpec spec = Spec(format, gr::ToolCallMode::kRequired, true);
  json schema = json::parse(kWeather);
  schema["properties"]["city"] = json::parse(city);
  spec.tools[0].parameters = schema.dump();
  return spec;
}

struct Case {
  std::string file;
  ToolCallFormat format;
  std::string end;  // what ends the calls in the render ("": the end)
  bool parallel = true;
  // Context variables the template needs besides the conversation and
  // the tools (a null value: render without the tools).
  json context = json::object();
};

std::vector<Case> Cases() {
  using F = ToolCallFormat;
  return {
      {"Qwen3-Coder.jinja", F::kQwen3Coder, "<|im_end|>"},
      {"Qwen3.5-4B.jinja", F::kQwen3Coder, "<|im_end|>"},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", F::kQwen3Coder,
       "<|im_end|>"},
      {"StepFun3.5-Flash.jinja", F::kQwen3Coder, "<|im_end|>"},
      {"ByteDance-Seed-OSS.jinja", F::kSeedOss, "<seed:eos>"},
      {"GLM-4.6.jinja", F::kGlm, ""},
      {"GLM-4.7-Flash.jinja", F::kGlm, ""},
      {"poolside-Laguna-XS.2.jinja", F::kGlm, "</assistant>"},
      {"tencent-Hy3.jinja", F::kHunyuan, "<｜hy_eos:opensource｜>"},
      {"MiniMax-M2.jinja", F::kMiniMax, "[e~["},
      {"deepseek-ai-DeepSeek-V3.2.jinja", F::kDeepSeekDsml,
       "<｜end▁of▁sentence｜>"},
      {"deepseek-ai-DeepSeek-V4.jinja", F::kDeepSeekV4,
       "<｜end▁of▁sentence｜>"},
      {"openbmb-MiniCPM5-1B.jinja", F::kMiniCpm, "<|im_end|>"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", F::kDeepSeekV31,
       "<｜end▁of▁sentence｜>"},
      {"moonshotai-Kimi-K2.jinja", F::kKimiK2, "<|im_end|>"},
      {"upstage-Solar-Open-100B.jinja", F::kSolar, ""},
      {"meetkai-functionary-medium-v3.1.jinja", F::kFunctionaryV31,
       "<|eom_id|>"},
      {"openai-gpt-oss-120b.jinja", F::kHarmony, "", false},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", F::kDeepSeekR1,
       "<｜end▁of▁sentence｜>"},
      {"meetkai-functionary-medium-v3.2.jinja", F::kFunctionaryV32,
       "<|eot_id|>"},
      {"unsloth-Apriel-1.5.jinja", F::kApriel, "<|end|>"},
      {"Apriel-1.6-15b-Thinker-fixed.jinja", F::kApriel, ""},
      {"NVIDIA-Nemotron-Nano-v2.jinja", F::kNemotronV2, "<SPECIAL_12>"},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", F::kCommandR7b,
       "<|END_OF_TURN_TOKEN|>"},
      {"Cohere2MoE.jinja", F::kCommandR7b, "<|END_OF_TURN_TOKEN|>"},
      {"GigaChat3.1-10B-A1.8B.jinja", F::kGigaChat, "<|message_sep|>", false},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", F::kFirefunction,
       "<|eot_id|>", true,
       json{{"functions", Tools().dump()}, {"datetime", "2026-01-15"}}},
  };
}

json Call(const std::string& name, json arguments, int n) {
  return {{"id", absl::StrCat("call", n, "abcd")},
          {"type", "function"},
          {"function", {{"name", name}, {"arguments", std::move(arguments)}}}};
}

json Weather(json arguments) { return Call("get_weather", arguments, 0); }

// The conversations: index 0 one call, 1 two calls, then the bad ones.
std::vector<json> Conversations() {
  return {
      json::array({Weather(
          {{"city", "Zürich \"old\" <town>"}, {"days", 3}, {"unit", "C"}})}),
      json::array(
          {Weather({{"city", "Paris"}}), Call("get_time", {{"tz", "UTC"}}, 1)}),
      json::array({Call("get_wether", {{"city", "Paris"}}, 0)}),
      json::array({Weather({{"days", 3}})}),
      json::array({Weather({{"city", "Paris"}, {"days", "three"}})}),
      json::array({Weather({{"city", "Paris"}, {"unit", "K"}})}),
  };
}

json Request(const Case& c, const std::string& source, const json& calls,
             bool text_args) {
  json tool_calls = calls;
  if (text_args) {
    for (json& c : tool_calls) {
      c["function"]["arguments"] = c["function"]["arguments"].dump();
    }
  }
  json messages = json::array(
      {{{"role", "user"}, {"content", "Weather?"}},
       {{"role", "assistant"}, {"content", ""}, {"tool_calls", tool_calls}}});
  json context = {{"messages", messages},
                  {"tools", Tools()},
                  {"add_generation_prompt", false},
                  {"bos_token", "<s>"},
                  {"eos_token", "</s>"}};
  for (const auto& [key, value] : c.context.items()) context[key] = value;
  return {{"template", source}, {"context", std::move(context)}};
}

// The rendered calls from the forced opening on, up to `end`; "" when the
// render holds no opening.
std::string CallsText(const std::string& render, const Case& c,
                      const std::string& opening) {
  size_t at = render.find("Weather?");
  if (at == std::string::npos) return "";
  at = render.find(opening, at);
  if (at == std::string::npos) return "";
  std::string out = render.substr(at);
  if (!c.end.empty()) out = out.substr(0, out.find(c.end));
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

TEST(ForcedCallTest, TheGrammarAcceptsTheTemplatesCallsAfterTheOpening) {
  if (std::string why = testing::ReferenceUnavailable(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  const std::vector<json> conversations = Conversations();
  std::vector<json> requests;
  for (const Case& c : Cases()) {
    const std::string source =
        testing::ReadFile(testing::kChatTemplateDir + "/" + c.file);
    ASSERT_FALSE(source.empty()) << c.file;
    for (const json& calls : conversations) {
      requests.push_back(Request(c, source, calls, false));
      requests.push_back(Request(c, source, calls, true));
    }
  }
  absl::StatusOr<std::vector<json>> answers = testing::RunReference(requests);
  ASSERT_TRUE(answers.ok()) << answers.status();
  size_t next = 0;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.file);
    const chat::CallWriting w = chat::FindCallWriting(c.format).value();
    const std::string required = chat::ForcedCallOpening(w, "");
    const std::string named = chat::ForcedCallOpening(w, "get_weather");
    chat::ChatOutputFormat format;
    format.tool_calls = c.format;
    format.parameter_types = std::make_shared<chat::ToolParameterTypes>(
        chat::ToolParameterTypes::FromTools(Tools()));
    for (size_t k = 0; k < conversations.size(); ++k, next += 2) {
      const json& a = (*answers)[next];
      const json& b = (*answers)[next + 1];
      const json& answer = a.value("ok", false) ? a : b;
      ASSERT_TRUE(answer.value("ok", false)) << a.dump() << b.dump();
      const std::string text =
          CallsText(answer["text"].get<std::string>(), c, required);
      SCOPED_TRACE(absl::StrCat("conversation ", k, ": ", text));
      ASSERT_FALSE(text.empty()) << answer["text"];
      const std::string rest = text.substr(required.size());
      const bool two = k == 1;
      if (two && !c.parallel) continue;
      const bool good = k < 2;
      EXPECT_EQ(Matches(Spec(c.format, gr::ToolCallMode::kRequired, two), rest),
                good);
      EXPECT_EQ(Matches(Spec(c.format, gr::ToolCallMode::kAuto, two), text),
                good);
      if (two) {  // "Paris": its lengths, pattern and format held
        for (const auto& [city, holds] :
             {std::pair{R"({"type": "string", "maxLength": 5})", true},
              std::pair{R"({"type": "string", "maxLength": 4})", false},
              std::pair{R"({"type": "string", "minLength": 5})", true},
              std::pair{R"({"type": "string", "minLength": 6})", false},
              std::pair{R"({"type": "string", "pattern": "^P[a-z]+$"})", true},
              std::pair{R"({"type": "string", "pattern": "^p"})", false},
              std::pair{R"({"type": "string", "format": "date"})", false}}) {
          EXPECT_EQ(Matches(CitySpec(c.format, city), rest), holds) << city;
        }
      }
      if (two) {  // one call only without parallel
        EXPECT_FALSE(
            Matches(Spec(c.format, gr::ToolCallMode::kRequired, false), rest));
      }
      if (k == 0 || k >= 3) {
        std::string named_here = named;  // GLM 4.7 writes no newlines
        if (!absl::StartsWith(text, named) && w.newlines) {
          named_here.pop_back();
        }
        ASSERT_TRUE(absl::StartsWith(text, named_here)) << named;
        EXPECT_EQ(Matches(Spec(c.format, gr::ToolCallMode::kNamed, false),
                          text.substr(named_here.size())),
                  good);
      }
      if (!good) continue;
      // The parser reads the opening and the rest back as the calls.
      const chat::chat_test::Collected got =
          chat::chat_test::Parse(format, text);
      const json& calls = conversations[k];
      ASSERT_EQ(got.calls.size(), calls.size()) << got;
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(got.calls[i].name, calls[i]["function"]["name"]);
        EXPECT_EQ(json::parse(got.calls[i].arguments),
                  calls[i]["function"]["arguments"]);
      }
    }
  }
}

// Command R+'s template indents the arguments (tojson(indent=4)), which
// the grammar's compact JSON does not write; calls without arguments it
// writes as `{}`, and those the grammar accepts as the template renders
// them, and the parser reads back.
TEST(ForcedCallTest, CommandRPlusCallsWithoutArgumentsAreTheTemplates) {
  if (std::string why = testing::ReferenceUnavailable(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  const std::string source = testing::ReadFile(
      testing::kChatTemplateDir +
      "/CohereForAI-c4ai-command-r-plus-tool_use.jinja");
  ASSERT_FALSE(source.empty());
  // Its tool list takes another shape (parameter_definitions): the
  // conversation is rendered without it.
  Case c{"", ToolCallFormat::kCommandRPlus, "<|START_OF_TURN_TOKEN|>"};
  c.context = {{"tools", nullptr}};
  json request = Request(
      c, source,
      json::array({Call("ping", json::object(), 0), Call("now", json::object(), 1)}),
      false);
  request["context"].erase("tools");
  absl::StatusOr<json> answer = testing::RunReference(request);
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_TRUE(answer->value("ok", false)) << answer->dump();
  const chat::CallWriting w =
      chat::FindCallWriting(ToolCallFormat::kCommandRPlus).value();
  const std::string opening = chat::ForcedCallOpening(w, "");
  const std::string text =
      CallsText((*answer)["text"].get<std::string>(), c, opening);
  ASSERT_FALSE(text.empty()) << (*answer)["text"];
  gr::ToolCallSpec spec;
  spec.syntax = gr::ToolCallSyntax::kMarkup;
  spec.markup = ForcedCallMarkup(ToolCallFormat::kCommandRPlus).value();
  spec.parallel = true;
  spec.tools = {{"ping", "", true}, {"now", "", true}};
  EXPECT_TRUE(Matches(spec, text.substr(opening.size()))) << text;
  spec.parallel = false;
  EXPECT_FALSE(Matches(spec, text.substr(opening.size()))) << text;
  chat::ChatOutputFormat format;
  format.tool_calls = ToolCallFormat::kCommandRPlus;
  const chat::chat_test::Collected got = chat::chat_test::Parse(format, text);
  ASSERT_EQ(got.calls.size(), 2u) << got;
  EXPECT_EQ(got.calls[0].name, "ping");
  EXPECT_EQ(got.calls[1].name, "now");
  EXPECT_EQ(json::parse(got.calls[0].arguments), json::object());
}

// The prefix the server writes and the grammar's start agree for every
// format with a forced form.
TEST(ForcedCallTest, EveryFormatWithAWritingHasAMarkupThatCompiles) {
  for (int f = 0; f <= static_cast<int>(ToolCallFormat::kHarmony); ++f) {
    const auto format = static_cast<ToolCallFormat>(f);
    SCOPED_TRACE(std::string(chat::ToolCallFormatName(format)));
    const std::optional<chat::CallWriting> w = chat::FindCallWriting(format);
    ASSERT_EQ(w.has_value(), ForcedCallMarkup(format).has_value());
    if (!w.has_value()) continue;
    for (gr::ToolCallMode mode :
         {gr::ToolCallMode::kRequired, gr::ToolCallMode::kNamed,
          gr::ToolCallMode::kAuto}) {
      absl::StatusOr<gr::Grammar> g =
          gr::ToolCallGrammar(gr::ToolCallSpecText(Spec(format, mode, true)));
      EXPECT_TRUE(g.ok()) << g.status();
    }
    EXPECT_FALSE(Matches(Spec(format, gr::ToolCallMode::kRequired, false),
                         "They went to the park."));
    EXPECT_FALSE(Matches(Spec(format, gr::ToolCallMode::kNamed, false),
                         "They went to the park."));
  }
}

}  // namespace
}  // namespace paceline::server
