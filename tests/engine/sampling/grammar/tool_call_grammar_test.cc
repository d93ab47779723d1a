// ToolCallGrammar (tool_call_grammar.h) against the models' own chat
// templates: what a template renders for an assistant turn with tool calls
// is the text the model was trained to write, so after the mode's opening
// it must be accepted, in every syntax (jinja2 renders, as the chat tests'
// oracle). Arguments that break the tool's schema, or are not JSON, are
// refused; so are unknown tools and a second call without `parallel`.

#include "engine/sampling/grammar/tool_call_grammar.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/sampling/grammar/compile.h"
#include "engine/sampling/grammar/fast_forward.h"
#include "engine/sampling/grammar/matcher.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"
#include "tests/testing/chat_template_reference.h"
#include "tests/testing/files.h"

namespace paceline::engine::grammar {
namespace {

using json = nlohmann::ordered_json;

const char kWeather[] = R"({"type": "object", "properties": {
    "city": {"type": "string"},
    "days": {"type": "array", "items": {"type": "integer"}},
    "opts": {"type": "object"}},
  "required": ["city"], "additionalProperties": false})";
const char kTime[] = R"({"properties": {"tz": {"type": "string"}},
  "required": ["tz"]})";

ToolCallSpec Spec(ToolCallSyntax syntax, ToolCallMode mode,
                  bool parallel = false) {
  ToolCallSpec spec;
  spec.syntax = syntax;
  spec.mode = mode;
  spec.parallel = parallel;
  spec.tools = {{"get_weather", kWeather, true}};
  if (mode != ToolCallMode::kNamed) spec.tools.push_back({"get_time", kTime});
  return spec;
}

std::shared_ptr<const CompiledGrammar> CompileSpec(const ToolCallSpec& spec) {
  absl::StatusOr<Grammar> g = ToolCallGrammar(ToolCallSpecText(spec));
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return nullptr;
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> c = Compile(*g);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

bool Matches(const ToolCallSpec& spec, absl::string_view text) {
  std::shared_ptr<const CompiledGrammar> c = CompileSpec(spec);
  if (c == nullptr) return false;
  Matcher m(c);
  return m.AcceptBytes(text) && m.CanFinish();
}

// What the server writes into the prompt before the model's output.
std::string Opening(ToolCallSyntax syntax, ToolCallMode mode) {
  const bool named = mode == ToolCallMode::kNamed;
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      return named ? "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                   : "<tool_call>\n";
    case ToolCallSyntax::kLlama3:
      return named ? "{\"name\": \"get_weather\", \"parameters\": "
                   : "{\"name\": \"";
    case ToolCallSyntax::kMistral:
      return named ? "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": "
                   : "[TOOL_CALLS]";
    case ToolCallSyntax::kMistralArgs:
      return named ? "[TOOL_CALLS]get_weather[ARGS]" : "[TOOL_CALLS]";
    case ToolCallSyntax::kMarkup:
      break;  // MarkupTest
  }
  return "";
}

std::string ReadTemplate(const std::string& file) {
  std::string source =
      testing::ReadFile(testing::SharedPath("chat_templates/" + file));
  EXPECT_FALSE(source.empty()) << file;
  return source;
}

json RenderRequest(const std::string& file, json messages, json tools) {
  return {{"template", ReadTemplate(file)},
          {"context",
           {{"messages", std::move(messages)},
            {"tools", std::move(tools)},
            {"add_generation_prompt", false},
            {"bos_token", "<s>"},
            {"eos_token", "</s>"}}}};
}

