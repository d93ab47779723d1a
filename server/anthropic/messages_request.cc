// ParseMessagesRequest: an Anthropic Messages body as a chat request
// (messages_request.h has the facts and their sources).
#include "server/anthropic/messages_request.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/openai/openai_chat_fields.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_json.h"
#include "server/openai/openai_options.h"
#include "server/openai/openai_response_format.h"
#include "server/openai/openai_tool_choice.h"

namespace paceline::server::anthropic {
namespace {

using openai::AsBool;
using openai::AsInt;
using openai::AsString;
using openai::Dump;
using openai::ExpectArray;
using openai::ExpectObject;
using openai::Find;
using openai::Index;
using openai::InvalidParam;
using openai::Json;
using openai::Member;
using openai::OpenAiRequest;
using openai::ReadTools;
using openai::StrictFlag;
using openai::ToolChoice;
using openai::TypeName;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

absl::Status Required(absl::string_view param) {
  return InvalidParam(param, absl::StrCat("'", param, "' is required"));
}

absl::Status NotSupported(absl::string_view param, absl::string_view what) {
  return InvalidParam(
      param, absl::StrCat("'", param, "': ", what, " is not supported"));
}

absl::StatusOr<std::string> RequiredString(const Json& obj, const char* key,
                                           absl::string_view param) {
  const std::string field = Member(param, key);
  const Json* v = Find(obj, key);
  if (v == nullptr) return Required(field);
  return AsString(*v, field);
}

// A block's `type`, required.
absl::StatusOr<std::string> BlockType(const Json& block,
                                      absl::string_view param) {
  RETURN_IF_ERROR(ExpectObject(block, param));
  return RequiredString(block, "type", param);
}

// Anthropic's ids in answers are "toolu_" + the parser's; the template
// gets the parser's back.
std::string TemplateId(std::string id) {
  if (absl::StartsWith(id, kToolUseIdPrefix)) {
    id.erase(0, kToolUseIdPrefix.size());
  }
  return id;
}

void AppendLine(std::string* to, absl::string_view text) {
  if (!to->empty()) to->push_back('\n');
  absl::StrAppend(to, text);
}

// A text block's text.
absl::StatusOr<std::string> TextOf(const Json& block, absl::string_view param) {
  return RequiredString(block, "text", param);
}

// string | TextBlockParam[] (`system`, a tool_result's content): the text,
// blocks joined with "\n".
absl::StatusOr<std::string> TextContent(const Json& content,
                                        absl::string_view param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return InvalidParam(param, absl::StrCat("'", param,
                                            "' must be a string or an array "
                                            "of text blocks, got ",
                                            TypeName(content)));
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = Index(param, i);
    ASSIGN_OR_RETURN(const std::string type, BlockType(content[i], p));
    if (type != "text") {
      return NotSupported(Member(p, "type"), absl::StrCat("\"", type, "\""));
    }
    ASSIGN_OR_RETURN(const std::string piece, TextOf(content[i], p));
    AppendLine(&text, piece);
  }
  return text;
}

// Builds the chat's messages, combining consecutive turns of one role.
class Turns {
 public:
  explicit Turns(v1::Chat* chat) : chat_(chat) {}

  // The message to add a `role` turn's text or calls to: the last one when
  // it has that role (combined), else a new one.
  v1::ChatMessage* Open(absl::string_view role) {
    if (last_ == nullptr || last_->role() != role) {
      last_ = chat_->add_messages();
      last_->set_role(std::string(role));
    }
    return last_;
  }
  void AddText(absl::string_view role, absl::string_view text) {
    v1::ChatMessage* m = Open(role);
    std::string content = m->content();
    AppendLine(&content, text);
    m->set_content(std::move(content));
  }
  // A tool message: never combined.
  void AddToolResult(std::string id, std::string content) {
    last_ = chat_->add_messages();
    last_->set_role("tool");
    last_->set_tool_call_id(std::move(id));
    last_->set_content(std::move(content));
  }

