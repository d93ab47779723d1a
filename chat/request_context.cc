#include "chat/request_context.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/bounded_json.h"

namespace paceline::chat {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Invalid(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// Every JSON text of one chat request is read against one budget.
struct JsonReader {
  chat::JsonLimits limits{kMaxJsonDepth, kMaxJsonObjectKeys};
  chat::JsonBudget budget{kMaxJsonValues};

  // `text` parsed as JSON; `object` requires an object.
  absl::StatusOr<Json> Parse(absl::string_view field, absl::string_view text,
                             bool object) {
    ASSIGN_OR_RETURN(Json value,
                     chat::ParseBoundedJson(text, field, limits, &budget));
    if (object && !value.is_object()) {
      return Invalid(field, "must be a JSON object");
    }
    return value;
  }
};

absl::StatusOr<Json> Content(const v1::ChatMessage& m,
                             const std::string& field) {
  if (m.has_content() && m.content_parts_size() > 0) {
    return Invalid(field, "has both content and content_parts; set one");
  }
  if (m.has_content()) return Json(m.content());
  if (m.content_parts_size() == 0) return Json(nullptr);
  Json parts = Json::array();
  for (int j = 0; j < m.content_parts_size(); ++j) {
    const v1::ContentPart& part = m.content_parts(j);
    if (!part.type().empty() && part.type() != "text") {
      return Invalid(
          absl::StrCat(field, ".content_parts[", j, "].type"),
          absl::StrCat("must be \"text\", got \"", part.type(), "\""));
    }
    parts.push_back(Json{{"type", "text"}, {"text", part.text()}});
  }
  return parts;
}

absl::StatusOr<Json> ToolCall(const v1::ToolCall& call,
                              const std::string& field, JsonReader& json) {
  if (call.function().name().empty()) {
    return Invalid(absl::StrCat(field, ".function.name"), "is empty");
  }
  Json arguments = Json::object();
  if (!call.function().arguments().empty()) {
    ASSIGN_OR_RETURN(arguments,
                     json.Parse(absl::StrCat(field, ".function.arguments"),
                                call.function().arguments(), true));
  }
  Json out = Json::object();
  if (!call.id().empty()) out["id"] = call.id();
  out["type"] = call.type().empty() ? "function" : call.type();
  out["function"] = Json{{"name", call.function().name()},
                         {"arguments", std::move(arguments)}};
  return out;
}

absl::StatusOr<Json> Message(const v1::ChatMessage& m, int i,
                             JsonReader& json) {
  const std::string field = absl::StrCat("chat.messages[", i, "]");
  if (m.role().empty())
    return Invalid(absl::StrCat(field, ".role"), "is empty");
  Json out = Json::object();
  out["role"] = m.role();
  ASSIGN_OR_RETURN(out["content"], Content(m, field));
  if (!m.name().empty()) out["name"] = m.name();
  if (!m.tool_call_id().empty()) out["tool_call_id"] = m.tool_call_id();
  if (m.tool_calls_size() > 0) {
    Json calls = Json::array();
    for (int j = 0; j < m.tool_calls_size(); ++j) {
      ASSIGN_OR_RETURN(Json call,
                       ToolCall(m.tool_calls(j),
                                absl::StrCat(field, ".tool_calls[", j, "]"),
                                json));
      calls.push_back(std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (m.has_reasoning_content()) {
    out["reasoning_content"] = m.reasoning_content();
  }
  return out;
}

absl::StatusOr<Json> Tool(const v1::Tool& tool, int i, JsonReader& json) {
  const std::string field = absl::StrCat("chat.tools[", i, "]");
  const v1::FunctionTool& f = tool.function();
  if (f.name().empty()) {
    return Invalid(absl::StrCat(field, ".function.name"), "is empty");
  }
  Json function = Json::object();
  function["name"] = f.name();
  if (!f.description().empty()) function["description"] = f.description();
  if (!f.parameters().empty()) {
    ASSIGN_OR_RETURN(function["parameters"],
                     json.Parse(absl::StrCat(field, ".function.parameters"),
                                f.parameters(), true));
  }
  return Json{{"type", tool.type().empty() ? "function" : tool.type()},
              {"function", std::move(function)}};
}

// The kwargs in key order (a proto map has none of its own), after the
// variables the server sets, none of which they may replace.
absl::Status AddKwargs(const v1::Chat& chat, JsonReader& json, Json* context) {
  if (chat.template_kwargs_size() > kMaxJsonObjectKeys) {
    return Invalid("chat.template_kwargs",
                   absl::StrCat("has more than ", kMaxJsonObjectKeys,
                                " entries, got ", chat.template_kwargs_size()));
  }
  std::vector<const std::string*> names;
  names.reserve(chat.template_kwargs_size());
  for (const auto& [name, value] : chat.template_kwargs()) {
    names.push_back(&name);
  }
  std::sort(names.begin(), names.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  for (const std::string* name : names) {
    const std::string field =
        absl::StrCat("chat.template_kwargs[\"", *name, "\"]");
    if (name->empty())
      return Invalid("chat.template_kwargs", "has an empty name");
    if (context->contains(*name) || *name == "tools") {
      return Invalid(field, absl::StrCat("may not replace ", *name,
                                         " (the server sets it)"));
    }
  }
  // Checked against the server's variables only: the kwargs' own names
  // are unique (a map's keys), so each is appended in constant time.
  for (const std::string* name : names) {
    const std::string field =
        absl::StrCat("chat.template_kwargs[\"", *name, "\"]");
    ASSIGN_OR_RETURN(Json value,
                     json.Parse(field, chat.template_kwargs().at(*name),
                                false));
    chat::AppendNewMember(context, *name, std::move(value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Json> BuildChatContext(const v1::Chat& chat,
                                      absl::string_view bos_token,
                                      absl::string_view eos_token) {
  JsonReader json;
  Json context = Json::object();
  Json messages = Json::array();
  for (int i = 0; i < chat.messages_size(); ++i) {
    ASSIGN_OR_RETURN(Json message, Message(chat.messages(i), i, json));
    messages.push_back(std::move(message));
  }
  context["messages"] = std::move(messages);
  if (chat.tools_size() > 0) {
    Json tools = Json::array();
    for (int i = 0; i < chat.tools_size(); ++i) {
      ASSIGN_OR_RETURN(Json tool, Tool(chat.tools(i), i, json));
      tools.push_back(std::move(tool));
    }
    context["tools"] = std::move(tools);
  }
  context["add_generation_prompt"] =
      !chat.has_add_generation_prompt() || chat.add_generation_prompt();
  context["bos_token"] = std::string(bos_token);
  context["eos_token"] = std::string(eos_token);
  RETURN_IF_ERROR(AddKwargs(chat, json, &context));
  return context;
}

}  // namespace paceline::chat