// For every template, its rendering of one call (and of two where it takes
// more) must be in the language: after the required opening, after the
// named one (one call), and whole in auto mode.
TEST(ToolCallGrammarTest, AcceptsTheTemplatesOwnCalls) {
  if (std::string why = testing::ReferenceUnavailable(); !why.empty()) {
    GTEST_SKIP() << why;
  }
  struct Case {
    std::string file;
    ToolCallSyntax syntax;
    std::string header;  // the assistant turn's opening
    std::string end;     // what ends the turn
    int max_calls;
  };
  const std::string im = "<|im_start|>assistant\n";
  const std::string llama = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  using S = ToolCallSyntax;
  const std::vector<Case> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", S::kHermes, im, "<|im_end|>", 2},
      {"Qwen-Qwen3-0.6B.jinja", S::kHermes, im, "<|im_end|>", 2},
      {"Qwen-QwQ-32B.jinja", S::kHermes, im, "<|im_end|>", 2},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", S::kHermes, im,
       "<|im_end|>", 2},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", S::kHermes, im,
       "<|im_end|>", 2},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", S::kLlama3, llama,
       "<|eot_id|>", 1},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", S::kLlama3, llama,
       "<|eot_id|>", 1},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", S::kLlama3, llama,
       "<|eot_id|>", 1},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", S::kMistral, "", "</s>",
       2},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", S::kMistralArgs, "", "</s>",
       2},
      {"unsloth-mistral-Devstral-Small-2507.jinja", S::kMistralArgs, "", "</s>",
       2},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", S::kMistralArgs, "",
       "</s>", 2},
  };
  const json calls = json::parse(R"([
    {"id": "abcDEF123", "type": "function", "function": {
      "name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2],
      "opts": {"unit": "°C \"metric\"", "deep": [{"a": null}]}}}},
    {"id": "xyz987QWE", "type": "function", "function": {
      "name": "get_time", "arguments": {"tz": "Europe/Paris"}}}])");
  json tools = json::array();
  for (const auto& [name, schema] :
       {std::pair{"get_weather", kWeather}, std::pair{"get_time", kTime}}) {
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", name},
                       {"description", "Look it up"},
                       {"parameters", json::parse(schema)}}}});
  }
  const json user = {{"role", "user"}, {"content", "Weather?"}};
  std::vector<json> requests;
  std::vector<std::pair<const Case*, int>> pending;
  for (const Case& c : cases) {
    for (int n = 1; n <= c.max_calls; ++n) {
      json assistant = {{"role", "assistant"},
                        {"content", ""},
                        {"tool_calls", json(calls.begin(), calls.begin() + n)}};
      requests.push_back(RenderRequest(c.file, json::array({user}), tools));
      requests.push_back(
          RenderRequest(c.file, json::array({user, assistant}), tools));
      pending.push_back({&c, n});
    }
  }
  absl::StatusOr<std::vector<json>> answers = testing::RunReference(requests);
  ASSERT_TRUE(answers.ok()) << answers.status();
  for (size_t i = 0; i < pending.size(); ++i) {
    const auto& [c, n] = pending[i];
    const json& before = (*answers)[2 * i];
    const json& after = (*answers)[2 * i + 1];
    ASSERT_TRUE(before.value("ok", false)) << c->file << before.dump();
    ASSERT_TRUE(after.value("ok", false)) << c->file << after.dump();
    const std::string prefix = before["text"].get<std::string>() + c->header;
    const std::string turn = after["text"].get<std::string>();
    ASSERT_EQ(turn.substr(0, prefix.size()), prefix) << c->file;
    std::string output = turn.substr(prefix.size());
    output = output.substr(0, output.find(c->end));
    if (absl::StartsWith(output, "<think>")) {  // Qwen3's empty reasoning
      output.erase(0, output.find("</think>") + 8);
      output.erase(0, output.find_first_not_of(" \n"));
    }
    SCOPED_TRACE(c->file + ": " + output);
    const bool parallel = n > 1;

    const std::string required = Opening(c->syntax, ToolCallMode::kRequired);
    ASSERT_TRUE(absl::StartsWith(output, required));
    EXPECT_TRUE(Matches(Spec(c->syntax, ToolCallMode::kRequired, parallel),
                        output.substr(required.size())));
    EXPECT_TRUE(
        Matches(Spec(c->syntax, ToolCallMode::kAuto, parallel), output));
    if (parallel) {  // one call only without parallel
      EXPECT_FALSE(Matches(Spec(c->syntax, ToolCallMode::kRequired),
                           output.substr(required.size())));
      continue;
    }
    const std::string named = Opening(c->syntax, ToolCallMode::kNamed);
    if (absl::StrContains(output, "[CALL_ID]")) {
      // The named prefill writes no call id; the rest is the same.
      output.erase(output.find("[CALL_ID]"), 18);
    }
    ASSERT_TRUE(absl::StartsWith(output, named));
    EXPECT_TRUE(Matches(Spec(c->syntax, ToolCallMode::kNamed),
                        output.substr(named.size())));
  }
}

