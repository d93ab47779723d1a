#ifndef PACELINE_CHAT_JINJA_PARSER_H_
#define PACELINE_CHAT_JINJA_PARSER_H_

// Builds the Program from tokens with jinja2's grammar and precedence. A
// syntax error is InvalidArgument "chat template: line L, column C: what";
// a tree deeper than `max_depth` (expressions or nested statements) is
// ResourceExhausted, so no later walk can overflow the stack.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace paceline::chat::jinja {

absl::StatusOr<std::unique_ptr<Program>> ParseProgram(std::vector<Token> tokens,
                                                      int max_depth);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_PARSER_H_
