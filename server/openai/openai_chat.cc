// ParseChatCompletionRequest: messages, tools, tool_choice and the template
// variables (openai_request.h has the facts and their sources).
#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/openai/openai_chat_fields.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_options.h"
#include "server/openai/openai_request.h"
#include "server/openai/openai_tool_choice.h"

namespace paceline::server::openai {
namespace {

// content: string | [{type: "text", text}] | null.
absl::Status Content(const Json& message, absl::string_view param,
                     v1::ChatMessage* out) {
  const Json* content = Find(message, "content");
  if (content == nullptr) return absl::OkStatus();
  const std::string field = Member(param, "content");
  if (content->is_string()) {
    out->set_content(content->get<std::string>());
    return absl::OkStatus();
  }
  if (!content->is_array()) {
    return InvalidParam(field, absl::StrCat("'", field,
                                            "' must be a string "
                                            "or an array of parts, got ",
                                            TypeName(*content)));
  }
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string p = Index(field, i);
    RETURN_IF_ERROR(ExpectObject(part, p));
    std::string type;
    RETURN_IF_ERROR(RequiredString(part, "type", p, &type));
    if (type != "text") {
      return NotSupported(Member(p, "type"), absl::StrCat("\"", type, "\""));
    }
    v1::ContentPart* out_part = out->add_content_parts();
    out_part->set_type("text");
    const Json* text = Find(part, "text");
    if (text == nullptr) {
      return InvalidParam(
          Member(p, "text"),
          absl::StrCat("'", Member(p, "text"), "' is required"));
    }
    ASSIGN_OR_RETURN(*out_part->mutable_text(),
                     AsString(*text, Member(p, "text")));
  }
  return absl::OkStatus();
}

// A call's arguments are JSON text; an object (which some clients send) is
// serialized.
absl::Status ToolCall(const Json& call, absl::string_view param,
                      v1::ToolCall* out) {
  RETURN_IF_ERROR(ExpectObject(call, param));
  RETURN_IF_ERROR(OptionalString(call, "id", param, out->mutable_id()));
  out->set_type("function");
  RETURN_IF_ERROR(OptionalString(call, "type", param, out->mutable_type()));
  if (out->type() != "function") {
    return NotSupported(Member(param, "type"),
                        absl::StrCat("\"", out->type(), "\""));
  }
  const std::string fparam = Member(param, "function");
  const Json* function = Find(call, "function");
  if (function == nullptr) {
    return InvalidParam(fparam, absl::StrCat("'", fparam, "' is required"));
  }
  RETURN_IF_ERROR(ExpectObject(*function, fparam));
  v1::FunctionCall* f = out->mutable_function();
  RETURN_IF_ERROR(RequiredString(*function, "name", fparam, f->mutable_name()));
  if (const Json* args = Find(*function, "arguments")) {
    if (args->is_object()) {
      f->set_arguments(Dump(*args));
    } else {
      ASSIGN_OR_RETURN(*f->mutable_arguments(),
                       AsString(*args, Member(fparam, "arguments")));
    }
  }
  return absl::OkStatus();
}

absl::Status Message(const Json& message, absl::string_view param,
                     v1::ChatMessage* out) {
  RETURN_IF_ERROR(ExpectObject(message, param));
  RETURN_IF_ERROR(RequiredString(message, "role", param, out->mutable_role()));
  // OpenAI's roles (ChatCompletionMessageParam's union).
  static constexpr absl::string_view kRoles[] = {
      "system", "developer", "user", "assistant", "tool", "function"};
  if (std::find(std::begin(kRoles), std::end(kRoles), out->role()) ==
      std::end(kRoles)) {
    const std::string role_param = Member(param, "role");
    return InvalidParam(role_param,
                        absl::StrCat("'", role_param,
                                     "' must be one of system, developer, "
                                     "user, assistant, tool, function; got \"",
                                     out->role(), "\""));
  }
  RETURN_IF_ERROR(Content(message, param, out));
  RETURN_IF_ERROR(OptionalString(message, "name", param, out->mutable_name()));
  RETURN_IF_ERROR(OptionalString(message, "tool_call_id", param,
                                 out->mutable_tool_call_id()));
  if (const Json* r = Find(message, "reasoning_content")) {
    ASSIGN_OR_RETURN(*out->mutable_reasoning_content(),
                     AsString(*r, Member(param, "reasoning_content")));
  }
  if (const Json* calls = Find(message, "tool_calls")) {
    const std::string cparam = Member(param, "tool_calls");
    RETURN_IF_ERROR(ExpectArray(*calls, cparam));
    for (size_t i = 0; i < calls->size(); ++i) {
      RETURN_IF_ERROR(
          ToolCall((*calls)[i], Index(cparam, i), out->add_tool_calls()));
    }
  }
  return absl::OkStatus();
}

absl::Status Messages(const Json& body, v1::Chat* chat) {
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) {
    return InvalidParam("messages", "'messages' is required");
  }
  RETURN_IF_ERROR(ExpectArray(*messages, "messages"));
  if (messages->empty()) {
    return InvalidParam("messages", "'messages' is empty");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    RETURN_IF_ERROR(
        Message((*messages)[i], Index("messages", i), chat->add_messages()));
  }
  return absl::OkStatus();
}