// Calls in each syntax, after the required opening: valid ones, then the
// same with bad arguments.
struct Calls {
  ToolCallSyntax syntax;
  std::string before;  // up to the arguments (the name included)
  std::string after;   // the call's closing
};

std::vector<Calls> Syntaxes() {
  using S = ToolCallSyntax;
  return {
      {S::kHermes, R"({"name": "get_weather", "arguments": )",
       "}\n</tool_call>"},
      {S::kLlama3, R"(get_weather", "parameters": )", "}"},
      {S::kMistral, R"([{"name": "get_weather", "arguments": )", "}]"},
      {S::kMistralArgs, "get_weather[ARGS]", ""},
  };
}

TEST(ToolCallGrammarTest, ArgumentsFollowTheSchema) {
  const std::vector<std::string> good = {
      R"({"city": "Paris"})",
      R"({"city": "Paris", "days": [1, 2, 3]})",
      R"({"days":[7],"city":"Oslo","opts":{"x":[true,null,1.5]}})",
  };
  const std::vector<std::string> bad = {
      R"({})",                                // city is required
      R"({"city": 5})",                       // not a string
      R"({"city": "Paris", "days": [1.5]})",  // not integers
      R"({"city": "Paris", "when": 1})",      // additionalProperties false
      R"({"city": "Paris",})",                // not JSON
      R"({"city": "Paris"  })",               // more than one space
      R"(["Paris"])",                         // not an object
      R"("Paris")",
  };
  for (const Calls& s : Syntaxes()) {
    SCOPED_TRACE(ToolCallSyntaxName(s.syntax));
    const ToolCallSpec required = Spec(s.syntax, ToolCallMode::kRequired);
    const ToolCallSpec named = Spec(s.syntax, ToolCallMode::kNamed);
    for (const std::string& args : good) {
      EXPECT_TRUE(Matches(required, s.before + args + s.after)) << args;
      EXPECT_TRUE(Matches(named, args + s.after)) << args;
    }
    for (const std::string& args : bad) {
      EXPECT_FALSE(Matches(required, s.before + args + s.after)) << args;
      EXPECT_FALSE(Matches(named, args + s.after)) << args;
    }
    // The closing is the syntax's own, and nothing follows it.
    const std::string call = s.before + good[0] + s.after;
    if (!s.after.empty()) {
      EXPECT_FALSE(Matches(required, s.before + good[0]));
    }
    EXPECT_FALSE(Matches(required, call + " "));
    EXPECT_FALSE(Matches(required, call + "\nHello"));
  }
}

TEST(ToolCallGrammarTest, NamesAreTheTools) {
  EXPECT_TRUE(Matches(Spec(ToolCallSyntax::kHermes, ToolCallMode::kRequired),
                      "{\"name\": \"get_time\", \"arguments\": "
                      "{\"tz\": \"UTC\"}}\n</tool_call>"));
  EXPECT_FALSE(Matches(Spec(ToolCallSyntax::kHermes, ToolCallMode::kRequired),
                       "{\"name\": \"get_date\", \"arguments\": "
                       "{}}\n</tool_call>"));
  EXPECT_FALSE(
      Matches(Spec(ToolCallSyntax::kMistralArgs, ToolCallMode::kRequired),
              "get_times[ARGS]{\"tz\": \"UTC\"}"));
  // get_time's schema has no `type`: held to an object.
  EXPECT_FALSE(Matches(Spec(ToolCallSyntax::kLlama3, ToolCallMode::kRequired),
                       "get_time\", \"parameters\": \"UTC\"}"));
}

