#include "engine/tokenizer/model_chat_templates.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

// Parses `source` as the template named `name`; errors name it.
absl::StatusOr<ChatTemplate> ParseNamed(absl::string_view name,
                                        absl::string_view source) {
  absl::StatusOr<ChatTemplate> parsed = ChatTemplate::Parse(source);
  if (parsed.ok()) return parsed;
  return absl::Status(parsed.status().code(),
                      absl::StrCat(name, ": ", parsed.status().message()));
}

// The string under `key`; nullopt when absent.
absl::StatusOr<std::optional<absl::string_view>> ReadString(
    const GgufFile& file, absl::string_view key) {
  if (!file.Has(key)) return std::optional<absl::string_view>();
  absl::StatusOr<absl::string_view> value = file.GetString(key);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": a chat template must be a string (",
                     value.status().message(), ")"));
  }
  return std::optional<absl::string_view>(*value);
}

// Named variants other than tool_use, as one warning.
void WarnOtherVariants(const GgufFile& file,
                       std::vector<std::string>* warnings) {
  std::vector<std::string> others;
  const std::string prefix = absl::StrCat(kChatTemplateKey, ".");
  for (const auto& [key, value] : file.metadata()) {
    if (absl::StartsWith(key, prefix) && key != kToolUseChatTemplateKey) {
      others.push_back(key);
    }
  }
  if (others.empty()) return;
  warnings->push_back(absl::StrCat("named chat templates not used: ",
                                   absl::StrJoin(others, ", ")));
}

}  // namespace

absl::string_view ChatTemplateSourceName(ChatTemplateSource source) {
  switch (source) {
    case ChatTemplateSource::kModel:
      return "model";
    case ChatTemplateSource::kConfig:
      return "config";
    case ChatTemplateSource::kNone:
      break;
  }
  return "";
}

const ChatTemplate* ModelChatTemplates::For(bool has_tools) const {
  if (has_tools && tool_use.has_value()) return &*tool_use;
  return main.has_value() ? &*main : nullptr;
}

absl::StatusOr<ModelChatTemplates> ChatTemplatesFromGguf(const GgufFile& file) {
  ModelChatTemplates out;
  ASSIGN_OR_RETURN(const std::optional<absl::string_view> main,
                   ReadString(file, kChatTemplateKey));
  ASSIGN_OR_RETURN(const std::optional<absl::string_view> tool_use,
                   ReadString(file, kToolUseChatTemplateKey));
  WarnOtherVariants(file, &out.warnings);
  if (main.has_value() && !main->empty()) {
    ASSIGN_OR_RETURN(out.main, ParseNamed(kChatTemplateKey, *main));
  } else if (main.has_value()) {
    out.warnings.push_back(
        absl::StrCat(kChatTemplateKey, " is empty: no chat template"));
  }
  if (tool_use.has_value()) {
    ASSIGN_OR_RETURN(out.tool_use,
                     ParseNamed(kToolUseChatTemplateKey, *tool_use));
  }
  if (!out.main.has_value() && out.tool_use.has_value()) {
    out.tool_use.reset();
    out.warnings.push_back(absl::StrCat(kToolUseChatTemplateKey, " not used: ",
                                        kChatTemplateKey, " is missing"));
  }
  if (out.main.has_value()) {
    out.source = ChatTemplateSource::kModel;
    out.output = DetectChatOutputFormat(
        absl::StrCat(*main, tool_use.value_or(absl::string_view())));
  }
  return out;
}

absl::StatusOr<ModelChatTemplates> ChatTemplatesFromSource(
    absl::string_view name, absl::string_view source) {
  ModelChatTemplates out;
  ASSIGN_OR_RETURN(out.main, ParseNamed(name, source));
  if (out.main.has_value()) {
    out.source = ChatTemplateSource::kConfig;
    out.output = DetectChatOutputFormat(source);
  }
  return out;
}

}  // namespace paceline::engine
