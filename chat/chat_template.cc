#include "chat/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/builtins.h"
#include "chat/jinja/eval.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"

namespace paceline::chat {

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(
    absl::string_view source, const ChatTemplateLimits& limits) {
  if (source.size() > limits.max_source_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chat template: source of ", source.size(), " bytes is over the ",
        limits.max_source_bytes, "-byte limit"));
  }
  ASSIGN_OR_RETURN(std::vector<jinja::Token> tokens, jinja::Lex(source));
  ASSIGN_OR_RETURN(std::unique_ptr<jinja::Program> program,
                   jinja::ParseProgram(std::move(tokens), limits.max_depth));
  return ChatTemplate(
      std::shared_ptr<const jinja::Program>(std::move(program)));
}

absl::StatusOr<std::string> ChatTemplate::Render(
    const nlohmann::ordered_json& context,
    const ChatRenderOptions& options) const {
  if (!context.is_object()) {
    return absl::InvalidArgumentError(
        "chat template: the render context must be a JSON object");
  }
  auto globals = std::make_shared<jinja::Frame>();
  jinja::AddGlobals(globals.get());
  for (const auto& [key, value] : context.items()) {
    globals->Set(key, jinja::Value::FromJson(value));
  }
  jinja::EvalLimits limits;
  limits.max_loop_iterations = options.limits.max_loop_iterations;
  limits.max_depth = options.limits.max_depth;
  limits.max_output_bytes = options.limits.max_output_bytes;
  limits.now = options.now;
  jinja::Evaluator evaluator(limits);
  return evaluator.Render(*program_, std::move(globals));
}

}  // namespace paceline::chat
