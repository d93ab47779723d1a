#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_REGEX_SYNTAX_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_REGEX_SYNTAX_H_

// The regex front end's internals (regex.h is the interface): the pattern
// parser and its syntax tree. regex.cc simplifies the tree in search mode
// and lowers it to grammar expressions.
//
// The parser reads the dialect regex.h describes and reports the first
// error as regex.h says: InvalidArgument for a syntax error ("regex: at
// byte N: ...") or a limit, Unimplemented naming the feature for what is
// not supported.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/sampling/grammar/grammar.h"

namespace paceline::engine::grammar::regex_internal {

using Ranges = std::vector<CodepointRange>;

// Sorted, merged, clipped to kMaxCodepoint, surrogates removed.
Ranges Normalize(Ranges in);
// Every code point (surrogates excluded) outside `in`.
Ranges Complement(Ranges in);

// The syntax tree. kSeq with no children is the empty pattern.
enum class NodeKind : uint8_t { kClass, kSeq, kAlt, kRepeat, kStart, kEnd };

struct Node {
  NodeKind kind = NodeKind::kSeq;
  Ranges ranges;                  // kClass: normalized
  std::vector<int32_t> children;  // kSeq, kAlt; kRepeat: one
  int32_t min = 0;                // kRepeat
  int32_t max = 0;                // kRepeat; kUnbounded for no limit
};

Node MakeNode(NodeKind kind);

// A parsed pattern: `root` indexes `nodes`; children index it too.
struct Syntax {
  std::vector<Node> nodes;
  int32_t root = -1;
};

// Parses `pattern` (UTF-8, at most kMaxRegexBytes, groups nested at most
// kMaxRegexDepth deep, repetition bounds at most `max_repeat`).
absl::StatusOr<Syntax> ParseRegex(absl::string_view pattern,
                                  int32_t max_repeat);

}  // namespace paceline::engine::grammar::regex_internal

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_REGEX_SYNTAX_H_
