#ifndef PACELINE_CHAT_REQUEST_CONTEXT_H_
#define PACELINE_CHAT_REQUEST_CONTEXT_H_

// A chat request (v1::Chat) as the variables of the model's chat template,
// shaped as OpenAI-compatible servers hand them to templates (and as
// ../shared/chat_templates/conversations.json has them):
//
//   messages: [{"role", "content", "name", "tool_call_id", "tool_calls",
//               "reasoning_content"}]
//     content: the text; or the parts, [{"type": "text", "text": ...}];
//              or null when neither is set
//     tool_calls: [{"id", "type": "function",
//                   "function": {"name", "arguments": {...}}}]
//              with `arguments` parsed from its JSON text into an object
//              (templates iterate it and call `tojson` on it)
//   tools: [{"type": "function",
//            "function": {"name", "description", "parameters": {...}}}]
//   add_generation_prompt: the request's, default true
//   bos_token, eos_token: the vocabulary's texts ("" when the model has none)
//   every template_kwargs entry, its JSON text parsed (keys sorted)
//
// Keys are present only when set (no "name" for an empty name, no "tools"
// without tools), except role and content, which every message has.
//
// Errors are InvalidArgument naming the field: an empty role, both content
// and content_parts, a part whose type is not "text", tool call arguments
// or tool parameters that are not a JSON object
// ("chat.messages[1].tool_calls[0].function.arguments is not valid JSON:
// ..."), a template_kwargs value that is not JSON, or one that would replace
// messages, tools, add_generation_prompt, bos_token or eos_token. The JSON
// texts (tool call arguments, tool parameters, kwargs) are read in linear
// time (chat/bounded_json.h): each nests at most kMaxJsonDepth
// levels, an object holds at most kMaxJsonObjectKeys keys (and
// template_kwargs as many entries), and together they hold at most
// kMaxJsonValues values; past a limit, InvalidArgument naming it.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/bounded_json.h"
#include "nlohmann/json.hpp"
#include "paceline/v1/paceline.pb.h"

namespace paceline::chat {

inline constexpr int kMaxJsonDepth = chat::kDefaultMaxJsonDepth;
inline constexpr int64_t kMaxJsonObjectKeys = chat::kDefaultMaxJsonObjectKeys;
inline constexpr int64_t kMaxJsonValues = chat::kDefaultMaxJsonValues;

absl::StatusOr<nlohmann::ordered_json> BuildChatContext(
    const v1::Chat& chat, absl::string_view bos_token,
    absl::string_view eos_token);

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_REQUEST_CONTEXT_H_
