#include "engine/tokenizer/chat_template.h"

#include "absl/status/status.h"

// Placeholder until the interpreter lands (issue 15, in progress): every
// template is refused, so nothing can render a prompt wrongly.
namespace paceline::engine {

namespace jinja {
struct Program {};
}  // namespace jinja

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(
    absl::string_view /*source*/, const ChatTemplateLimits& /*limits*/) {
  return absl::UnimplementedError("chat templates are not supported yet");
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const nlohmann::ordered_json& /*context*/,
    const ChatRenderOptions& /*options*/) const {
  return absl::UnimplementedError("chat templates are not supported yet");
}

}  // namespace paceline::engine