TEST(ToolCallGrammarTest, ParallelCallsInEachSyntaxsWay) {
  const std::string weather = R"({"city": "Rome"})";
  const std::string time = R"({"tz": "UTC"})";
  const std::vector<std::pair<ToolCallSyntax, std::string>> cases = {
      {ToolCallSyntax::kHermes,
       absl::StrCat(R"({"name": "get_weather", "arguments": )", weather,
                    "}\n</tool_call>\n<tool_call>\n",
                    R"({"name": "get_time", "arguments": )", time,
                    "}\n</tool_call>")},
      {ToolCallSyntax::kMistral,
       absl::StrCat(R"([{"name": "get_weather", "arguments": )", weather,
                    R"(, "id": "a1b2c3d4e"}, {"name": "get_time", )",
                    R"("arguments": )", time, "}]")},
      {ToolCallSyntax::kMistralArgs,
       absl::StrCat("get_weather[CALL_ID]a1b2c3d4e[ARGS]", weather,
                    "[TOOL_CALLS]get_time[ARGS]", time)},
  };
  for (const auto& [syntax, text] : cases) {
    SCOPED_TRACE(ToolCallSyntaxName(syntax));
    EXPECT_TRUE(Matches(Spec(syntax, ToolCallMode::kRequired, true), text));
    EXPECT_FALSE(Matches(Spec(syntax, ToolCallMode::kRequired, false), text));
  }
  // Llama 3's templates take one call: parallel changes nothing.
  EXPECT_FALSE(
      Matches(Spec(ToolCallSyntax::kLlama3, ToolCallMode::kRequired, true),
              absl::StrCat(R"(get_time", "parameters": )", time,
                           R"(}; {"name": "get_time", )", R"("parameters": )",
                           time, "}")));
  // Mistral's id is 9 letters and digits.
  EXPECT_FALSE(Matches(Spec(ToolCallSyntax::kMistral, ToolCallMode::kRequired),
                       absl::StrCat(R"([{"name": "get_time", "arguments": )",
                                    time, R"(, "id": "short"}])")));
}

TEST(ToolCallGrammarTest, AutoStartsAtEachTrigger) {
  for (ToolCallSyntax syntax :
       {ToolCallSyntax::kHermes, ToolCallSyntax::kLlama3,
        ToolCallSyntax::kMistral, ToolCallSyntax::kMistralArgs}) {
    SCOPED_TRACE(ToolCallSyntaxName(syntax));
    std::shared_ptr<const CompiledGrammar> c =
        CompileSpec(Spec(syntax, ToolCallMode::kAuto));
    ASSERT_NE(c, nullptr);
    for (const CallTrigger& trigger : ToolCallTriggers(syntax)) {
      Matcher m(c);
      EXPECT_TRUE(m.AcceptBytes(trigger.text)) << trigger.text;
    }
  }
  EXPECT_TRUE(Matches(Spec(ToolCallSyntax::kLlama3, ToolCallMode::kAuto),
                      "<|python_tag|>{\"name\": \"get_time\", "
                      "\"parameters\": {\"tz\": \"UTC\"}}"));
}

TEST(ToolCallGrammarTest, SchemasHeldToAnObject) {
  ToolCallSpec spec = Spec(ToolCallSyntax::kHermes, ToolCallMode::kNamed);
  const std::string close = "}\n</tool_call>";
  spec.tools[0].parameters = "";
  EXPECT_TRUE(Matches(spec, R"({"any": [1, {"x": "y"}]})" + close));
  EXPECT_FALSE(Matches(spec, "[]" + close));
  spec.tools[0].parameters = R"({"type": ["object", "null"]})";
  EXPECT_TRUE(Matches(spec, "{}" + close));
  EXPECT_FALSE(Matches(spec, "null" + close));
  spec.tools[0].parameters = "true";
  EXPECT_TRUE(Matches(spec, "{}" + close));
  for (const char* bad : {R"({"type": "string"})", "false", "[1]", "{"}) {
    spec.tools[0].parameters = bad;
    absl::StatusOr<Grammar> g = ToolCallGrammar(ToolCallSpecText(spec));
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(g.status().message(),
                                  "tool 'get_weather' parameters: "))
        << g.status();
  }
}

TEST(ToolCallGrammarTest, StrictToolsRefuseWhatIsNotEnforced) {
  ToolCallSpec spec = Spec(ToolCallSyntax::kHermes, ToolCallMode::kNamed);
  spec.tools[0].parameters =
      R"({"type": "object", "properties": {"x": {"type": "array",
          "contains": {"type": "string"}}}})";
  spec.tools[0].strict = true;
  absl::StatusOr<Grammar> g = ToolCallGrammar(ToolCallSpecText(spec));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(g.status().message(), "'contains'"));
  EXPECT_TRUE(absl::StrContains(g.status().message(), "tool 'get_weather'"));
  // Not strict: any object.
  spec.tools[0].strict = false;
  EXPECT_TRUE(Matches(spec, R"({"x": [1], "y": 2})"
                            "}\n</tool_call>"));
}

