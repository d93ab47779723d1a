// `paceline chat-template`: flags and input errors, and the rendered text
// against jinja2 (tests/testing/jinja2_reference.py, run here).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "chat/chat_template.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/build_paths.h"
#include "tests/testing/chat_template_reference.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/run_command.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

const std::string kChatTemplates =
    ::paceline::testing::SharedPath("chat_templates");

// A ChatML-like template of our own: roles, content as text or parts, tool
// calls, a generation prompt, bos_token.
constexpr char kOwnTemplate[] =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.content is string %}{{ m.content }}"
    "{% elif m.content is not none %}"
    "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}"
    "{% for c in m.tool_calls | default([]) %}<call>{{ c.function.name }} "
    "{{ c.function.arguments | tojson }}</call>{% endfor %}"
    "<|im_end|>\n{% endfor %}"
    "{% if tools %}tools: {{ tools | map(attribute='function.name') | "
    "join(', ') }}\n{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "<think></think>{% endif %}";

constexpr char kMessages[] = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Héllo, 世界"},
  {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
    "function": {"name": "f", "arguments": {"x": [1, 2]}}}]},
  {"role": "user", "content": [{"type": "text", "text": "again"}]}
])";

// jinja2's rendering of `source` with `context`: {"ok": true, "text": ...}
// or {"ok": false, "error": ...}.
Json Reference(const std::string& source, const Json& context) {
  absl::StatusOr<Json> answer = ::paceline::testing::RunReference(
      Json{{"template", source}, {"context", context}});
  EXPECT_TRUE(answer.ok()) << answer.status();
  return answer.ok() ? *answer
                     : Json{{"ok", false},
                            {"error", std::string(answer.status().message())}};
}

std::string ReadShared(const std::string& name) {
  const std::string text = ReadFile(kChatTemplates + "/" + name);
  EXPECT_FALSE(text.empty()) << name;
  return text;
}

// A conversation of shared/chat_templates/conversations.json by name; its
// keys other than `name` are the template's variables.
Json SharedConversation(const std::string& name) {
  const Json all = Json::parse(ReadShared("conversations.json"), nullptr,
                               /*allow_exceptions=*/false);
  for (const Json& c : all) {
    if (c.value("name", "") == name) {
      Json vars = c;
      vars.erase("name");
      return vars;
    }
  }
  ADD_FAILURE() << "no conversation " << name;
  return Json::object();
}

std::vector<std::string> Args(std::vector<std::string> args) {
  args.insert(args.begin(), "chat-template");
  return args;
}

