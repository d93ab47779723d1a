#ifndef PACELINE_CHAT_CHAT_TEMPLATE_H_
#define PACELINE_CHAT_CHAT_TEMPLATE_H_

// A model's chat template (GGUF `tokenizer.chat_template`): our own
// interpreter of the Jinja subset real templates use, rendering as Python's
// jinja2 does when set up the way model publishers' tooling sets it up
// (ImmutableSandboxedEnvironment, trim_blocks and lstrip_blocks, loop
// controls, `{% generation %}`, `raise_exception`, `strftime_now`, and a
// `tojson` that keeps non-ASCII). `../shared/chat_templates` holds the
// oracle: the test renders real templates with both and compares the bytes.
//
// Templates come from model files and are untrusted: rendering does no I/O,
// sees only the variables it is given, and stops at the limits below.
//
// Thread-safety: a ChatTemplate is immutable; Render may run concurrently.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace paceline::chat {

struct ChatTemplateLimits {
  size_t max_source_bytes = size_t{1} << 20;
  // Loop iterations over the whole render (all loops together).
  int64_t max_loop_iterations = 1'000'000;
  // Nested macro calls and call blocks; also the depth of the parse tree
  // (expressions, and statements nested in statements), checked by Parse.
  // Evaluation recursion as a whole stays under 4 * max_depth.
  int max_depth = 100;
  size_t max_output_bytes = size_t{16} << 20;
};

struct ChatRenderOptions {
  // What `strftime_now(format)` formats, in UTC.
  absl::Time now = absl::UnixEpoch();
  ChatTemplateLimits limits;
};

namespace jinja {
struct Program;  // the parsed template (chat_template.cc and friends)
}  // namespace jinja

class ChatTemplate {
 public:
  // Parses `source`. A syntax error is InvalidArgument
  // "chat template: line L, column C: WHAT".
  static absl::StatusOr<ChatTemplate> Parse(
      absl::string_view source, const ChatTemplateLimits& limits = {});

  // Renders with the variables of the JSON object `context` (messages,
  // tools, add_generation_prompt, bos_token, eos_token, and any template
  // keyword arguments). JSON objects keep their key order, as Python dicts.
  // Errors: the template's `raise_exception(msg)` is InvalidArgument whose
  // message contains msg verbatim; other runtime errors (an attribute of an
  // undefined value, a type error) are InvalidArgument naming the line; a
  // limit is ResourceExhausted naming it.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const ChatRenderOptions& options) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program)
      : program_(std::move(program)) {}

  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace paceline::chat

#endif  // PACELINE_CHAT_CHAT_TEMPLATE_H_
