#ifndef PACELINE_CHAT_JINJA_LEXER_H_
#define PACELINE_CHAT_JINJA_LEXER_H_

// Splits a template into tokens as jinja2's lexer does with trim_blocks and
// lstrip_blocks on: text, `{{ }}` and `{% %}` delimiters with the tokens
// inside them; comments and `{% raw %}` are resolved here (raw bodies come
// out as text). Newlines are normalised to "\n" and one trailing newline is
// dropped (keep_trailing_newline off).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paceline::chat::jinja {

enum class Tok {
  kText,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof,
};

struct Token {
  Tok type;
  std::string text;  // text, name, operator, or a string literal's value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int column = 1;
};

// "chat template: line L, column C: what" as InvalidArgument.
absl::Status SyntaxError(int line, int column, absl::string_view what);

// Tokenizes `source`; a lexical error is InvalidArgument with line and
// column.
absl::StatusOr<std::vector<Token>> Lex(absl::string_view source);

}  // namespace paceline::chat::jinja

#endif  // PACELINE_CHAT_JINJA_LEXER_H_