// {type: "function", function: {name, description?, parameters?,
// strict?}}; parameters (a JSON Schema object) are kept as JSON text.
absl::Status Tool(const Json& tool, absl::string_view param, v1::Tool* out,
                  bool* strict) {
  RETURN_IF_ERROR(ExpectObject(tool, param));
  RETURN_IF_ERROR(RequiredString(tool, "type", param, out->mutable_type()));
  if (out->type() != "function") {
    return NotSupported(Member(param, "type"),
                        absl::StrCat("\"", out->type(), "\""));
  }
  const std::string fparam = Member(param, "function");
  const Json* function = Find(tool, "function");
  if (function == nullptr) {
    return InvalidParam(fparam, absl::StrCat("'", fparam, "' is required"));
  }
  RETURN_IF_ERROR(ExpectObject(*function, fparam));
  v1::FunctionTool* f = out->mutable_function();
  RETURN_IF_ERROR(RequiredString(*function, "name", fparam, f->mutable_name()));
  RETURN_IF_ERROR(OptionalString(*function, "description", fparam,
                                 f->mutable_description()));
  if (const Json* schema = Find(*function, "parameters")) {
    RETURN_IF_ERROR(ExpectObject(*schema, Member(fparam, "parameters")));
    f->set_parameters(Dump(*schema));
  }
  ASSIGN_OR_RETURN(*strict, StrictFlag(*function, fparam));
  return absl::OkStatus();
}

absl::Status NamedChoice(const Json& choice, const v1::Chat& chat,
                         OpenAiRequest* out) {
  std::string type;
  RETURN_IF_ERROR(RequiredString(choice, "type", "tool_choice", &type));
  if (type != "function") {
    return NotSupported("tool_choice.type", absl::StrCat("\"", type, "\""));
  }
  const Json* function = Find(choice, "function");
  if (function == nullptr) {
    return InvalidParam("tool_choice.function",
                        "'tool_choice.function' is required");
  }
  RETURN_IF_ERROR(ExpectObject(*function, "tool_choice.function"));
  std::string name;
  RETURN_IF_ERROR(
      RequiredString(*function, "name", "tool_choice.function", &name));
  return ChooseNamedTool(chat, std::move(name), "tool_choice.function.name",
                         out);
}

absl::Status ToolChoiceOption(const Json& body, v1::Chat* chat,
                              OpenAiRequest* out) {
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr) return absl::OkStatus();
  if (choice->is_object()) return NamedChoice(*choice, *chat, out);
  return ToolChoiceMode(*choice, chat, out);
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseChatCompletionRequest(
    absl::string_view body) {
  ASSIGN_OR_RETURN(const Json json, ParseBody(body));
  OpenAiRequest out;
  v1::GenerateRequest request;
  RETURN_IF_ERROR(ParseSharedOptions(json, Endpoint::kChat, &out, &request));
  v1::Chat* chat = request.mutable_chat();
  RETURN_IF_ERROR(Messages(json, chat));
  std::vector<bool> strict;
  RETURN_IF_ERROR(ReadTools(json, &Tool, chat, &strict));
  RETURN_IF_ERROR(ToolChoiceOption(json, chat, &out));
  ASSIGN_OR_RETURN(const bool parallel, ParallelToolCalls(json));
  RETURN_IF_ERROR(ConstrainToolCalls(strict, parallel, out, &request));
  RETURN_IF_ERROR(TemplateOptions(json, chat));
  out.prompts.push_back(std::move(request));
  return out;
}

}  // namespace paceline::server::openai