 private:
  v1::Chat* const chat_;
  v1::ChatMessage* last_ = nullptr;
};

absl::Status ToolResult(const Json& block, absl::string_view param,
                        Turns* turns) {
  ASSIGN_OR_RETURN(std::string id, RequiredString(block, "tool_use_id", param));
  std::string content;
  if (const Json* c = Find(block, "content")) {
    ASSIGN_OR_RETURN(content, TextContent(*c, Member(param, "content")));
  }
  if (const Json* e = Find(block, "is_error")) {
    ASSIGN_OR_RETURN(const bool is_error,
                     AsBool(*e, Member(param, "is_error")));
    if (is_error) content = absl::StrCat("Error: ", content);
  }
  turns->AddToolResult(TemplateId(std::move(id)), std::move(content));
  return absl::OkStatus();
}

absl::Status ToolUse(const Json& block, absl::string_view param,
                     v1::ChatMessage* out) {
  v1::ToolCall* call = out->add_tool_calls();
  call->set_type("function");
  ASSIGN_OR_RETURN(std::string id, RequiredString(block, "id", param));
  call->set_id(TemplateId(std::move(id)));
  ASSIGN_OR_RETURN(*call->mutable_function()->mutable_name(),
                   RequiredString(block, "name", param));
  const std::string input_param = Member(param, "input");
  const Json* input = Find(block, "input");
  if (input == nullptr) return Required(input_param);
  RETURN_IF_ERROR(ExpectObject(*input, input_param));
  call->mutable_function()->set_arguments(Dump(*input));
  return absl::OkStatus();
}

absl::Status UserBlock(const Json& block, absl::string_view param,
                       Turns* turns) {
  ASSIGN_OR_RETURN(const std::string type, BlockType(block, param));
  if (type == "text") {
    ASSIGN_OR_RETURN(const std::string text, TextOf(block, param));
    turns->AddText("user", text);
    return absl::OkStatus();
  }
  if (type == "tool_result") return ToolResult(block, param, turns);
  return NotSupported(Member(param, "type"), absl::StrCat("\"", type, "\""));
}

absl::Status AssistantBlock(const Json& block, absl::string_view param,
                            Turns* turns) {
  ASSIGN_OR_RETURN(const std::string type, BlockType(block, param));
  if (type == "text") {
    ASSIGN_OR_RETURN(const std::string text, TextOf(block, param));
    turns->AddText("assistant", text);
  } else if (type == "thinking") {
    ASSIGN_OR_RETURN(const std::string thinking,
                     RequiredString(block, "thinking", param));
    v1::ChatMessage* m = turns->Open("assistant");
    std::string reasoning = m->reasoning_content();
    AppendLine(&reasoning, thinking);
    m->set_reasoning_content(std::move(reasoning));
  } else if (type == "redacted_thinking") {
    turns->Open("assistant");
  } else if (type == "tool_use") {
    return ToolUse(block, param, turns->Open("assistant"));
  } else {
    return NotSupported(Member(param, "type"), absl::StrCat("\"", type, "\""));
  }
  return absl::OkStatus();
}

absl::Status Message(const Json& message, absl::string_view param,
                     Turns* turns) {
  RETURN_IF_ERROR(ExpectObject(message, param));
  ASSIGN_OR_RETURN(const std::string role,
                   RequiredString(message, "role", param));
  if (role != "user" && role != "assistant") {
    const std::string p = Member(param, "role");
    return InvalidParam(p, absl::StrCat("'", p,
                                        "' must be \"user\" or "
                                        "\"assistant\", got \"",
                                        role, "\""));
  }
  const std::string cparam = Member(param, "content");
  const Json* content = Find(message, "content");
  if (content == nullptr) return Required(cparam);
  if (content->is_string()) {
    turns->AddText(role, content->get<std::string>());
    return absl::OkStatus();
  }
  if (!content->is_array()) {
    return InvalidParam(cparam, absl::StrCat("'", cparam,
                                             "' must be a string or an "
                                             "array of content blocks, got ",
                                             TypeName(*content)));
  }
  if (content->empty()) turns->Open(role);  // still a turn
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& block = (*content)[i];
    const std::string p = Index(cparam, i);
    RETURN_IF_ERROR(role == "user" ? UserBlock(block, p, turns)
                                   : AssistantBlock(block, p, turns));
  }
  return absl::OkStatus();
}

