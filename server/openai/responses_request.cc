// ParseResponsesRequest: input items, instructions, tools, tool_choice and
// reasoning onto a chat (responses_request.h has the facts and the
// mapping).
#include "server/openai/responses_request.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/openai/openai_chat_fields.h"
#include "server/openai/openai_error.h"
#include "server/openai/openai_options.h"
#include "server/openai/openai_tool_choice.h"

namespace paceline::server::openai {
namespace {

constexpr char kStateless[] =
    "Paceline's Responses API is stateless: it stores no responses or "
    "conversations, so resend the whole conversation as 'input' (the "
    "earlier input items and the output items the responses returned)";

absl::Status Stateful(absl::string_view param) {
  return InvalidParam(
      param, absl::StrCat("'", param, "' is not supported: ", kStateless));
}

// The request's fields that need stored state, or that Paceline lacks.
absl::Status Refused(const Json& body) {
  if (Find(body, "previous_response_id") != nullptr) {
    return Stateful("previous_response_id");
  }
  if (Find(body, "conversation") != nullptr) return Stateful("conversation");
  if (const Json* v = Find(body, "background")) {
    ASSIGN_OR_RETURN(const bool background, AsBool(*v, "background"));
    if (background) return NotSupported("background", "true");
  }
  if (Find(body, "prompt") != nullptr) {
    return NotSupported("prompt", "a stored prompt");
  }
  if (const Json* v = Find(body, "store")) {
    RETURN_IF_ERROR(AsBool(*v, "store").status());
  }
  return absl::OkStatus();
}

// The chat being built, and the call names its tool messages take.
struct Turns {
  v1::Chat* chat;
  absl::flat_hash_map<std::string, std::string> call_names;  // call_id