TEST(ChatTemplateCommandTest, HelpExitsZero) {
  const CommandResult r = RunPaceline(Args({"--help"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("usage: paceline chat-template"));
}

TEST(ChatTemplateCommandTest, UsageErrors) {
  const std::string messages = WriteFile("m.json", kMessages);
  const std::string tmpl = WriteFile("t.jinja", kOwnTemplate);
  const std::vector<std::vector<std::string>> cases = {
      {"--messages", messages},                                  // no template
      {"--template", tmpl},                                      // no messages
      {"--template", tmpl, "--messages", messages, "--tokens"},  // no model
      {"--template", tmpl, "--messages", messages, "--now", "noon"},
      {"--template", tmpl, "--messages", messages, "extra"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args.back());
    const CommandResult r = RunPaceline(Args(args));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("usage: paceline chat-template"));
    EXPECT_THAT(r.out, IsEmpty());
  }
}

TEST(ChatTemplateCommandTest, BadJsonNamesTheFileAndPosition) {
  const std::string tmpl = WriteFile("t.jinja", kOwnTemplate);
  const std::string bad = WriteFile("bad.json", "[{\"role\": \"user\",\n  x]");
  const CommandResult r =
      RunPaceline(Args({"--template", tmpl, "--messages", bad}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("paceline chat-template: error: " + bad +
                                ": parse error at line 2, column 3"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(ChatTemplateCommandTest, BadVarAndShapeErrors) {
  const std::string tmpl = WriteFile("t.jinja", kOwnTemplate);
  const std::string messages = WriteFile("m.json", kMessages);
  const std::string object = WriteFile("o.json", "{\"tools\": []}");
  const CommandResult bad_var = RunPaceline(
      Args({"--template", tmpl, "--messages", messages, "--var", "x={\"a\":"}));
  EXPECT_EQ(bad_var.exit_code, 1);
  EXPECT_THAT(bad_var.err, HasSubstr("--var x: parse error at line 1"));
  const CommandResult no_name = RunPaceline(
      Args({"--template", tmpl, "--messages", messages, "--var", "=1"}));
  EXPECT_EQ(no_name.exit_code, 1);
  EXPECT_THAT(no_name.err, HasSubstr("--var wants NAME=VALUE"));
  const CommandResult no_messages =
      RunPaceline(Args({"--template", tmpl, "--messages", object}));
  EXPECT_EQ(no_messages.exit_code, 1);
  EXPECT_THAT(no_messages.err, HasSubstr("has no array \"messages\""));
  const CommandResult missing = RunPaceline(
      Args({"--template", "/nonexistent.jinja", "--messages", messages}));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent.jinja"));
}

TEST(ChatTemplateCommandTest, ModelWithoutTemplateSaysSo) {
  if (!HaveStories260K()) GTEST_SKIP() << "no " << kStories260KPath;
  const std::string messages = WriteFile("m.json", kMessages);
  const CommandResult r =
      RunPaceline(Args({"--model", kStories260KPath, "--messages", messages}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("has no tokenizer.chat_template; give one "
                               "with --template FILE"));
}

TEST(ChatTemplateCommandTest, SyntaxErrorNamesLineAndColumn) {
  const std::string tmpl = WriteFile("t.jinja", "ok\n{% for m in messages %}");
  const std::string messages = WriteFile("m.json", kMessages);
  const CommandResult r =
      RunPaceline(Args({"--template", tmpl, "--messages", messages}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("paceline chat-template: error: " + tmpl +
                                ": chat template: line "));
  EXPECT_THAT(r.err, HasSubstr("column"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(ChatTemplateCommandTest, RaiseExceptionMessageIsShown) {
  const std::string tmpl =
      WriteFile("t.jinja",
                "{% if not messages %}{{ raise_exception('nothing to say') "
                "}}{% endif %}");
  const std::string messages = WriteFile("m.json", "[]");
  const CommandResult r =
      RunPaceline(Args({"--template", tmpl, "--messages", messages}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("nothing to say"));
}

TEST(ChatTemplateCommandTest, OwnTemplateMatchesJinja2) {
  const std::string tmpl = WriteFile("t.jinja", kOwnTemplate);
  const std::string messages = WriteFile("m.json", kMessages);
  Json context = {{"bos_token", ""}, {"eos_token", ""}};
  context["messages"] = Json::parse(kMessages);
  context["add_generation_prompt"] = true;
  const Json expected = Reference(kOwnTemplate, context);
  ASSERT_TRUE(expected.value("ok", false)) << expected.dump();
  const CommandResult r =
      RunPaceline(Args({"--template", tmpl, "--messages", messages}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected["text"].get<std::string>());
}

TEST(ChatTemplateCommandTest, FlagsAndVarsReachTheTemplate) {
  const std::string tmpl = WriteFile("t.jinja", kOwnTemplate);
  const Json tools = Json::parse(
      R"([{"type": "function", "function": {"name": "get_time"}}])");
  const std::string tools_file = WriteFile("tools.json", tools.dump());
  // An object file: messages plus a variable the --var overrides.
  Json file = {{"messages", Json::parse(kMessages)}, {"enable_thinking", true}};
  const std::string messages = WriteFile("o.json", file.dump());
  Json context = {{"bos_token", "<s>"}, {"eos_token", ""}};
  context["messages"] = file["messages"];
  context["enable_thinking"] = false;
  context["tools"] = tools;
  context["add_generation_prompt"] = false;
  const Json expected = Reference(kOwnTemplate, context);
  ASSERT_TRUE(expected.value("ok", false)) << expected.dump();
  const CommandResult r =
      RunPaceline(Args({"--template", tmpl, "--messages", messages, "--tools",
                        tools_file, "--no-generation-prompt", "--var",
                        "enable_thinking=false", "--var", "bos_token=<s>"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected["text"].get<std::string>());
}

// A real template that formats strftime_now (Llama 3.2), with --now at the
// reference's fixed date, and one with tools and reasoning (Qwen3).
TEST(ChatTemplateCommandTest, SharedTemplatesMatchJinja2) {
  struct Case {
    std::string file, conversation;
  };
  for (const Case& c :
       {Case{"meta-llama-Llama-3.2-3B-Instruct.jinja", "multi-turn"},
        Case{"Qwen-Qwen3-0.6B.jinja", "tool-call-round-trip"}}) {
    SCOPED_TRACE(c.file + " / " + c.conversation);
    const std::string source = ReadShared(c.file);
    Json context = SharedConversation(c.conversation);
    context["bos_token"] = "<|begin_of_text|>";
    context["eos_token"] = "<|eot_id|>";
    const Json expected = Reference(source, context);
    ASSERT_TRUE(expected.value("ok", false)) << expected.dump();
    const std::string messages = WriteFile("c.json", context.dump());
    const CommandResult r = RunPaceline(
        Args({"--template", kChatTemplates + "/" + c.file, "--messages",
              messages, "--now", "2026-01-15T12:00:00Z"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected["text"].get<std::string>());
  }
}

constexpr char kToolUseTemplate[] =
    "tools: {% for t in tools %}{{ t.function.name }} {% endfor %}";

// A model file of our own: an SPM vocabulary with ChatML control tokens,
// and the template (plus a tool-use variant) in its metadata.
std::string WriteChatModel() {
  GgufBuilder b;
  b.Add("general.architecture", Str("llama"));
  b.Add("tokenizer.ggml.model", Str("llama"));
  const std::vector<std::string> tokens = {"<unk>",      "<s>",
                                           "</s>",       "<|im_start|>",
                                           "<|im_end|>", "\xe2\x96\x81",
                                           "a",          "b",
                                           "u",          "s",
                                           "e",          "r",
                                           "\n"};
  b.Add("tokenizer.ggml.tokens", StrArray(tokens));
  std::vector<float> scores(tokens.size(), 0.0f);
  b.Add("tokenizer.ggml.scores", F32Array(scores));
  std::vector<int32_t> types(tokens.size(), 1);  // normal
  types[0] = 2;                                  // unknown
  for (int i = 1; i <= 4; ++i) types[i] = 3;     // control
  b.Add("tokenizer.ggml.token_type", I32Array(types));
  b.Add("tokenizer.chat_template", Str(kOwnTemplate));
  b.Add("tokenizer.chat_template.tool_use", Str(kToolUseTemplate));
  return WriteFile("chat_model.gguf", b.Build());
}

TEST(ChatTemplateCommandTest, ModelTemplateTokensAndToolUseVariant) {
  const std::string model = WriteChatModel();
  const std::string messages =
      WriteFile("m.json", R"([{"role": "user", "content": "ab"}])");
  Json context = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  context["messages"] = Json::parse(R"([{"role": "user", "content": "ab"}])");
  context["add_generation_prompt"] = true;
  const Json expected = Reference(kOwnTemplate, context);
  ASSERT_TRUE(expected.value("ok", false)) << expected.dump();

  const CommandResult text =
      RunPaceline(Args({"--model", model, "--messages", messages}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out, expected["text"].get<std::string>());

  // The template wrote bos_token: one BOS, control tokens as single ids.
  const CommandResult ids =
      RunPaceline(Args({"--model", model, "--messages", messages, "--tokens"}));
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  ASSERT_THAT(ids.out, ::testing::EndsWith("\n"));
  const std::vector<std::string> words = absl::StrSplit(
      absl::string_view(ids.out).substr(0, ids.out.size() - 1), ' ');
  ASSERT_GE(words.size(), 4u);
  EXPECT_EQ(words[0], "1");
  EXPECT_EQ(words[1], "3");
  EXPECT_EQ(std::count(words.begin(), words.end(), "1"), 1);
  EXPECT_EQ(std::count(words.begin(), words.end(), "3"), 2);
  EXPECT_EQ(std::count(words.begin(), words.end(), "4"), 1);

  // With tools, the tool-use variant.
  context["tools"] =
      Json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  const Json expected_tools = Reference(kToolUseTemplate, context);
  ASSERT_TRUE(expected_tools.value("ok", false)) << expected_tools.dump();
  const std::string tools = WriteFile("tools.json", context["tools"].dump());
  const CommandResult tool_use = RunPaceline(
      Args({"--model", model, "--messages", messages, "--tools", tools}));
  ASSERT_EQ(tool_use.exit_code, 0) << tool_use.err;
  EXPECT_EQ(tool_use.out, expected_tools["text"].get<std::string>());
}

}  // namespace
}  // namespace paceline::testing