absl::Status Conversation(const Json& body, v1::Chat* chat) {
  Turns turns(chat);
  if (const Json* system = Find(body, "system")) {
    ASSIGN_OR_RETURN(const std::string text, TextContent(*system, "system"));
    turns.AddText("system", text);
  }
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) return Required("messages");
  RETURN_IF_ERROR(ExpectArray(*messages, "messages"));
  if (messages->empty()) {
    return InvalidParam("messages", "'messages' is empty");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    RETURN_IF_ERROR(Message((*messages)[i], Index("messages", i), &turns));
  }
  return absl::OkStatus();
}

// {name, description?, input_schema, strict?, type?: "custom"}.
absl::Status Tool(const Json& tool, absl::string_view param, v1::Tool* out,
                  bool* strict) {
  RETURN_IF_ERROR(ExpectObject(tool, param));
  if (const Json* type = Find(tool, "type")) {
    const std::string tparam = Member(param, "type");
    ASSIGN_OR_RETURN(const std::string t, AsString(*type, tparam));
    if (t != "custom") {
      return NotSupported(tparam, absl::StrCat("\"", t, "\""));
    }
  }
  out->set_type("function");
  v1::FunctionTool* f = out->mutable_function();
  ASSIGN_OR_RETURN(*f->mutable_name(), RequiredString(tool, "name", param));
  if (f->name().empty()) {
    return InvalidParam(Member(param, "name"),
                        absl::StrCat("'", Member(param, "name"), "' is empty"));
  }
  if (const Json* d = Find(tool, "description")) {
    ASSIGN_OR_RETURN(*f->mutable_description(),
                     AsString(*d, Member(param, "description")));
  }
  const std::string sparam = Member(param, "input_schema");
  const Json* schema = Find(tool, "input_schema");
  if (schema == nullptr) return Required(sparam);
  RETURN_IF_ERROR(ExpectObject(*schema, sparam));
  f->set_parameters(Dump(*schema));
  ASSIGN_OR_RETURN(*strict, StrictFlag(tool, param));
  return absl::OkStatus();
}

// tool_choice {type, name?, disable_parallel_tool_use?}; sets *parallel.
absl::Status ToolChoiceOption(const Json& body, v1::Chat* chat,
                              OpenAiRequest* out, bool* parallel) {
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectObject(*choice, "tool_choice"));
  ASSIGN_OR_RETURN(const std::string type,
                   RequiredString(*choice, "type", "tool_choice"));
  if (const Json* d = Find(*choice, "disable_parallel_tool_use")) {
    ASSIGN_OR_RETURN(const bool disable,
                     AsBool(*d, "tool_choice.disable_parallel_tool_use"));
    *parallel = !disable;
  }
  if (type == "auto") {
    out->tool_choice = ToolChoice::kAuto;
    return absl::OkStatus();
  }
  if (type == "none") {
    out->tool_choice = ToolChoice::kNone;
    chat->clear_tools();  // the template renders as if none were sent
    return absl::OkStatus();
  }
  if (type != "any" && type != "tool") {
    return InvalidParam("tool_choice.type",
                        absl::StrCat("'tool_choice.type' must be \"auto\", "
                                     "\"any\", \"tool\" or \"none\", got \"",
                                     type, "\""));
  }
  if (chat->tools().empty()) {
    return InvalidParam("tool_choice", absl::StrCat("'tool_choice' \"", type,
                                                    "\" needs 'tools'"));
  }
  if (type == "any") {
    out->tool_choice = ToolChoice::kRequired;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::string name,
                   RequiredString(*choice, "name", "tool_choice"));
  return openai::ChooseNamedTool(*chat, std::move(name), "tool_choice.name",
                                 out);
}

// thinking {type enabled | adaptive | disabled, budget_tokens?} ->
// enable_thinking.
absl::Status Thinking(const Json& body, v1::Chat* chat) {
  const Json* thinking = Find(body, "thinking");
  if (thinking == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectObject(*thinking, "thinking"));
  // (Not ASSIGN_OR_RETURN: GCC 12 sees the moved-from string as maybe
  // uninitialized once this is inlined.)
  const absl::StatusOr<std::string> read =
      RequiredString(*thinking, "type", "thinking");
  if (!read.ok()) return read.status();
  const std::string& type = *read;
  bool enabled = false;
  if (type == "enabled" || type == "adaptive") {
    enabled = true;
  } else if (type != "disabled") {
    return InvalidParam("thinking.type",
                        absl::StrCat("'thinking.type' must be \"enabled\", "
                                     "\"adaptive\" or \"disabled\", got \"",
                                     type, "\""));
  }
  if (const Json* budget = Find(*thinking, "budget_tokens")) {
    RETURN_IF_ERROR(
        AsInt(*budget, "thinking.budget_tokens", 1, kInt32Max).status());
  }
  (*chat->mutable_template_kwargs())["enable_thinking"] =
      enabled ? "true" : "false";
  return absl::OkStatus();
}

