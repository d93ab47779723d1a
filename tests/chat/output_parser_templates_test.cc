// ChatOutputParser on the real templates of ../shared/chat_templates: the
// format each one's markers select, whether its prompt opens reasoning,
// and its own rendering of tool calls parsed back (jinja2 as the oracle).

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "chat/output_parser.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/chat/output_collect.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/chat_template_reference.h"
#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace paceline::chat {
namespace {

using chat_test::Collected;
using chat_test::ExpectArguments;
using chat_test::Format;
using chat_test::Parse;
using json = nlohmann::ordered_json;

const std::string kTemplates =
    ::paceline::testing::SharedPath("chat_templates/");

std::string ReadTemplate(const std::string& file) {
  std::string source = testing::ReadFile(kTemplates + file);
  EXPECT_FALSE(source.empty()) << file;
  return source;
}

TEST(ChatOutputFormatTest, DetectedFromTheTemplatesMarkers) {
  struct Case {
    std::string file;
    std::string reasoning_open;
    ToolCallFormat tools;
  };
  const std::vector<Case> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "", ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", "<think>", ToolCallFormat::kHermes},
      {"Qwen-QwQ-32B.jinja", "<think>", ToolCallFormat::kHermes},
      // XML parameters (`<function=...>`), JSON after `<function=NAME>`.
      {"Qwen3-Coder.jinja", "", ToolCallFormat::kQwen3Coder},
      {"Qwen3.5-4B.jinja", "<think>", ToolCallFormat::kQwen3Coder},
      {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "<think>",
       ToolCallFormat::kQwen3Coder},
      {"ByteDance-Seed-OSS.jinja", "<seed:think>", ToolCallFormat::kSeedOss},
      {"GLM-4.6.jinja", "<think>", ToolCallFormat::kGlm},
      {"MiniMax-M2.jinja", "<think>", ToolCallFormat::kMiniMax},
      {"deepseek-ai-DeepSeek-V3.2.jinja", "<think>",
       ToolCallFormat::kDeepSeekDsml},
      {"deepseek-ai-DeepSeek-V4.jinja", "<think>", ToolCallFormat::kDeepSeekV4},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "<think>",
       ToolCallFormat::kDeepSeekV31},
      {"moonshotai-Kimi-K2.jinja", "", ToolCallFormat::kKimiK2},
      {"openai-gpt-oss-120b.jinja", "", ToolCallFormat::kHarmony},
      {"meetkai-functionary-medium-v3.1.jinja", "",
       ToolCallFormat::kFunctionaryV31},
      {"meetkai-functionary-medium-v3.2.jinja", "",
       ToolCallFormat::kFunctionaryV32},
      {"ibm-granite-granite-3.3-2B-Instruct.jinja", "<think>",
       ToolCallFormat::kGranite},
      {"ibm-granite-granite-4.0.jinja", "", ToolCallFormat::kHermes},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
       "<|START_THINKING|>", ToolCallFormat::kCommandR7b},
      {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "",
       ToolCallFormat::kCommandRPlus},
      {"NVIDIA-Nemotron-Nano-v2.jinja", "<think>", ToolCallFormat::kNemotronV2},
      {"fireworks-ai-llama-3-firefunction-v2.jinja", "",
       ToolCallFormat::kFirefunction},
      {"tencent-Hy3.jinja", "<think:opensource>", ToolCallFormat::kHunyuan},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "",
       ToolCallFormat::kHermes},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "",
       ToolCallFormat::kHermes},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "<think>",
       ToolCallFormat::kDeepSeekR1},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<think>",
       ToolCallFormat::kDeepSeekR1},
      {"llama-cpp-deepseek-r1.jinja", "<think>", ToolCallFormat::kDeepSeekR1},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", "", ToolCallFormat::kLlama3},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", "", ToolCallFormat::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "",
       ToolCallFormat::kMistral},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "",
       ToolCallFormat::kMistralArgs},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "",
       ToolCallFormat::kMistralArgs},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "[THINK]",
       ToolCallFormat::kMistralArgs},
      {"google-gemma-2-2b-it.jinja", "", ToolCallFormat::kNone},
  };
  for (const Case& c : cases) {
    ChatOutputFormat format = DetectChatOutputFormat(ReadTemplate(c.file));
    EXPECT_EQ(format.reasoning_open, c.reasoning_open) << c.file;
    EXPECT_EQ(format.reasoning_close.empty(), c.reasoning_open.empty());
    EXPECT_EQ(ToolCallFormatName(format.tool_calls),
              ToolCallFormatName(c.tools))
        << c.file;
    EXPECT_FALSE(format.starts_in_reasoning);
  }
}