  v1::ChatMessage* Last() {
    const int n = chat->messages_size();
    return n == 0 ? nullptr : chat->mutable_messages(n - 1);
  }
  // The assistant message that reasoning, text or calls of one turn join:
  // the last message when it is an assistant one that can take `what`
  // (calls join anything assistant; text and reasoning only a message
  // that has neither text nor calls yet), else a new one.
  enum class Part { kReasoning, kText, kCall };
  v1::ChatMessage* Assistant(Part what) {
    v1::ChatMessage* last = Last();
    if (last != nullptr && last->role() == "assistant") {
      const bool open = last->content().empty() && last->tool_calls().empty();
      if (what == Part::kCall || (what == Part::kText && open) ||
          (what == Part::kReasoning && open &&
           last->reasoning_content().empty())) {
        return last;
      }
    }
    v1::ChatMessage* m = chat->add_messages();
    m->set_role("assistant");
    return m;
  }
};

// The text of a message's or an output's parts, joined; `kinds` are the
// text part types allowed ("input_text", "output_text", "refusal").
absl::StatusOr<std::string> PartsText(const Json& parts,
                                      absl::string_view param) {
  RETURN_IF_ERROR(ExpectArray(parts, param));
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Json& part = parts[i];
    const std::string p = Index(param, i);
    RETURN_IF_ERROR(ExpectObject(part, p));
    std::string type;
    RETURN_IF_ERROR(RequiredString(part, "type", p, &type));
    const char* key = nullptr;
    if (type == "input_text" || type == "output_text" || type == "text") {
      key = "text";
    } else if (type == "refusal") {
      key = "refusal";
    } else {
      return NotSupported(Member(p, "type"), absl::StrCat("\"", type, "\""));
    }
    std::string piece;
    const Json* v = Find(part, key);
    if (v == nullptr) {
      return InvalidParam(Member(p, key),
                          absl::StrCat("'", Member(p, key), "' is required"));
    }
    ASSIGN_OR_RETURN(piece, AsString(*v, Member(p, key)));
    text += piece;
  }
  return text;
}

// content: string | parts[].
absl::StatusOr<std::string> ContentText(const Json& item,
                                        absl::string_view param) {
  const std::string field = Member(param, "content");
  const Json* content = Find(item, "content");
  if (content == nullptr) {
    return InvalidParam(field, absl::StrCat("'", field, "' is required"));
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return InvalidParam(field, absl::StrCat("'", field,
                                            "' must be a string or an array "
                                            "of parts, got ",
                                            TypeName(*content)));
  }
  return PartsText(*content, field);
}

absl::Status MessageItem(const Json& item, absl::string_view param,
                         Turns* turns) {
  std::string role;
  RETURN_IF_ERROR(RequiredString(item, "role", param, &role));
  if (role != "user" && role != "assistant" && role != "system" &&
      role != "developer") {
    const std::string p = Member(param, "role");
    return InvalidParam(
        p, absl::StrCat("'", p,
                        "' must be one of user, assistant, system, "
                        "developer; got \"",
                        role, "\""));
  }
  ASSIGN_OR_RETURN(std::string text, ContentText(item, param));
  v1::ChatMessage* m = nullptr;
  if (role == "assistant") {
    m = turns->Assistant(Turns::Part::kText);
  } else {
    m = turns->chat->add_messages();
    m->set_role(role);
  }
  m->set_content(std::move(text));
  return absl::OkStatus();
}

absl::Status FunctionCallItem(const Json& item, absl::string_view param,
                              Turns* turns) {
  std::string call_id, name, arguments;
  RETURN_IF_ERROR(RequiredString(item, "call_id", param, &call_id));
  RETURN_IF_ERROR(RequiredString(item, "name", param, &name));
  const Json* args = Find(item, "arguments");
  if (args == nullptr) {
    arguments = "{}";
  } else if (args->is_object()) {
    arguments = Dump(*args);  // some clients send the object itself
  } else {
    ASSIGN_OR_RETURN(arguments, AsString(*args, Member(param, "arguments")));
  }
  turns->call_names[call_id] = name;
  v1::ToolCall* call = turns->Assistant(Turns::Part::kCall)->add_tool_calls();
  call->set_id(std::move(call_id));
  call->set_type("function");
  call->mutable_function()->set_name(std::move(name));
  call->mutable_function()->set_arguments(std::move(arguments));
  return absl::OkStatus();
}

absl::Status FunctionOutputItem(const Json& item, absl::string_view param,
                                Turns* turns) {
  std::string call_id;
  RETURN_IF_ERROR(RequiredString(item, "call_id", param, &call_id));
  const std::string field = Member(param, "output");
  const Json* output = Find(item, "output");
  if (output == nullptr) {
    return InvalidParam(field, absl::StrCat("'", field, "' is required"));
  }
  std::string text;
  if (output->is_string()) {
    text = output->get<std::string>();
  } else {
    ASSIGN_OR_RETURN(text, PartsText(*output, field));
  }
  v1::ChatMessage* m = turns->chat->add_messages();
  m->set_role("tool");
  m->set_content(std::move(text));
  if (auto it = turns->call_names.find(call_id);
      it != turns->call_names.end()) {
    m->set_name(it->second);
  }
  m->set_tool_call_id(std::move(call_id));
  return absl::OkStatus();
}

// The texts of `parts` (objects with `text`) at obj[key], joined by blank
// lines; "" when absent.
absl::StatusOr<std::string> ReasoningTexts(const Json& item, const char* key,
                                           absl::string_view param) {
  const Json* parts = Find(item, key);
  if (parts == nullptr) return std::string();
  const std::string field = Member(param, key);
  RETURN_IF_ERROR(ExpectArray(*parts, field));
  std::vector<std::string> texts;
  for (size_t i = 0; i < parts->size(); ++i) {
    const std::string p = Index(field, i);
    RETURN_IF_ERROR(ExpectObject((*parts)[i], p));
    std::string text;
    RETURN_IF_ERROR(OptionalString((*parts)[i], "text", p, &text));
    texts.push_back(std::move(text));
  }
  return absl::StrJoin(texts, "\n\n");
}

absl::Status ReasoningItem(const Json& item, absl::string_view param,
                           Turns* turns) {
  ASSIGN_OR_RETURN(std::string text, ReasoningTexts(item, "content", param));
  if (text.empty()) {
    ASSIGN_OR_RETURN(text, ReasoningTexts(item, "summary", param));
  }
  if (text.empty()) return absl::OkStatus();  // encrypted only, or empty
  turns->Assistant(Turns::Part::kReasoning)
      ->set_reasoning_content(std::move(text));
  return absl::OkStatus();
}

absl::Status InputItem(const Json& item, absl::string_view param,
                       Turns* turns) {
  RETURN_IF_ERROR(ExpectObject(item, param));
  std::string type = "message";  // EasyInputMessage's type is optional
  RETURN_IF_ERROR(OptionalString(item, "type", param, &type));
  if (type == "message") return MessageItem(item, param, turns);
  if (type == "function_call") return FunctionCallItem(item, param, turns);
  if (type == "function_call_output") {
    return FunctionOutputItem(item, param, turns);
  }
  if (type == "reasoning") return ReasoningItem(item, param, turns);
  if (type == "item_reference") return Stateful(Member(param, "type"));
  return NotSupported(Member(param, "type"),
                      absl::StrCat("an input item of type \"", type, "\""));
}

absl::Status Input(const Json& body, v1::Chat* chat) {
  Turns turns{chat, {}};
  if (const Json* v = Find(body, "instructions")) {
    ASSIGN_OR_RETURN(std::string text, AsString(*v, "instructions"));
    if (!text.empty()) {
      v1::ChatMessage* m = chat->add_messages();
      m->set_role("system");
      m->set_content(std::move(text));
    }
  }
  const Json* input = Find(body, "input");
  if (input == nullptr) return InvalidParam("input", "'input' is required");
  if (input->is_string()) {
    v1::ChatMessage* m = chat->add_messages();
    m->set_role("user");
    m->set_content(input->get<std::string>());
    return absl::OkStatus();
  }
  if (!input->is_array()) {
    return InvalidParam("input",
                        absl::StrCat("'input' must be a string or an array "
                                     "of items, got ",
                                     TypeName(*input)));
  }
  if (input->empty()) return InvalidParam("input", "'input' is empty");
  for (size_t i = 0; i < input->size(); ++i) {
    RETURN_IF_ERROR(InputItem((*input)[i], Index("input", i), &turns));
  }
  return absl::OkStatus();
}

// {type: "function", name, description?, parameters?, strict?}.
absl::Status Tool(const Json& tool, absl::string_view param, v1::Tool* out,
                  bool* strict) {
  RETURN_IF_ERROR(ExpectObject(tool, param));
  std::string type;
  RETURN_IF_ERROR(RequiredString(tool, "type", param, &type));
  if (type != "function") {
    return NotSupported(
        Member(param, "type"),
        absl::StrCat("a tool of type \"", type, "\" (only function tools)"));
  }
  out->set_type("function");
  v1::FunctionTool* f = out->mutable_function();
  RETURN_IF_ERROR(RequiredString(tool, "name", param, f->mutable_name()));
  RETURN_IF_ERROR(
      OptionalString(tool, "description", param, f->mutable_description()));
  if (const Json* schema = Find(tool, "parameters")) {
    RETURN_IF_ERROR(ExpectObject(*schema, Member(param, "parameters")));
    f->set_parameters(Dump(*schema));
  }
  ASSIGN_OR_RETURN(*strict, StrictFlag(tool, param));
  return absl::OkStatus();
}

// "none" | "auto" | "required" | {type: "function", name}.
absl::Status ToolChoiceOption(const Json& body, v1::Chat* chat,
                              OpenAiRequest* out) {
  const Json* choice = Find(body, "tool_choice");
  if (choice == nullptr) return absl::OkStatus();
  if (!choice->is_object()) return ToolChoiceMode(*choice, chat, out);
  std::string type;
  RETURN_IF_ERROR(RequiredString(*choice, "type", "tool_choice", &type));
  if (type != "function") {
    return NotSupported("tool_choice.type", absl::StrCat("\"", type, "\""));
  }
  std::string name;
  RETURN_IF_ERROR(RequiredString(*choice, "name", "tool_choice", &name));
  return ChooseNamedTool(*chat, std::move(name), "tool_choice.name", out);
}

// reasoning {effort, summary}: the effort as the template's
// reasoning_effort.
absl::Status Reasoning(const Json& body, v1::Chat* chat) {
  const Json* reasoning = Find(body, "reasoning");
  if (reasoning == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(ExpectObject(*reasoning, "reasoning"));
  if (const Json* v = Find(*reasoning, "effort")) {
    ASSIGN_OR_RETURN(const std::string effort,
                     AsString(*v, "reasoning.effort"));
    (*chat->mutable_template_kwargs())["reasoning_effort"] = Dump(Json(effort));
  }
  return absl::OkStatus();
}

// The Response's copy of the request's fields (openai-node `Response`).
Json Echo(const Json& body, const OpenAiRequest& parsed) {
  auto field = [&body](const char* key, Json fallback) {
    const Json* v = Find(body, key);
    return v == nullptr ? fallback : *v;
  };
  Json echo = Json::object();
  echo["instructions"] = field("instructions", nullptr);
  echo["max_output_tokens"] = field("max_output_tokens", nullptr);
  echo["metadata"] = field("metadata", Json::object());
  echo["parallel_tool_calls"] = field("parallel_tool_calls", true);
  Json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (const Json* r = Find(body, "reasoning"); r != nullptr) {
    for (const char* key : {"effort", "summary"}) {
      if (const Json* v = Find(*r, key)) reasoning[key] = *v;
    }
  }
  echo["reasoning"] = std::move(reasoning);
  echo["store"] = false;  // accepted, never kept (stateless)
  echo["temperature"] = field("temperature", nullptr);
  Json text = {{"format", {{"type", "text"}}}};
  if (const Json* t = Find(body, "text"); t != nullptr) {
    if (const Json* f = Find(*t, "format")) text["format"] = *f;
  }
  echo["text"] = std::move(text);
  echo["tool_choice"] = field(
      "tool_choice",
      parsed.tool_choice == ToolChoice::kNone ? Json("none") : Json("auto"));
  echo["tools"] = field("tools", Json::array());
  echo["top_p"] = field("top_p", nullptr);
  echo["truncation"] = field("truncation", "disabled");
  echo["user"] = field("user", nullptr);
  return echo;
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseResponsesRequest(absl::string_view body,
                                                    ResponsesEcho* echo) {
  ASSIGN_OR_RETURN(const Json json, ParseBody(body));
  RETURN_IF_ERROR(Refused(json));
  OpenAiRequest out;
  v1::GenerateRequest request;
  RETURN_IF_ERROR(
      ParseSharedOptions(json, Endpoint::kResponses, &out, &request));
  v1::Chat* chat = request.mutable_chat();
  RETURN_IF_ERROR(Input(json, chat));
  std::vector<bool> strict;
  RETURN_IF_ERROR(ReadTools(json, &Tool, chat, &strict));
  RETURN_IF_ERROR(ToolChoiceOption(json, chat, &out));
  ASSIGN_OR_RETURN(const bool parallel, ParallelToolCalls(json));
  RETURN_IF_ERROR(ConstrainToolCalls(strict, parallel, out, &request));
  RETURN_IF_ERROR(Reasoning(json, chat));
  RETURN_IF_ERROR(TemplateOptions(json, chat));
  if (echo != nullptr) *echo = Echo(json, out);
  out.prompts.push_back(std::move(request));
  return out;
}

}  // namespace paceline::server::openai
