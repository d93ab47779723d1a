#ifndef PACELINE_CHAT_TOOL_FORMATS_PARAMETER_VALUE_H_
#define PACELINE_CHAT_TOOL_FORMATS_PARAMETER_VALUE_H_

// An XML-style tool-call parameter's value as JSON. The templates write a
// string value raw and any other value as JSON; so a value is the string
// as written unless (1) the tool's JSON Schema declares a non-string type
// for the parameter and the text parses as JSON, or (2) no type is known
// and the text parses as JSON other than a bare string (vLLM's rule).
// One newline right after the opening tag and one before the closing tag
// are the template's, not the value's; so is a CDATA section around the
// whole value (MiniCPM's, for a string with markup characters): its
// content is the string.
//
// Untrusted text: parsed within bounded_json.h's limits; thread-compatible.

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "paceline/v1/paceline.pb.h"

namespace paceline::chat {

// What the request's tools declare about their parameters.
class ToolParameterTypes {
 public:
  enum class Kind { kUnknown, kString, kOther };

  // `tools`: the OpenAI tools array ({"type": "function", "function":
  // {"name", "parameters": {"properties": {...}}}}); other shapes ignored.
  static ToolParameterTypes FromTools(const nlohmann::ordered_json& tools);
  // The chat request's tools (FunctionTool.parameters: JSON Schema text;
  // text that is not JSON is skipped).
  static std::shared_ptr<const ToolParameterTypes> FromChat(
      const v1::Chat& chat);

  Kind Find(const std::string& tool, const std::string& parameter) const;

 private:
  std::map<std::pair<std::string, std::string>, Kind> kinds_;
};

// How the value's markup said it is typed (DeepSeek's `string="true"`).
enum class ValueHint { kNone, kString, kJson };

// The value's JSON text (compact; UTF-8 kept, invalid bytes replaced).
std::string ParameterValueJson(absl::string_view raw,
                               ToolParameterTypes::Kind declared,
                               ValueHint hint);

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_TOOL_FORMATS_PARAMETER_VALUE_H_
