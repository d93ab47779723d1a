#include "engine/tokenizer/chat_template_sources.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace paceline::engine {
namespace {

// The string under `key`; nullopt when absent.
absl::StatusOr<std::optional<std::string>> ReadString(const GgufFile& file,
                                                      absl::string_view key) {
  if (!file.Has(key)) return std::optional<std::string>();
  absl::StatusOr<absl::string_view> value = file.GetString(key);
  if (!value.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, ": a chat template must be a string (",
                     value.status().message(), ")"));
  }
  return std::optional<std::string>(*value);
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

absl::StatusOr<ChatTemplateSources> ChatTemplateSourcesFromGguf(
    const GgufFile& file) {
  ChatTemplateSources out;
  ASSIGN_OR_RETURN(std::optional<std::string> main,
                   ReadString(file, kChatTemplateKey));
  ASSIGN_OR_RETURN(out.tool_use, ReadString(file, kToolUseChatTemplateKey));
  WarnOtherVariants(file, &out.warnings);
  if (main.has_value() && main->empty()) {
    out.warnings.push_back(
        absl::StrCat(kChatTemplateKey, " is empty: no chat template"));
  }
  if (!main.has_value() || main->empty()) {
    if (out.tool_use.has_value()) {
      out.tool_use.reset();
      out.warnings.push_back(absl::StrCat(kToolUseChatTemplateKey,
                                          " not used: ", kChatTemplateKey,
                                          " is missing"));
    }
    return out;
  }
  out.source = ChatTemplateSource::kModel;
  out.main_name = std::string(kChatTemplateKey);
  out.main = *std::move(main);
  return out;
}

ChatTemplateSources ChatTemplateSourcesFromFile(absl::string_view name,
                                                absl::string_view text) {
  ChatTemplateSources out;
  out.source = ChatTemplateSource::kConfig;
  out.main_name = std::string(name);
  out.main = std::string(text);
  return out;
}

}  // namespace paceline::engine
