#ifndef PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_H_
#define PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_H_

// The grammar engine's one input form: a context-free grammar over bytes.
// Every front end (JSON Schema, any-JSON, regex, choice, GBNF) builds one of
// these and compile.h turns it into per-rule automata.
//
// A grammar is a list of named rules; each rule's body is an expression
// over bytes and references to rules. Expressions live in one arena and
// are named by ExprId; they are immutable once made, so one expression may
// appear under several parents (a DAG). The language of a rule is the
// usual one: kBytes matches one byte in its ranges, kSeq concatenates,
// kAlt unites, kRepeat matches min..max copies (max kUnbounded = no limit),
// kRef matches its rule. Text is bytes: a Unicode class is its UTF-8
// alternatives (Codepoints), so matching is byte by byte and a token may
// end inside a character.
//
// Thread-compatible: built by one thread, then read-only.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paceline::engine::grammar {

using ExprId = int32_t;
using RuleId = int32_t;

inline constexpr int32_t kUnbounded = -1;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

struct ByteRange {
  uint8_t lo = 0;
  uint8_t hi = 0;  // inclusive
};

struct CodepointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
};

enum class ExprKind : uint8_t {
  kEmpty,    // the empty string
  kNothing,  // no string at all (an empty class, an unsatisfiable choice)
  kBytes,    // one byte in `ranges`
  kSeq,      // children in order
  kAlt,      // any one child
  kRepeat,   // children[0], min..max times
  kRef,      // rule `rule`
};

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  int32_t min = 0;                // kRepeat
  int32_t max = 0;                // kRepeat; kUnbounded for no limit
  RuleId rule = -1;               // kRef
  std::vector<ByteRange> ranges;  // kBytes: sorted, disjoint, non-adjacent
  std::vector<ExprId> children;   // kSeq, kAlt: items; kRepeat: one
};

struct Rule {
  std::string name;
  ExprId body = -1;  // -1 until SetRule
};

class Grammar {
 public:
  // Leaves.
  ExprId Empty();
  ExprId Nothing();
  ExprId Bytes(std::vector<ByteRange> ranges);  // normalized; none: Nothing
  ExprId Byte(uint8_t byte) { return Bytes({{byte, byte}}); }
  ExprId Literal(absl::string_view bytes);  // Empty for ""
  // One character in `ranges` (any order, may overlap), as UTF-8; ranges
  // above kMaxCodepoint are clipped, surrogates (D800-DFFF) dropped.
  ExprId Codepoints(std::vector<CodepointRange> ranges);
  // Any character outside `ranges` (the surrogates excluded).
  ExprId NotCodepoints(std::vector<CodepointRange> ranges);

  // Combinators. Seq of nothing is Empty; Alt of nothing is Nothing; a
  // single item is returned as is.
  ExprId Seq(std::vector<ExprId> items);
  ExprId Alt(std::vector<ExprId> items);
  ExprId Repeat(ExprId item, int32_t min, int32_t max);
  ExprId Optional(ExprId item) { return Repeat(item, 0, 1); }
  ExprId Star(ExprId item) { return Repeat(item, 0, kUnbounded); }
  ExprId Plus(ExprId item) { return Repeat(item, 1, kUnbounded); }

  // Rules. AddRule reserves a rule (so it can be referenced before its body
  // exists, for recursion); SetRule gives it its body once.
  RuleId AddRule(std::string name);
  void SetRule(RuleId rule, ExprId body);
  ExprId Ref(RuleId rule);
  // The first rule named `name`, or -1.
  RuleId FindRule(absl::string_view name) const;

  void set_root(RuleId rule) { root_ = rule; }
  RuleId root() const { return root_; }

  const Expr& expr(ExprId id) const { return exprs_[id]; }
  const Rule& rule(RuleId id) const { return rules_[id]; }
  int32_t num_exprs() const { return static_cast<int32_t>(exprs_.size()); }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }

  // Every rule has a body, every reference and child names an existing
  // node, repeat counts are 0 <= min <= max (or max unbounded), the root is
  // set. InvalidArgument naming the first problem.
  absl::Status Validate() const;

  // A readable form for errors and `paceline grammar`: one line per rule,
  // "name ::= body" in GBNF-like syntax.
  std::string ToString() const;

 private:
  ExprId Add(Expr expr);

  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  RuleId root_ = -1;
};

// The UTF-8 encodings of the characters in [lo, hi] as a list of byte-range
// sequences (each 1-4 ranges long): a string of bytes encodes a character
// in the range exactly when it matches one sequence. lo <= hi <= 0x10FFFF;
// the caller removes surrogates.
std::vector<std::vector<ByteRange>> Utf8Sequences(uint32_t lo, uint32_t hi);

}  // namespace paceline::engine::grammar

#endif  // PACELINE_ENGINE_SAMPLING_GRAMMAR_GRAMMAR_H_
