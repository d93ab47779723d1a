#include "server/openai/openai_tool_choice.h"

#include "absl/strings/str_cat.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"

namespace paceline::server::openai {

absl::StatusOr<std::string> ToolCallPrefix(chat::ToolCallFormat format,
                                           ToolChoice choice,
                                           absl::string_view name) {
  if (choice == ToolChoice::kAuto || choice == ToolChoice::kNone) return "";
  const bool named = choice == ToolChoice::kNamed;
  // The name as a JSON string, quotes included.
  const std::string quoted = Dump(Json(std::string(name)));
  switch (format) {
    case chat::ToolCallFormat::kHermes:
      return named ? absl::StrCat("<tool_call>\n{\"name\": ", quoted,
                                  ", \"arguments\": ")
                   : std::string("<tool_call>\n");
    case chat::ToolCallFormat::kLlama3:
      return named ? absl::StrCat("{\"name\": ", quoted, ", \"parameters\": ")
                   : std::string("{\"name\": \"");
    case chat::ToolCallFormat::kMistral:
      return named ? absl::StrCat("[TOOL_CALLS][{\"name\": ", quoted,
                                  ", \"arguments\": ")
                   : std::string("[TOOL_CALLS]");
    case chat::ToolCallFormat::kMistralArgs:
      return named ? absl::StrCat("[TOOL_CALLS]", name, "[ARGS]")
                   : std::string("[TOOL_CALLS]");
    case chat::ToolCallFormat::kNone:
      break;
  }
  return InvalidParam(
      "tool_choice",
      "'tool_choice' \"required\" or a named function needs a model whose "
      "chat template has a tool-call format Paceline parses (Hermes/Qwen, "
      "Llama 3.x, Mistral); this one has none");
}

}  // namespace paceline::server::openai