// Renders each request with the jinja2 reference, in one process.
std::vector<json> RenderReference(const std::vector<json>& requests) {
  absl::StatusOr<std::vector<json>> answers = testing::RunReference(requests);
  EXPECT_TRUE(answers.ok()) << answers.status();
  if (!answers.ok()) return std::vector<json>(requests.size());
  return *std::move(answers);
}

json RenderRequest(const std::string& file, json messages, bool generation,
                   json extra = json::object()) {
  json context = {{"messages", std::move(messages)},
                  {"add_generation_prompt", generation},
                  {"bos_token", "<s>"},
                  {"eos_token", "</s>"}};
  context.update(extra);
  return {{"template", ReadTemplate(file)}, {"context", context}};
}

TEST(ChatOutputFormatTest, PromptOpensReasoningOnRenderedPrompts) {
  struct Case {
    std::string file;
    json variables;
    bool opens;
    bool closes = false;  // an empty block: thinking off
  };
  const std::vector<Case> cases = {
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", json::object(), true},
      {"llama-cpp-deepseek-r1.jinja", json::object(), true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
       {{"enable_thinking", true}},
       true},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", json::object(), false,
       true},
      {"Qwen-QwQ-32B.jinja", {{"enable_thinking", true}}, true},
      {"Qwen-QwQ-32B.jinja", {{"enable_thinking", false}}, false, true},
      {"Qwen-Qwen3-0.6B.jinja", json::object(), false},
      {"Qwen-Qwen3-0.6B.jinja", {{"enable_thinking", false}}, false, true},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", json::object(), false},
  };
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  std::vector<json> requests;
  for (const Case& c : cases) {
    requests.push_back(RenderRequest(c.file, messages, true, c.variables));
  }
  std::vector<json> answers = RenderReference(requests);
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(answers[i].value("ok", false)) << cases[i].file;
    ChatOutputFormat format =
        DetectChatOutputFormat(ReadTemplate(cases[i].file));
    EXPECT_EQ(
        PromptOpensReasoning(answers[i]["text"].get<std::string>(), format),
        cases[i].opens)
        << cases[i].file << " " << cases[i].variables.dump();
    EXPECT_EQ(
        PromptClosesReasoning(answers[i]["text"].get<std::string>(), format),
        cases[i].closes)
        << cases[i].file << " " << cases[i].variables.dump();
  }
  ChatOutputFormat think = Format(ToolCallFormat::kNone, true);
  EXPECT_TRUE(PromptOpensReasoning("x<think> \n", think));
  EXPECT_FALSE(PromptOpensReasoning("<think>x", think));
  EXPECT_FALSE(PromptOpensReasoning("x<think>\n", ChatOutputFormat()));
  EXPECT_TRUE(PromptClosesReasoning("<think>\n\n</think>\n\n", think));
  EXPECT_FALSE(PromptClosesReasoning("</think>x", think));
}

