#include "chat/model_templates.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace paceline::chat {
namespace {

// Parses `source` as the template named `name`; errors name it.
absl::StatusOr<ChatTemplate> ParseNamed(absl::string_view name,
                                        absl::string_view source) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  if (parsed.ok()) return parsed;
  return absl::Status(parsed.status().code(),
                      absl::StrCat(name, ": ", parsed.status().message()));
}

}  // namespace

const ChatTemplate* ModelChatTemplates::For(bool has_tools) const {
  if (has_tools && tool_use.has_value()) return &*tool_use;
  return main.has_value() ? &*main : nullptr;
}

absl::StatusOr<ModelChatTemplates> ParseChatTemplates(
    const engine::ChatTemplateSources& sources) {
  ModelChatTemplates out;
  out.warnings = sources.warnings;
  if (sources.source == engine::ChatTemplateSource::kNone) return out;
  ASSIGN_OR_RETURN(out.main, ParseNamed(sources.main_name, sources.main));
  if (sources.tool_use.has_value()) {
    ASSIGN_OR_RETURN(out.tool_use, ParseNamed(engine::kToolUseChatTemplateKey,
                                              *sources.tool_use));
  }
  out.source = sources.source;
  out.output = DetectChatOutputFormat(
      absl::StrCat(sources.main, sources.tool_use.value_or("")));
  return out;
}

absl::StatusOr<ModelChatTemplates> ChatTemplatesFromSource(
    absl::string_view name, absl::string_view source) {
  return ParseChatTemplates(engine::ChatTemplateSourcesFromFile(name, source));
}

}  // namespace paceline::chat
