#ifndef PACELINE_ENGINE_TOKENIZER_MODEL_CHAT_TEMPLATES_H_
#define PACELINE_ENGINE_TOKENIZER_MODEL_CHAT_TEMPLATES_H_

// Which chat templates a model has: the one owner of that answer. A GGUF
// carries `tokenizer.chat_template` and, for some families,
// `tokenizer.chat_template.tool_use` (used when a request gives tools);
// the server's config may replace both with a file of its own
// (model.chat_template_file). Templates are parsed when the model loads, so
// a malformed one fails the load with its line and column, never a request.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/chat_output.h"
#include "engine/tokenizer/chat_template.h"

namespace paceline::engine {

inline constexpr absl::string_view kChatTemplateKey = "tokenizer.chat_template";
inline constexpr absl::string_view kToolUseChatTemplateKey =
    "tokenizer.chat_template.tool_use";

enum class ChatTemplateSource {
  kNone,    // chat requests cannot be served
  kModel,   // the GGUF's tokenizer.chat_template
  kConfig,  // model.chat_template_file
};

// "", "model", "config" (GetModelInfo's ChatSupport.template_source).
absl::string_view ChatTemplateSourceName(ChatTemplateSource source);

struct ModelChatTemplates {
  ChatTemplateSource source = ChatTemplateSource::kNone;
  std::optional<ChatTemplate> main;      // set unless source is kNone
  std::optional<ChatTemplate> tool_use;  // the model's .tool_use variant
  // How chat output is split (reasoning markers, the tool-call format),
  // detected from the templates' own markers (chat_output.h).
  ChatOutputFormat output;
  // What the loader should tell the operator (variants left unused, ...).
  std::vector<std::string> warnings;

  // The template for a request: the tool_use variant when the request has
  // tools and the model has one, else the main one; null when none.
  const ChatTemplate* For(bool has_tools) const;
};

// Reads and parses tokenizer.chat_template and its .tool_use variant.
// Other named variants (`tokenizer.chat_template.NAME`, as converters write
// for e.g. "rag") are not used: a warning names them. An absent or empty
// main template is no template (a .tool_use variant alone is then unused,
// with a warning). Errors: a key holding a non-string is InvalidArgument
// naming the key; a malformed template is InvalidArgument
// "KEY: chat template: line L, column C: WHAT".
absl::StatusOr<ModelChatTemplates> ChatTemplatesFromGguf(const GgufFile& file);

// The config's template (source kConfig, no tool_use variant): `source` as
// read from the file `name`. A malformed one is InvalidArgument
// "NAME: chat template: line L, column C: WHAT".
absl::StatusOr<ModelChatTemplates> ChatTemplatesFromSource(
    absl::string_view name, absl::string_view source);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_MODEL_CHAT_TEMPLATES_H_
