#include "server/openai/openai_chat_fields.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/openai/openai_error.h"

namespace paceline::server::openai {

absl::Status NotSupported(absl::string_view param, absl::string_view what) {
  return InvalidParam(
      param, absl::StrCat("'", param, "': ", what, " is not supported"));
}

absl::Status ToolChoiceMode(const Json& choice, v1::Chat* chat,
                            OpenAiRequest* out) {
  if (!choice.is_string()) return AsString(choice, "tool_choice").status();
  const std::string& mode = choice.get_ref<const std::string&>();
  if (mode == "auto") {
    out->tool_choice = ToolChoice::kAuto;
  } else if (mode == "none") {
    out->tool_choice = ToolChoice::kNone;
    chat->clear_tools();
  } else if (mode == "required") {
    if (chat->tools().empty()) {
      return InvalidParam("tool_choice",
                          "'tool_choice' \"required\" needs 'tools'");
    }
    out->tool_choice = ToolChoice::kRequired;
  } else {
    return InvalidParam(
        "tool_choice", absl::StrCat("'tool_choice' must be \"none\", \"auto\", "
                                    "\"required\" or a named function, got \"",
                                    mode, "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ParallelToolCalls(const Json& body) {
  const Json* v = Find(body, "parallel_tool_calls");
  if (v == nullptr) return true;
  return AsBool(*v, "parallel_tool_calls");
}

absl::Status TemplateOptions(const Json& body, v1::Chat* chat) {
  if (const Json* kwargs = Find(body, "chat_template_kwargs")) {
    RETURN_IF_ERROR(ExpectObject(*kwargs, "chat_template_kwargs"));
    for (const auto& [key, value] : kwargs->items()) {
      (*chat->mutable_template_kwargs())[key] = Dump(value);
    }
  }
  if (const Json* v = Find(body, "add_generation_prompt")) {
    ASSIGN_OR_RETURN(const bool add, AsBool(*v, "add_generation_prompt"));
    chat->set_add_generation_prompt(add);
  }
  return absl::OkStatus();
}

absl::Status ReadTools(const Json& body, ToolReader read, v1::Chat* chat,
                       std::vector<bool>* strict) {
  const Json* tools = Find(body, "tools");
  if (tools == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectArray(*tools, "tools"));
  for (size_t i = 0; i < tools->size(); ++i) {
    bool one = false;
    RETURN_IF_ERROR(
        read((*tools)[i], Index("tools", i), chat->add_tools(), &one));
    strict->push_back(one);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> StrictFlag(const Json& tool, absl::string_view param) {
  const Json* v = Find(tool, "strict");
  if (v == nullptr) return false;
  return AsBool(*v, Member(param, "strict"));
}

absl::Status ChooseNamedTool(const v1::Chat& chat, std::string name,
                             absl::string_view param, OpenAiRequest* out) {
  for (const v1::Tool& tool : chat.tools()) {
    if (tool.function().name() == name) {
      out->tool_choice = ToolChoice::kNamed;
      out->tool_choice_name = std::move(name);
      return absl::OkStatus();
    }
  }
  return InvalidParam(param, absl::StrCat("'", param, "' names \"", name,
                                          "\", which is not in 'tools'"));
}

}  // namespace paceline::server::openai