TEST(ToolCallGrammarTest, MalformedSpecsAreInvalid) {
  ToolCallSpec spec = Spec(ToolCallSyntax::kHermes, ToolCallMode::kRequired);
  spec.tools.clear();
  EXPECT_FALSE(ToolCallGrammar(ToolCallSpecText(spec)).ok());
  spec = Spec(ToolCallSyntax::kHermes, ToolCallMode::kRequired);
  spec.mode = ToolCallMode::kNamed;  // two tools
  EXPECT_FALSE(ToolCallGrammar(ToolCallSpecText(spec)).ok());
  spec = Spec(ToolCallSyntax::kMistralArgs, ToolCallMode::kRequired);
  spec.tools[1].name = "get time";  // [TOOL_CALLS]get time[ARGS]: unparsed
  EXPECT_FALSE(ToolCallGrammar(ToolCallSpecText(spec)).ok());
  EXPECT_TRUE(
      ToolCallGrammar(
          absl::StrCat(R"({"syntax": "hermes", "mode": "required", "tools": )",
                       R"([{"name": "f"}]})"))
          .ok());
  for (const char* text :
       {"", "{}", R"({"syntax": "xml", "mode": "required", "tools": []})",
        R"({"syntax": "hermes", "mode": "often", "tools": [{"name": "f"}]})",
        R"({"syntax": "hermes", "mode": "required", "tools": [{}]})",
        R"({"syntax": "hermes", "mode": "required", "parallel": "yes",
            "tools": [{"name": "f"}]})",
        R"({"syntax": "hermes", "mode": "required",
            "tools": [{"name": "f", "strict": 1}]})"}) {
    EXPECT_EQ(ToolCallGrammar(text).status().code(),
              absl::StatusCode::kInvalidArgument)
        << text;
  }
  EXPECT_TRUE(ParseToolCallSyntax("mistral_args").ok());
  EXPECT_FALSE(ParseToolCallSyntax("none").ok());
}

TEST(ToolCallGrammarTest, SpecTextIsCanonical) {
  ToolCallSpec a = Spec(ToolCallSyntax::kMistral, ToolCallMode::kAuto, true);
  ToolCallSpec b = a;
  EXPECT_EQ(ToolCallSpecText(a), ToolCallSpecText(b));
  b.tools[1].strict = true;
  EXPECT_NE(ToolCallSpecText(a), ToolCallSpecText(b));
  b = a;
  b.parallel = false;
  EXPECT_NE(ToolCallSpecText(a), ToolCallSpecText(b));
}

// kMarkup with Qwen3-Coder's XML parameters (the server copies the markup
// from chat/tool_formats/call_writing.h; forced_call_test checks the
// families against their templates).
ToolCallSpec QwenSpec(ToolCallMode mode, bool parallel = false) {
  ToolCallSpec spec = Spec(ToolCallSyntax::kHermes, mode, parallel);
  spec.syntax = ToolCallSyntax::kMarkup;
  CallMarkup& m = spec.markup;
  m.xml = true;
  m.section_open = "<tool_call>";
  m.call_open = "<function=";
  m.name_end = ">";
  m.parameter_open = "<parameter=";
  m.parameter_key_end = ">";
  m.parameter_close = "</parameter>";
  m.call_close = "</function>";
  m.section_close = "</tool_call>";
  m.newlines = true;
  m.section_per_call = true;
  return spec;
}

std::string QwenCall(const std::string& city, const std::string& more = "") {
  return "get_weather>\n<parameter=city>\n" + city + "\n</parameter>\n" + more +
         "</function>\n</tool_call>";
}

TEST(MarkupTest, RawStringValuesStopAtTheFirstClosingMarker) {
  const ToolCallSpec spec = QwenSpec(ToolCallMode::kRequired);
  for (const std::string city :
       {"Paris", "", "<", "a < b", "</param", "</parameter", "x</", "<<</",
        "{\"json\": 1}", "3", "Zürich 日本", "line\nbreak"}) {
    EXPECT_TRUE(Matches(spec, QwenCall(city))) << city;
  }
  // The marker inside the value ends it; what follows is no call.
  EXPECT_FALSE(Matches(spec, QwenCall("a</parameter>b")));
  EXPECT_FALSE(Matches(spec, QwenCall("\xff")));  // not UTF-8
}