// The oracle for the call formats: what a template renders for an
// assistant turn with tool calls is the text the model was trained to
// write. Parsing it must give back the turn's calls.
TEST(ChatOutputFormatTest, RoundTripThroughTheTemplates) {
  struct Case {
    std::string file;
    std::string header;  // the assistant turn's opening
    std::string end;     // what ends the turn
    int max_calls;
  };
  const std::string im = "<|im_start|>assistant\n";
  const std::string llama = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const std::vector<Case> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", im, "<|im_end|>", 2},
      {"Qwen-Qwen3-0.6B.jinja", im, "<|im_end|>", 2},
      {"Qwen-QwQ-32B.jinja", im, "<|im_end|>", 2},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", im, "<|im_end|>",
       2},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", im, "<|im_end|>",
       2},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", llama, "<|eot_id|>", 1},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", llama, "<|eot_id|>", 1},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", llama, "<|eot_id|>", 1},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "", "</s>", 2},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", "", "</s>", 2},
      {"unsloth-mistral-Devstral-Small-2507.jinja", "", "</s>", 2},
      {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", "", "</s>", 2},
  };
  const json calls = json::parse(R"([
    {"id": "abcDEF123", "type": "function", "function": {
      "name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2],
      "opts": {"unit": "°C \"metric\"", "deep": [{"a": null}]}}}},
    {"id": "xyz987QWE", "type": "function", "function": {
      "name": "get_time", "arguments": {"tz": "Europe/Paris"}}}])");
  const json tools = json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}}])");
  const json user = {{"role", "user"}, {"content", "Weather?"}};
  const std::string said = "Let me look.";
  const std::string thought = "Need the weather.";

  struct Pending {
    const Case* c;
    int n;
  };
  std::vector<Pending> pending;
  std::vector<json> requests;
  for (const Case& c : cases) {
    for (int n = 1; n <= c.max_calls; ++n) {
      json assistant = {{"role", "assistant"},
                        {"content", said},
                        {"reasoning_content", thought},
                        {"tool_calls", json(calls.begin(), calls.begin() + n)}};
      requests.push_back(RenderRequest(c.file, json::array({user}), false,
                                       {{"tools", tools}}));
      requests.push_back(RenderRequest(c.file, json::array({user, assistant}),
                                       false, {{"tools", tools}}));
      pending.push_back({&c, n});
    }
  }
  std::vector<json> answers = RenderReference(requests);
  for (size_t i = 0; i < pending.size(); ++i) {
    const Case& c = *pending[i].c;
    const json& before = answers[2 * i];
    const json& after = answers[2 * i + 1];
    ASSERT_TRUE(before.value("ok", false)) << c.file << before.dump();
    ASSERT_TRUE(after.value("ok", false)) << c.file << after.dump();
    std::string prefix = before["text"].get<std::string>() + c.header;
    std::string turn = after["text"].get<std::string>();
    ASSERT_EQ(turn.substr(0, prefix.size()), prefix) << c.file;
    std::string output = turn.substr(prefix.size());
    output = output.substr(0, output.find(c.end));
    SCOPED_TRACE(c.file + ": " + output);

    ChatOutputFormat format = DetectChatOutputFormat(ReadTemplate(c.file));
    Collected got = Parse(format, output);
    // The template may leave the turn's text or reasoning out.
    EXPECT_EQ(got.content, absl::StrContains(output, said) ? said : "");
    EXPECT_EQ(got.reasoning, absl::StrContains(output, thought) ? thought : "");
    ASSERT_EQ(got.calls.size(), static_cast<size_t>(pending[i].n));
    for (int k = 0; k < pending[i].n; ++k) {
      const json& function = calls[k]["function"];
      EXPECT_EQ(got.calls[k].name, function["name"].get<std::string>());
      ExpectArguments(got.calls[k], function["arguments"].dump());
      if (absl::StrContains(output, "[CALL_ID]")) {
        EXPECT_EQ(got.calls[k].id, calls[k]["id"].get<std::string>());
      }
    }
    EXPECT_TRUE(got.broken.empty());
    EXPECT_TRUE(got.saw_tool_calls);
  }
}

}  // namespace
}  // namespace paceline::chat
