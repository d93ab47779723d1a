#include "chat/tool_formats/parameter_value.h"

#include <memory>
#include <utility>

#include "absl/strings/strip.h"
#include "chat/bounded_json.h"

namespace paceline::chat {
namespace {

using Json = nlohmann::ordered_json;

ToolParameterTypes::Kind KindOf(const Json& schema) {
  if (!schema.is_object()) return ToolParameterTypes::Kind::kUnknown;
  auto type = schema.find("type");
  if (type == schema.end()) return ToolParameterTypes::Kind::kUnknown;
  if (type->is_string()) {
    return *type == "string" ? ToolParameterTypes::Kind::kString
                             : ToolParameterTypes::Kind::kOther;
  }
  return ToolParameterTypes::Kind::kUnknown;  // a union: decide by the text
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

ToolParameterTypes ToolParameterTypes::FromTools(const Json& tools) {
  ToolParameterTypes types;
  if (!tools.is_array()) return types;
  for (const Json& tool : tools) {
    const Json* function = &tool;
    if (tool.is_object() && tool.contains("function")) {
      function = &tool["function"];
    }
    if (!function->is_object()) continue;
    auto name = function->find("name");
    auto parameters = function->find("parameters");
    if (name == function->end() || !name->is_string() ||
        parameters == function->end() || !parameters->is_object()) {
      continue;
    }
    auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) continue;
    for (auto it = properties->begin(); it != properties->end(); ++it) {
      types.kinds_[{name->get<std::string>(), it.key()}] = KindOf(it.value());
    }
  }
  return types;
}

std::shared_ptr<const ToolParameterTypes> ToolParameterTypes::FromChat(
    const v1::Chat& chat) {
  Json tools = Json::array();
  for (const v1::Tool& tool : chat.tools()) {
    Json parameters = Json::parse(tool.function().parameters(), nullptr,
                                  /*allow_exceptions=*/false);
    if (!parameters.is_object()) continue;
    tools.push_back({{"name", tool.function().name()},
                     {"parameters", std::move(parameters)}});
  }
  return std::make_shared<const ToolParameterTypes>(FromTools(tools));
}

ToolParameterTypes::Kind ToolParameterTypes::Find(
    const std::string& tool, const std::string& parameter) const {
  auto it = kinds_.find({tool, parameter});
  return it == kinds_.end() ? Kind::kUnknown : it->second;
}

std::string ParameterValueJson(absl::string_view raw,
                               ToolParameterTypes::Kind declared,
                               ValueHint hint) {
  if (!raw.empty() && raw.front() == '\n') raw.remove_prefix(1);
  if (!raw.empty() && raw.back() == '\n') raw.remove_suffix(1);
  // MiniCPM wraps a string with markup characters in a CDATA section.
  if (absl::ConsumePrefix(&raw, "<![CDATA[")) {
    if (absl::ConsumeSuffix(&raw, "]]>")) return Dump(Json(std::string(raw)));
    raw = absl::string_view(raw.data() - 9, raw.size() + 9);
  }
  const bool as_string = hint == ValueHint::kString ||
                         (hint == ValueHint::kNone &&
                          declared == ToolParameterTypes::Kind::kString);
  if (!as_string) {
    JsonLimits limits;
    absl::StatusOr<Json> value =
        ParseBoundedJson(raw, "a parameter", limits, /*budget=*/nullptr);
    const bool typed = hint == ValueHint::kJson ||
                       declared == ToolParameterTypes::Kind::kOther;
    if (value.ok() && (typed || !value->is_string())) return Dump(*value);
  }
  return Dump(Json(std::string(raw)));
}

}  // namespace paceline::chat