// output_config.effort -> the template's reasoning_effort (gpt-oss's
// low / medium / high; Anthropic's xhigh and max passed as they are).
absl::Status Effort(const Json& body, v1::Chat* chat) {
  const Json* config = Find(body, "output_config");
  if (config == nullptr) return absl::OkStatus();
  const Json* v = Find(*config, "effort");
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string effort,
                   AsString(*v, "output_config.effort"));
  (*chat->mutable_template_kwargs())["reasoning_effort"] = Dump(Json(effort));
  return absl::OkStatus();
}

absl::Status StopSequences(const Json& body, v1::StoppingOptions* stop) {
  const Json* v = Find(body, "stop_sequences");
  if (v == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectArray(*v, "stop_sequences"));
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string param = Index("stop_sequences", i);
    ASSIGN_OR_RETURN(std::string text, AsString((*v)[i], param));
    if (text.empty()) {
      return InvalidParam(param, absl::StrCat("'", param, "' is empty"));
    }
    stop->add_stop(std::move(text));
  }
  return absl::OkStatus();
}

// Everything but max_tokens and stream.
absl::StatusOr<OpenAiRequest> ParseCommon(const Json& body) {
  OpenAiRequest out;
  v1::GenerateRequest request;
  if (const Json* v = Find(body, "model")) {
    ASSIGN_OR_RETURN(out.model, AsString(*v, "model"));
  }
  request.set_model(out.model);
  if (const Json* v = Find(body, "metadata")) {
    RETURN_IF_ERROR(ExpectObject(*v, "metadata"));
  }
  RETURN_IF_ERROR(openai::ParseSampling(body, request.mutable_sampling()));
  RETURN_IF_ERROR(openai::ParseResponseFormat(
      body, request.mutable_sampling(), openai::FormatField::kOutputConfig));
  RETURN_IF_ERROR(StopSequences(body, request.mutable_stopping()));
  RETURN_IF_ERROR(openai::ParsePacelineOptions(body, &request));
  v1::Chat* chat = request.mutable_chat();
  RETURN_IF_ERROR(Conversation(body, chat));
  std::vector<bool> strict;
  RETURN_IF_ERROR(ReadTools(body, &Tool, chat, &strict));
  bool parallel = true;  // Anthropic's default
  RETURN_IF_ERROR(ToolChoiceOption(body, chat, &out, &parallel));
  RETURN_IF_ERROR(openai::ConstrainToolCalls(strict, parallel, out, &request));
  RETURN_IF_ERROR(Thinking(body, chat));
  RETURN_IF_ERROR(Effort(body, chat));
  out.prompts.push_back(std::move(request));
  return out;
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseMessagesRequest(absl::string_view body) {
  ASSIGN_OR_RETURN(const Json json, openai::ParseBody(body));
  const Json* max_tokens = Find(json, "max_tokens");
  if (max_tokens == nullptr) return Required("max_tokens");
  ASSIGN_OR_RETURN(const int64_t max,
                   AsInt(*max_tokens, "max_tokens", 1, kInt32Max));
  ASSIGN_OR_RETURN(OpenAiRequest out, ParseCommon(json));
  out.prompts.front().mutable_stopping()->set_max_tokens(
      static_cast<int32_t>(max));
  if (const Json* v = Find(json, "stream")) {
    ASSIGN_OR_RETURN(out.stream, AsBool(*v, "stream"));
  }
  return out;
}

absl::StatusOr<OpenAiRequest> ParseCountTokensRequest(absl::string_view body) {
  ASSIGN_OR_RETURN(const Json json, openai::ParseBody(body));
  return ParseCommon(json);
}

}  // namespace paceline::server::anthropic
