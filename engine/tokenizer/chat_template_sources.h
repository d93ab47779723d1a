#ifndef PACELINE_ENGINE_TOKENIZER_CHAT_TEMPLATE_SOURCES_H_
#define PACELINE_ENGINE_TOKENIZER_CHAT_TEMPLATE_SOURCES_H_

// The chat template text a model comes with, as read from its file: a GGUF
// carries `tokenizer.chat_template` and, for some families,
// `tokenizer.chat_template.tool_use` (used when a request gives tools); the
// server's config may replace both with a file of its own
// (model.chat_template_file). This is only the text: chat/model_templates.h
// parses it (when the model loads, so a malformed template fails the load,
// never a request) and owns every use of it.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_file.h"

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

struct ChatTemplateSources {
  ChatTemplateSource source = ChatTemplateSource::kNone;
  // What a parse error names: kChatTemplateKey, or the config file's path.
  std::string main_name;
  std::string main;                     // empty when source is kNone
  std::optional<std::string> tool_use;  // only a model's, only with main
  // What the loader should tell the operator (variants left unused, ...).
  std::vector<std::string> warnings;
};

// tokenizer.chat_template and its .tool_use variant. Other named variants
// (`tokenizer.chat_template.NAME`, as converters write for e.g. "rag") are
// not used: a warning names them. An absent or empty main template is no
// template (a .tool_use variant alone is then unused, with a warning). A key
// holding a non-string is InvalidArgument naming the key.
absl::StatusOr<ChatTemplateSources> ChatTemplateSourcesFromGguf(
    const GgufFile& file);

// The config's template (source kConfig, no tool_use variant): `text` as
// read from the file `name`.
ChatTemplateSources ChatTemplateSourcesFromFile(absl::string_view name,
                                                absl::string_view text);

}  // namespace paceline::engine

#endif  // PACELINE_ENGINE_TOKENIZER_CHAT_TEMPLATE_SOURCES_H_
