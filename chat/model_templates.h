#ifndef PACELINE_CHAT_MODEL_TEMPLATES_H_
#define PACELINE_CHAT_MODEL_TEMPLATES_H_

// Which chat templates a model has, parsed: the one owner of that answer.
// The text comes from the model's file or the config
// (engine/tokenizer/chat_template_sources.h); it is parsed when the model
// loads, so a malformed template fails the load with its line and column,
// never a request.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chat/chat_template.h"
#include "chat/output_parser.h"
#include "engine/tokenizer/chat_template_sources.h"

namespace paceline::chat {

struct ModelChatTemplates {
  engine::ChatTemplateSource source = engine::ChatTemplateSource::kNone;
  std::optional<ChatTemplate> main;      // set unless source is kNone
  std::optional<ChatTemplate> tool_use;  // the model's .tool_use variant
  // How chat output is split (reasoning markers, the tool-call format),
  // detected from the templates' own markers (output_parser.h).
  ChatOutputFormat output;
  // What the loader should tell the operator (variants left unused, ...).
  std::vector<std::string> warnings;

  // The template for a request: the tool_use variant when the request has
  // tools and the model has one, else the main one; null when none.
  const ChatTemplate* For(bool has_tools) const;
};

// Parses the sources' templates (their warnings carried over). A malformed
// one is InvalidArgument "NAME: chat template: line L, column C: WHAT",
// NAME the main template's name or kToolUseChatTemplateKey.
absl::StatusOr<ModelChatTemplates> ParseChatTemplates(
    const engine::ChatTemplateSources& sources);

// The config's template (source kConfig, no tool_use variant): `source` as
// read from the file `name`, parsed.
absl::StatusOr<ModelChatTemplates> ChatTemplatesFromSource(
    absl::string_view name, absl::string_view source);

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_MODEL_TEMPLATES_H_