// Qwen's spec with the city's schema replaced by `city`.
ToolCallSpec QwenCity(const std::string& city, bool strict = true) {
  ToolCallSpec spec = QwenSpec(ToolCallMode::kRequired);
  spec.tools[0].parameters = R"({"type": "object", "properties": {"city": )" +
                             city + R"(}, "required": ["city"]})";
  spec.tools[0].strict = strict;
  return spec;
}

TEST(MarkupTest, RawStringValuesHoldTheirLengths) {
  const ToolCallSpec spec =
      QwenCity(R"({"type": "string", "minLength": 2, "maxLength": 4})");
  for (const std::string city : {"ab", "abcd", "日本語!", "a\nb", "<<"}) {
    EXPECT_EQ(Matches(spec, QwenCall(city)), city != "<<") << city;
  }
  for (const std::string city : {"", "a", "abcde", "日本語!?"}) {
    EXPECT_FALSE(Matches(spec, QwenCall(city))) << city;
  }
  // The parser drops one line break at each end: the value neither starts
  // nor ends with one, so that it keeps what was counted.
  EXPECT_TRUE(Matches(spec,
                      "get_weather>\n<parameter=city>abc"
                      "</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(spec, QwenCall("\nab")));
  EXPECT_FALSE(Matches(spec, QwenCall("ab\n")));
  // At the bound only the closing marker may follow: fast-forward writes it.
  std::shared_ptr<const CompiledGrammar> c = CompileSpec(spec);
  ASSERT_NE(c, nullptr);
  Matcher m(c);
  ASSERT_TRUE(m.AcceptBytes("get_weather>\n<parameter=city>\nab"));
  EXPECT_EQ(ForcedBytes(m), "");
  ASSERT_TRUE(m.AcceptBytes("日本"));
  EXPECT_EQ(ForcedBytes(m), "\n</parameter>");
}

TEST(MarkupTest, RawStringValuesHoldTheirPatternAndFormat) {
  ToolCallSpec spec =
      QwenCity(R"({"type": "string", "pattern": "^[A-Z]\\w+$"})");
  EXPECT_TRUE(Matches(spec, QwenCall("Paris")));
  EXPECT_FALSE(Matches(spec, QwenCall("paris")));
  EXPECT_FALSE(Matches(spec, QwenCall("Paris!")));
  spec = QwenCity(R"({"type": "string", "pattern": "ab"})");  // a search
  EXPECT_TRUE(Matches(spec, QwenCall("x ab y")));
  EXPECT_FALSE(Matches(spec, QwenCall("a b")));
  spec = QwenCity(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(Matches(spec, QwenCall("2024-02-29")));
  EXPECT_FALSE(Matches(spec, QwenCall("2023-02-29")));
  // Without gaps (GLM 4.7's way).
  spec = QwenCity(R"({"type": "string", "maxLength": 3})");
  spec.markup.newlines = false;
  EXPECT_TRUE(Matches(spec,
                      "get_weather><parameter=city>abc</parameter>"
                      "</function></tool_call>"));
  EXPECT_TRUE(Matches(spec,
                      "get_weather><parameter=city>a\nb</parameter>"
                      "</function></tool_call>"));
  EXPECT_FALSE(Matches(spec,
                       "get_weather><parameter=city>\nab\n</parameter>"
                       "</function></tool_call>"));
  // A pattern's value holds no line break.
  spec = QwenCity(R"({"type": "string", "pattern": "a"})");
  EXPECT_TRUE(Matches(spec, QwenCall("bab")));
  EXPECT_FALSE(Matches(spec, QwenCall("b\nab")));
}

// Without a "type", the parser reads a value as JSON unless it is a JSON
// string, else as the raw text: strings are written raw.
TEST(MarkupTest, UntypedEnumStringsAreWrittenRaw) {
  const ToolCallSpec spec = QwenCity(R"({"enum": ["c", "f", 1, "true"]})");
  EXPECT_TRUE(Matches(spec, QwenCall("c")));
  EXPECT_TRUE(Matches(spec, QwenCall("1")));
  EXPECT_FALSE(Matches(spec, QwenCall("\"c\"")));
  EXPECT_FALSE(Matches(spec, QwenCall("true")));  // reads back as a boolean
}

TEST(MarkupTest, RawStringKeywordsNotHeldAreRefusedWhenStrict) {
  for (const char* city :
       {R"({"type": "string", "format": "hostname"})",
        R"({"type": "string", "pattern": "a", "maxLength": 3})",
        R"x({"type": "string", "pattern": "(?=a)"})x",
        R"({"type": "string", "maxLength": -1})"}) {
    absl::StatusOr<Grammar> g =
        ToolCallGrammar(ToolCallSpecText(QwenCity(city)));
    EXPECT_FALSE(g.ok()) << city;
    EXPECT_TRUE(absl::StrContains(g.status().message(), "property 'city'"))
        << g.status();
    EXPECT_TRUE(absl::StrContains(g.status().message(), "tool 'get_weather'"))
        << g.status();
    // Not strict: any raw value.
    EXPECT_TRUE(Matches(QwenCity(city, false), QwenCall("any < thing")))
        << city;
  }
  absl::StatusOr<Grammar> g = ToolCallGrammar(ToolCallSpecText(
      QwenCity(R"({"type": "string", "format": "hostname"})")));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(g.status().message(), "'format'"));
}

TEST(MarkupTest, JsonValuesFollowTheirPropertysSchema) {
  const ToolCallSpec spec = QwenSpec(ToolCallMode::kRequired);
  const std::string days = "<parameter=days>\n[1, 2]\n</parameter>\n";
  EXPECT_TRUE(Matches(spec, QwenCall("Paris", days)));
  EXPECT_TRUE(Matches(spec, QwenCall("Paris",
                                     "<parameter=days>[3]"
                                     "</parameter>\n")));
  EXPECT_FALSE(Matches(spec, QwenCall("Paris",
                                      "<parameter=days>\n[1.5]\n"
                                      "</parameter>\n")));
  EXPECT_FALSE(Matches(spec, QwenCall("Paris",
                                      "<parameter=days>\nthree\n"
                                      "</parameter>\n")));
  // Only the schema's names, in its order; the required one present.
  EXPECT_FALSE(Matches(spec, QwenCall("Paris",
                                      "<parameter=when>\nnow\n"
                                      "</parameter>\n")));
  EXPECT_FALSE(
      Matches(spec, "get_weather>\n" + days + "</function>\n</tool_call>"));
  EXPECT_FALSE(Matches(spec, "get_wether>\n</function>\n</tool_call>"));
}

TEST(MarkupTest, ModesAndParallelCalls) {
  const std::string time =
      "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n"
      "</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(Matches(QwenSpec(ToolCallMode::kAuto),
                      "<tool_call>\n<function=" + QwenCall("Paris")));
  EXPECT_TRUE(Matches(QwenSpec(ToolCallMode::kRequired, true),
                      QwenCall("Paris") + "\n" + time));
  EXPECT_FALSE(Matches(QwenSpec(ToolCallMode::kRequired),
                       QwenCall("Paris") + "\n" + time));
  EXPECT_TRUE(Matches(QwenSpec(ToolCallMode::kNamed),
                      "<parameter=city>\nParis\n</parameter>\n"
                      "</function>\n</tool_call>"));
  const ToolCallSpec spec = QwenSpec(ToolCallMode::kAuto);
  EXPECT_EQ(ToolCallTriggers(spec).size(), 1u);
  EXPECT_EQ(ToolCallTriggers(spec)[0].text, "<tool_call>");
}

TEST(MarkupTest, TheSpecTextRoundTripsAndBadMarkupIsRefused) {
  ToolCallSpec spec = QwenSpec(ToolCallMode::kRequired);
  EXPECT_TRUE(ToolCallGrammar(ToolCallSpecText(spec)).ok());
  spec.markup.parameter_close = "<a<";  // its first byte again
  EXPECT_EQ(ToolCallGrammar(ToolCallSpecText(spec)).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec = QwenSpec(ToolCallMode::kRequired);
  spec.tools[0].name = "get weather";
  EXPECT_FALSE(ToolCallGrammar(ToolCallSpecText(spec)).ok());
  spec = QwenSpec(ToolCallMode::kRequired);
  spec.tools[0].parameters = R"({"properties": {"a>b": {}}})";
  EXPECT_FALSE(ToolCallGrammar(ToolCallSpecText(spec)).ok());
  EXPECT_FALSE(ParseToolCallSyntax("markup").ok());
}

}  // namespace
}  // namespace paceline::engine::grammar
