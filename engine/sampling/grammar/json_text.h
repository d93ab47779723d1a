#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_TEXT_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_TEXT_H_

// The lexical pieces of JSON text as grammar expressions (RFC 8259), for
// the JSON Schema compiler: characters inside strings, strings with length
// bounds, numbers with ranges, literals, any value.
//
// Strings are written one way per character (so "a key not in this list"
// is exact): a character is itself, except '"' and '\' (written \" and
// \\), the controls with a short escape (\b \f \n \r \t), and the other
// controls below U+0020 (written \u00XX, hex digits in either case; any
// control may be written that way when a class holds all of them). That
// is what JSON writers produce (nlohmann's dump, Python's json.dumps with
// ensure_ascii off); \/ and \u escapes of other characters are not
// generated and not accepted. A length counts characters (code points).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/grammar.h"

namespace paceline::engine::grammar {

// One character from `ranges`, written inside a JSON string.
ExprId JsonChar(Grammar* g, std::vector<CodepointRange> ranges);
// Any one character, written inside a JSON string.
ExprId AnyJsonChar(Grammar* g);
// The JSON string (quotes included) spelling exactly `text` (UTF-8).
ExprId JsonStringLiteral(Grammar* g, absl::string_view text);
// A JSON string of min..max characters (max kUnbounded: no limit).
ExprId JsonStringOfLength(Grammar* g, int32_t min, int32_t max);
// The rest of a JSON string: any characters, then the closing quote.
ExprId JsonStringRest(Grammar* g);
// The JSON string of any text except the listed ones (UTF-8 texts).
// `rest` matches JsonStringRest's language: JsonStringRest itself (the
// rule then calls nothing) or a reference to a shared rule; it follows
// every place the text leaves the list, once.
ExprId JsonStringExcept(Grammar* g, const std::vector<std::string>& texts,
                        ExprId rest);

// A bound of a numeric range, as the decimal text of the schema's number
// ("-12.5", "3", "1e3"...). Absent: unbounded.
struct NumberBound {
  bool present = false;
  std::string text;
  bool exclusive = false;
};

// JSON numbers in [lo, hi] (each bound optional, inclusive or exclusive).
// `integer`: only integral values, written as integers (3, not 3.0: a
// valid spelling JSON Schema accepts, but not one this engine generates).
// Unbounded numbers may carry an exponent; bounded ones are written without
// one. InvalidArgument when a bound is not a number; an empty range is the
// empty language (Nothing).
absl::StatusOr<ExprId> JsonNumberRange(Grammar* g, const NumberBound& lo,
                                       const NumberBound& hi, bool integer);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_JSON_TEXT_H_
