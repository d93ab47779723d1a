#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_REGEX_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_REGEX_H_

// The regex front end: an ECMAScript pattern (the `u` flag's dialect, the
// one JSON Schema's `pattern` and vLLM's regex guide speak) becomes one
// grammar expression over UTF-8 bytes.
//
// Supported: literal characters (any code point); the escapes \t \n \r \f
// \v \0 \cX \xHH \uHHHH (a surrogate pair of them is one character)
// \u{H...}; an escaped character that is not a letter or digit stands for
// itself (\. \- \/ \@ ...); \d \D \w \W \s \S; `.` (any character but
// \n \r U+2028 U+2029); classes [...] and [^...] with ranges and escapes
// (\b there is U+0008); groups (...) (?:...) (?<name>...); alternation;
// the quantifiers * + ? {n} {n,} {n,m}, lazy or not (the language is the
// same); the anchors ^ and $ anywhere, handled exactly (`a^b` matches
// nothing, `(^a|b)c` in search mode anchors only its first branch).
//
// Refused with Unimplemented, the message naming the feature:
// backreferences (\1, \k<name>), lookahead and lookbehind, word boundaries
// (\b \B), inline modifiers ((?i) ...), Unicode property escapes (\p{..}).
// Refused with InvalidArgument, the message giving the byte offset and
// what was expected: syntax errors, as the `u` flag defines them (a lone
// `{`, `}` or `]`, an unknown letter escape such as \A or \z, an octal
// escape, a range out of order), and the resource limits below.
//
// Thread-compatible, like Grammar.

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/grammar.h"

namespace paceline::engine::grammar {

// Emits the grammar expression for ONE character drawn from a code point
// class. The ranges are sorted, merged and free of surrogates; never empty.
// The default emitter is Grammar::Codepoints (raw UTF-8); the JSON Schema
// compiler passes one that writes each character in its JSON-string-escaped
// form.
using CharEmitter =
    std::function<ExprId(Grammar*, std::vector<CodepointRange>)>;

inline constexpr int32_t kMaxRegexBytes = 64 * 1024;  // pattern length
inline constexpr int32_t kMaxRegexDepth = 200;        // nested groups

struct RegexOptions {
  // true: JSON Schema `pattern` semantics: the match may lie anywhere in
  // the text (any characters, newlines included, before and after it)
  // unless ^ / $ anchor it. false: the whole text must match (vLLM's and
  // --regex's semantics), as if the pattern were ^(?:pattern)$.
  bool search = false;
  // Every character class, the implicit search prefix/suffix included,
  // goes through it. Empty: Grammar::Codepoints.
  CharEmitter emit;
  // The largest bound accepted in {n}, {n,} and {n,m}; a larger one is
  // InvalidArgument.
  int32_t max_repeat = 1000;
  // The largest expression accepted, counted as the tree the compiler
  // unrolls: each repetition's body counted once per copy ({n,m}: m copies,
  // {n,}: n + 1), the emitter's nodes included. A larger one (e.g. a {1000}
  // inside a {1000}) is InvalidArgument, and so is creating more than this
  // many grammar nodes.
  int32_t max_nodes = 200000;
};

// Adds `pattern` (UTF-8) to `g` and returns the expression for the language
// described by `options`. On error `g` may hold unreferenced expressions;
// nothing else in it changes.
absl::StatusOr<ExprId> AddRegex(Grammar* g, absl::string_view pattern,
                                const RegexOptions& options = {});

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_REGEX_H_
