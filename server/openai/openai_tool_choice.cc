#include "server/openai/openai_tool_choice.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "chat/tool_formats/call_writing.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"

namespace paceline::server::openai {

absl::StatusOr<std::string> ToolCallPrefix(chat::ToolCallFormat format,
                                           ToolChoice choice,
                                           absl::string_view name,
                                           bool prompt_opened_calls) {
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
    default:  // the families: their writing, else no forced form
      if (std::optional<chat::CallWriting> w = chat::FindCallWriting(format)) {
        return chat::ForcedCallOpening(*w, named ? name : "",
                                       prompt_opened_calls);
      }
      break;
  }
  return InvalidParam(
      "tool_choice",
      "'tool_choice' \"required\" or a named function needs a model whose "
      "chat template has a tool-call format Paceline reads (see the "
      "README's tool-call formats); this one has none");
}

absl::Status ConstrainToolCalls(const std::vector<bool>& strict, bool parallel,
                                const OpenAiRequest& parsed,
                                v1::GenerateRequest* request) {
  const v1::Chat& chat = request->chat();
  if (chat.tools().empty() || parsed.tool_choice == ToolChoice::kNone) {
    return absl::OkStatus();
  }
  v1::SamplingOptions* sampling = request->mutable_sampling();
  v1::ToolCalls calls;
  calls.set_parallel(parallel);
  for (int i = 0; i < chat.tools_size(); ++i) {
    const v1::FunctionTool& f = chat.tools(i).function();
    if (parsed.tool_choice == ToolChoice::kNamed &&
        f.name() != parsed.tool_choice_name) {
      continue;
    }
    v1::ToolSchema* tool = calls.add_tools();
    tool->set_name(f.name());
    tool->set_parameters(f.parameters());
    tool->set_strict(static_cast<size_t>(i) < strict.size() && strict[i]);
  }
  if (parsed.tool_choice == ToolChoice::kNamed) {
    calls.set_mode(v1::ToolCalls::MODE_NAMED);
    calls.mutable_tools()->DeleteSubrange(1, calls.tools_size() - 1);
    calls.set_parallel(false);
  } else if (parsed.tool_choice == ToolChoice::kRequired) {
    calls.set_mode(v1::ToolCalls::MODE_REQUIRED);
  } else {
    if (std::find(strict.begin(), strict.end(), true) == strict.end()) {
      return absl::OkStatus();
    }
    if (sampling->has_constraint()) {
      return InvalidParam(
          "response_format",
          "a response format (response_format, structured_outputs, "
          "guided_*, json_schema, grammar) cannot be combined with strict "
          "tools under 'tool_choice' \"auto\": the server holds one "
          "constraint per request; set the tools' 'strict' to false or drop "
          "the format");
    }
    calls.set_mode(v1::ToolCalls::MODE_AUTO);
  }
  sampling->clear_constraint();
  *sampling->mutable_constraint()->mutable_tool_calls() = std::move(calls);
  return absl::OkStatus();
}

}  // namespace paceline::server::openai
