#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_GBNF_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_GBNF_H_

// The GBNF front end: llama.cpp's grammar format (its grammars/README.md),
// read the way llama.cpp's parser reads it, so that a user's existing .gbnf
// files mean the same here.
//
//   rule        name ::= alternatives, ended by a newline or the end of text
//   name        [a-zA-Z0-9_-]+ (llama.cpp has no '_'; allowed here)
//   alternatives  sequence ("|" sequence)*; a sequence may be empty
//   item        "literal"  [class]  [^class]  .  name  ( alternatives )
//   postfix     *  +  ?  {m}  {m,}  {m,n}  {,n} (the last one is ours);
//               postfixes stack: "a"{2}? is ("a"{2})?
//   escapes     \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, in literals
//               and classes alike; no others
//   comments    # to the end of the line
//
// Terminals are Unicode characters: text between quotes or brackets is
// UTF-8 (checked), an escape names a code point (\xFF is U+00FF, two
// bytes), `.` is any one character, and classes are sets of code points.
// In a class, '-' between two characters makes a range; anywhere else
// ([-a], [a-], [a-c-e]) it is itself. A reversed range ([z-a]) is empty.
//
// Newlines, as in llama.cpp: a newline ends the rule, except right after
// "::=" or "|" and anywhere inside parentheses. So a rule can continue on
// the next line only through an open '(' or a trailing '|'; a line that
// starts with '|' is an error.
//
// Rules may be referenced before they are defined. A rule defined twice
// keeps its last definition (llama.cpp's behaviour). Left recursion is not
// checked here; Compile refuses it.
//
// Errors (messages start with "line:column: "):
//  - InvalidArgument: a syntax error (says what was expected), an unknown
//    escape, invalid UTF-8, an escape in a literal naming no character (a
//    surrogate, past U+10FFFF), a reference to an undefined rule (named, at
//    its first use), no rule named `root_name`, an empty class "[]" or "[^]"
//    (llama.cpp reads those as the empty string; write "" or . instead), a
//    repetition with m > n, and input past the limits below.
//  - Unimplemented: llama.cpp's token references (<[id]>, <text>, !<...>).
//
// Differences from llama.cpp, beyond the '_' and {,n} additions: bounds
// are exact up to kGbnfMaxRepeat and an error past it (llama.cpp refuses a
// min over 2000 and reads a max over 2000 as unbounded), and nested
// repetitions are not multiplied out here, so llama.cpp's limit on their
// product does not apply (Compile's limits do).
//
// Thread-safe: a pure function.

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/grammar.h"

namespace paceline::engine::grammar {

// Limits against hostile input; past any of them, InvalidArgument.
inline constexpr size_t kGbnfMaxTextBytes = 1 << 20;  // the grammar's text
inline constexpr int kGbnfMaxNesting = 200;           // '(' inside '('
inline constexpr int32_t kGbnfMaxRepeat = 10000;      // m and n in {m,n}
inline constexpr int32_t kGbnfMaxNodes = 500000;      // Grammar::num_exprs

// Parses `text` into a new Grammar whose root is the rule named
// `root_name`. The result passes Grammar::Validate.
absl::StatusOr<Grammar> ParseGbnf(absl::string_view text,
                                  absl::string_view root_name = "root");

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_GBNF_H_
