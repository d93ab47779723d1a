#include "chat/tool_formats/tool_call_format.h"

namespace paceline::chat {
namespace {

struct Named {
  ToolCallFormat format;
  absl::string_view name;
};

constexpr Named kNames[] = {
    {ToolCallFormat::kNone, "none"},
    {ToolCallFormat::kHermes, "hermes"},
    {ToolCallFormat::kLlama3, "llama3"},
    {ToolCallFormat::kMistral, "mistral"},
    {ToolCallFormat::kMistralArgs, "mistral_args"},
    {ToolCallFormat::kQwen3Coder, "qwen3_coder"},
    {ToolCallFormat::kSeedOss, "seed_oss"},
    {ToolCallFormat::kGlm, "glm"},
    {ToolCallFormat::kMiniMax, "minimax"},
    {ToolCallFormat::kDeepSeekDsml, "deepseek_dsml"},
    {ToolCallFormat::kDeepSeekV4, "deepseek_v4"},
    {ToolCallFormat::kMiniCpm, "minicpm"},
    {ToolCallFormat::kDeepSeekV31, "deepseek_v3_1"},
    {ToolCallFormat::kDeepSeekR1, "deepseek_r1"},
    {ToolCallFormat::kKimiK2, "kimi_k2"},
    {ToolCallFormat::kSolar, "solar"},
    {ToolCallFormat::kFunctionaryV31, "functionary_v3_1"},
    {ToolCallFormat::kFunctionaryV32, "functionary_v3_2"},
    {ToolCallFormat::kGranite, "granite"},
    {ToolCallFormat::kNemotronV2, "nemotron_v2"},
    {ToolCallFormat::kApriel, "apriel"},
    {ToolCallFormat::kFirefunction, "firefunction"},
    {ToolCallFormat::kCommandR7b, "command_r7b"},
    {ToolCallFormat::kCommandRPlus, "command_r_plus"},
    {ToolCallFormat::kHunyuan, "hunyuan"},
    {ToolCallFormat::kGigaChat, "gigachat"},
    {ToolCallFormat::kHarmony, "gpt_oss"},
};

}  // namespace

absl::string_view ToolCallFormatName(ToolCallFormat format) {
  for (const Named& n : kNames) {
    if (n.format == format) return n.name;
  }
  return "none";
}

std::optional<ToolCallFormat> ToolCallFormatFromName(absl::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.format;
  }
  return std::nullopt;
}

}  // namespace paceline::chat
