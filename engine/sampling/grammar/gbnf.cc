#include "engine/sampling/grammar/gbnf.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace paceline::engine::grammar {
namespace {

// The recursive descent mirrors llama.cpp's reading: after every item the
// parser skips blanks and comments, and newlines too only inside
// parentheses; "::=", "|" and "(" are followed by a skip that takes
// newlines. A sequence stops at the first character that cannot start an
// item or a postfix, and its caller decides whether that character is
// right there ('|', ')', a newline, the end).

constexpr size_t kNoRef = static_cast<size_t>(-1);

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `cp`'s UTF-8 form: the one sequence Utf8Sequences gives for [cp, cp].
void AppendUtf8(uint32_t cp, std::string* out) {
  const std::vector<std::vector<ByteRange>> seqs = Utf8Sequences(cp, cp);
  for (ByteRange b : seqs[0]) out->push_back(static_cast<char>(b.lo));
}

// The length of the well-formed UTF-8 character at the start of `s`
// (Unicode's table 3-7: no overlong forms, no surrogates), or 0.
int Utf8CharLength(absl::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = b(0);
  if (lead < 0x80) return 1;
  int len = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;  // the bounds of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < static_cast<size_t>(len)) return 0;
  if (b(1) < lo || b(1) > hi) return 0;
  for (int i = 2; i < len; ++i) {
    if (b(i) < 0x80 || b(i) > 0xBF) return 0;
  }
  return len;
}

uint32_t DecodeUtf8(absl::string_view s, int len) {
  static constexpr uint8_t kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = static_cast<uint8_t>(s[0]) & kLeadMask[len];
  for (int i = 1; i < len; ++i) cp = (cp << 6) | (s[i] & 0x3F);
  return cp;
}

// Sorted and merged; code points past kMaxCodepoint clipped, reversed
// ranges dropped (llama.cpp's [z-a] matches nothing).
std::vector<CodepointRange> MergeRanges(std::vector<CodepointRange> ranges) {
  std::vector<CodepointRange> kept;
  for (CodepointRange r : ranges) {
    if (r.lo > r.hi || r.lo > kMaxCodepoint) continue;
    kept.push_back({r.lo, std::min(r.hi, kMaxCodepoint)});
  }
  std::sort(kept.begin(), kept.end(),
            [](CodepointRange a, CodepointRange b) { return a.lo < b.lo; });
  std::vector<CodepointRange> merged;
  for (CodepointRange r : kept) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

// About the nodes Grammar::Codepoints makes for `merged` (one per byte
// range, one per sequence, a few for the surrogate gap's split): checked
// before a class is built so that one huge class cannot blow up first.
int64_t CodepointNodes(const std::vector<CodepointRange>& merged) {
  int64_t nodes = 16;
  for (CodepointRange r : merged) {
    for (const std::vector<ByteRange>& seq : Utf8Sequences(r.lo, r.hi)) {
      nodes += static_cast<int64_t>(seq.size()) + 1;
    }
  }
  return nodes;
}

std::vector<CodepointRange> Complement(
    const std::vector<CodepointRange>& merged) {
  std::vector<CodepointRange> out;
  uint32_t next = 0;
  for (CodepointRange r : merged) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return out;
}

class Parser {
 public:
  explicit Parser(absl::string_view text) : text_(text) {}

  absl::StatusOr<Grammar> Parse(absl::string_view root_name);

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool LookingAt(absl::string_view s) const {
    return absl::StartsWith(text_.substr(pos_), s);
  }

  // Blanks, tabs and comments; newlines ('\n', '\r') too when `newlines`.
  void SkipSpace(bool newlines);

  absl::Status ParseRule();
  absl::StatusOr<ExprId> ParseAlternatives(bool nested, int depth);
  absl::StatusOr<ExprId> ParseSequence(bool nested, int depth);
  absl::StatusOr<ExprId> ParseGroup(int depth);
  absl::StatusOr<ExprId> ParseLiteral();
  absl::StatusOr<ExprId> ParseClass();
  absl::StatusOr<ExprId> ParseReference();
  // At '{': the repetition applied to `item`.
  absl::StatusOr<ExprId> ParseBraces(ExprId item, bool nested);
  // A decimal count, at most kGbnfMaxRepeat.
  absl::StatusOr<int32_t> ParseCount();
  // One character of a literal or class: an escape or a UTF-8 character.
  absl::StatusOr<uint32_t> ParseChar();

  RuleId RuleNamed(absl::string_view name);
  // InvalidArgument unless `more` nodes still fit under kGbnfMaxNodes.
  absl::Status Reserve(int64_t more);

  absl::Status Error(size_t at, absl::string_view what) const;
  std::string LineColumn(size_t at) const;
  // What is at `at`, for "found ...": a quoted character or a word.
  std::string Describe(size_t at) const;
  // The error for a rule or group that stops at something it cannot read.
  absl::Status Unexpected(absl::string_view expected) const;

  const absl::string_view text_;
  size_t pos_ = 0;
  Grammar grammar_;
  absl::flat_hash_map<std::string, RuleId> rule_ids_;
  std::vector<ExprId> bodies_;     // [rule]: its last definition, or -1
  std::vector<size_t> first_ref_;  // [rule]: offset of its first use
  ExprId any_char_ = -1;           // `.`, made once and shared
};

void Parser::SkipSpace(bool newlines) {
  while (!AtEnd()) {
    const char c = Peek();
    if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
      ++pos_;
    } else if (c == '#') {
      while (!AtEnd() && Peek() != '\n' && Peek() != '\r') ++pos_;
    } else {
      return;
    }
  }
}

absl::StatusOr<Grammar> Parser::Parse(absl::string_view root_name) {
  if (text_.size() > kGbnfMaxTextBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("1:1: the grammar is ", text_.size(),
                     " bytes, over the limit of ", kGbnfMaxTextBytes));
  }
  SkipSpace(true);
  while (!AtEnd()) RETURN_IF_ERROR(ParseRule());

  // The first use in the text of any undefined rule.
  RuleId undefined = -1;
  for (RuleId r = 0; r < grammar_.num_rules(); ++r) {
    if (bodies_[r] >= 0) continue;
    if (undefined < 0 || first_ref_[r] < first_ref_[undefined]) undefined = r;
  }
  if (undefined >= 0) {
    return Error(
        first_ref_[undefined],
        absl::StrCat("undefined rule '", grammar_.rule(undefined).name, "'"));
  }
  const auto root = rule_ids_.find(root_name);
  if (root == rule_ids_.end()) {
    return Error(text_.size(),
                 absl::StrCat("the grammar defines no rule named '", root_name,
                              "' (its root)"));
  }
  for (RuleId r = 0; r < grammar_.num_rules(); ++r) {
    grammar_.SetRule(r, bodies_[r]);
  }
  grammar_.set_root(root->second);
  RETURN_IF_ERROR(grammar_.Validate());
  return std::move(grammar_);
}

absl::Status Parser::ParseRule() {
  const size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek())) ++pos_;
  if (pos_ == start) {
    std::string what =
        absl::StrCat("expected a rule name, found ", Describe(pos_));
    if (Peek() == '|' || Peek() == '"' || Peek() == '(' || Peek() == '[') {
      absl::StrAppend(&what,
                      " (a rule continues onto the next line only after a "
                      "trailing '|' or inside parentheses)");
    }
    return Error(pos_, what);
  }
  const absl::string_view name = text_.substr(start, pos_ - start);
  const RuleId rule = RuleNamed(name);
  SkipSpace(false);
  if (!LookingAt("::=")) {
    return Error(pos_, absl::StrCat("expected '::=' after the rule name '",
                                    name, "', found ", Describe(pos_)));
  }
  pos_ += 3;
  SkipSpace(true);
  ASSIGN_OR_RETURN(const ExprId body, ParseAlternatives(false, 0));
  if (Peek() == '\r') {
    pos_ += Peek(1) == '\n' ? 2 : 1;
  } else if (Peek() == '\n') {
    ++pos_;
  } else if (!AtEnd()) {
    return Unexpected("a symbol, '|' or the end of the line");
  }
  SkipSpace(true);
  bodies_[rule] = body;  // a second definition replaces the first
  return absl::OkStatus();
}

absl::StatusOr<ExprId> Parser::ParseAlternatives(bool nested, int depth) {
  std::vector<ExprId> alternatives;
  ASSIGN_OR_RETURN(ExprId first, ParseSequence(nested, depth));
  alternatives.push_back(first);
  while (Peek() == '|') {
    ++pos_;
    SkipSpace(true);
    ASSIGN_OR_RETURN(ExprId next, ParseSequence(nested, depth));
    alternatives.push_back(next);
  }
  const ExprId alt = grammar_.Alt(std::move(alternatives));
  RETURN_IF_ERROR(Reserve(0));
  return alt;
}

absl::StatusOr<ExprId> Parser::ParseSequence(bool nested, int depth) {
  std::vector<ExprId> items;
  while (!AtEnd()) {
    const char c = Peek();
    const size_t at = pos_;
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (items.empty()) {
        return Error(
            at, absl::StrCat("'", std::string(1, c), "' must follow a symbol"));
      }
      ExprId& item = items.back();
      if (c == '{') {
        ASSIGN_OR_RETURN(item, ParseBraces(item, nested));
      } else {
        ++pos_;
        item = c == '*'   ? grammar_.Star(item)
               : c == '+' ? grammar_.Plus(item)
                          : grammar_.Optional(item);
      }
    } else if (c == '<' || c == '!') {
      return absl::UnimplementedError(absl::StrCat(
          LineColumn(at),
          ": token references (<[id]>, <text>, !<...>) are not supported"));
    } else {
      absl::StatusOr<ExprId> item;
      if (c == '"') {
        item = ParseLiteral();
      } else if (c == '[') {
        item = ParseClass();
      } else if (c == '(') {
        item = ParseGroup(depth);
      } else if (c == '.') {
        ++pos_;
        if (any_char_ < 0) {
          RETURN_IF_ERROR(Reserve(CodepointNodes({{0, kMaxCodepoint}})));
          any_char_ = grammar_.NotCodepoints({});
        }
        item = any_char_;
      } else if (IsNameChar(c)) {
        item = ParseReference();
      } else {
        break;
      }
      if (!item.ok()) return item.status();
      items.push_back(*item);
    }
    SkipSpace(nested);
    RETURN_IF_ERROR(Reserve(0));
  }
  return grammar_.Seq(std::move(items));
}

absl::StatusOr<ExprId> Parser::ParseGroup(int depth) {
  const size_t open = pos_;
  if (depth >= kGbnfMaxNesting) {
    return Error(open, absl::StrCat("parentheses nested more than ",
                                    kGbnfMaxNesting, " deep"));
  }
  ++pos_;
  SkipSpace(true);
  ASSIGN_OR_RETURN(const ExprId body, ParseAlternatives(true, depth + 1));
  if (Peek() != ')') {
    return Unexpected(
        absl::StrCat("')' to close the '(' at ", LineColumn(open)));
  }
  ++pos_;
  return body;
}

absl::StatusOr<ExprId> Parser::ParseLiteral() {
  const size_t open = pos_;
  ++pos_;
  std::string bytes;
  while (true) {
    if (AtEnd()) return Error(open, "unterminated string literal");
    if (Peek() == '"') break;
    const size_t at = pos_;
    ASSIGN_OR_RETURN(const uint32_t cp, ParseChar());
    if (cp > kMaxCodepoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return Error(at,
                   absl::StrFormat("U+%04X is not a Unicode character", cp));
    }
    AppendUtf8(cp, &bytes);
  }
  ++pos_;
  RETURN_IF_ERROR(Reserve(static_cast<int64_t>(bytes.size()) + 1));
  return grammar_.Literal(bytes);
}

absl::StatusOr<ExprId> Parser::ParseClass() {
  const size_t open = pos_;
  ++pos_;
  const bool negated = Peek() == '^';
  if (negated) ++pos_;
  std::vector<CodepointRange> ranges;
  while (true) {
    if (AtEnd()) return Error(open, "unterminated character class");
    if (Peek() == ']') break;
    ASSIGN_OR_RETURN(const uint32_t lo, ParseChar());
    uint32_t hi = lo;
    // A '-' before the closing ']' (or the end) is the character itself.
    if (Peek() == '-' && pos_ + 1 < text_.size() && Peek(1) != ']') {
      ++pos_;
      ASSIGN_OR_RETURN(hi, ParseChar());
    }
    ranges.push_back({lo, hi});
  }
  ++pos_;
  if (ranges.empty()) {
    return Error(open,
                 absl::StrCat("empty character class '", negated ? "[^]" : "[]",
                              "' (write \"\" for the empty string, . "
                              "for any character)"));
  }
  std::vector<CodepointRange> merged = MergeRanges(ranges);
  RETURN_IF_ERROR(
      Reserve(CodepointNodes(negated ? Complement(merged) : merged)));
  return negated ? grammar_.NotCodepoints(std::move(merged))
                 : grammar_.Codepoints(std::move(merged));
}

absl::StatusOr<ExprId> Parser::ParseReference() {
  const size_t start = pos_;
  while (!AtEnd() && IsNameChar(Peek())) ++pos_;
  const RuleId rule = RuleNamed(text_.substr(start, pos_ - start));
  if (first_ref_[rule] == kNoRef) first_ref_[rule] = start;
  return grammar_.Ref(rule);
}

absl::StatusOr<ExprId> Parser::ParseBraces(ExprId item, bool nested) {
  const size_t open = pos_;
  ++pos_;
  SkipSpace(nested);
  int32_t min = 0;
  int32_t max = kUnbounded;
  const bool has_min = IsDigit(Peek());
  if (has_min) {
    ASSIGN_OR_RETURN(min, ParseCount());
    SkipSpace(nested);
  } else if (Peek() != ',') {
    return Error(pos_, absl::StrCat("expected a number after '{', found ",
                                    Describe(pos_)));
  }
  if (Peek() == '}' && has_min) {
    max = min;
  } else if (Peek() == ',') {
    ++pos_;
    SkipSpace(nested);
    if (IsDigit(Peek())) {
      ASSIGN_OR_RETURN(max, ParseCount());
      SkipSpace(nested);
    } else if (!has_min) {
      return Error(pos_, absl::StrCat("expected a number in '{,n}', found ",
                                      Describe(pos_)));
    }
    if (Peek() != '}') {
      return Error(pos_, absl::StrCat("expected '}', found ", Describe(pos_)));
    }
  } else {
    return Error(pos_,
                 absl::StrCat("expected ',' or '}', found ", Describe(pos_)));
  }
  ++pos_;
  if (max != kUnbounded && max < min) {
    return Error(open, absl::StrFormat("repetition {%d,%d}: the minimum is "
                                       "greater than the maximum",
                                       min, max));
  }
  return grammar_.Repeat(item, min, max);
}

absl::StatusOr<int32_t> Parser::ParseCount() {
  const size_t start = pos_;
  int64_t value = 0;
  while (IsDigit(Peek())) {
    value = value * 10 + (Peek() - '0');
    if (value > kGbnfMaxRepeat) {
      while (IsDigit(Peek())) ++pos_;
      return Error(
          start,
          absl::StrCat("repetition count ", text_.substr(start, pos_ - start),
                       " is over the limit of ", kGbnfMaxRepeat));
    }
    ++pos_;
  }
  return static_cast<int32_t>(value);
}

absl::StatusOr<uint32_t> Parser::ParseChar() {
  const size_t at = pos_;
  if (Peek() != '\\') {
    const int len = Utf8CharLength(text_.substr(pos_));
    if (len == 0) {
      return Error(at, absl::StrFormat("invalid UTF-8 (byte 0x%02X)",
                                       static_cast<uint8_t>(Peek())));
    }
    pos_ += len;
    return DecodeUtf8(text_.substr(at), len);
  }
  const char kind = Peek(1);
  int digits = 0;
  switch (kind) {
    case 'n':
      pos_ += 2;
      return '\n';
    case 'r':
      pos_ += 2;
      return '\r';
    case 't':
      pos_ += 2;
      return '\t';
    case '\\':
    case '"':
    case '[':
    case ']':
      pos_ += 2;
      return static_cast<uint32_t>(kind);
    case 'x':
      digits = 2;
      break;
    case 'u':
      digits = 4;
      break;
    case 'U':
      digits = 8;
      break;
    default:
      if (pos_ + 1 >= text_.size()) return Error(at, "unterminated escape");
      if (kind <= ' ' || kind >= 0x7F) {
        return Error(at, absl::StrCat("unknown escape: '\\' followed by ",
                                      Describe(at + 1)));
      }
      return Error(at, absl::StrCat("unknown escape '\\", std::string(1, kind),
                                    "' (known: \\n \\r \\t \\\\ \\\" \\[ \\] "
                                    "\\x \\u \\U)"));
  }
  pos_ += 2;
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const int v = HexValue(Peek());
    if (v < 0) {
      return Error(at,
                   absl::StrCat("expected ", digits, " hex digits after '\\",
                                std::string(1, kind), "'"));
    }
    value = (value << 4) | static_cast<uint32_t>(v);
    ++pos_;
  }
  return value;
}

RuleId Parser::RuleNamed(absl::string_view name) {
  const auto [it, inserted] = rule_ids_.try_emplace(name, grammar_.num_rules());
  if (inserted) {
    grammar_.AddRule(std::string(name));
    bodies_.push_back(-1);
    first_ref_.push_back(kNoRef);
  }
  return it->second;
}

absl::Status Parser::Reserve(int64_t more) {
  if (grammar_.num_exprs() + more <= kGbnfMaxNodes) return absl::OkStatus();
  return Error(pos_, absl::StrCat("the grammar is too large: over ",
                                  kGbnfMaxNodes, " nodes"));
}

absl::Status Parser::Error(size_t at, absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(LineColumn(at), ": ", what));
}

std::string Parser::LineColumn(size_t at) const {
  int line = 1;
  int column = 1;
  for (size_t i = 0; i < at && i < text_.size(); ++i) {
    const char c = text_[i];
    if (c == '\n' ||
        (c == '\r' && (i + 1 >= text_.size() || text_[i + 1] != '\n'))) {
      ++line;
      column = 1;
    } else if (c != '\r' && (static_cast<uint8_t>(c) & 0xC0) != 0x80) {
      ++column;  // a column is a character, not a UTF-8 byte
    }
  }
  return absl::StrCat(line, ":", column);
}

std::string Parser::Describe(size_t at) const {
  if (at >= text_.size()) return "end of input";
  const char c = text_[at];
  if (c == '\n' || c == '\r') return "end of line";
  if (IsNameChar(c)) {
    size_t end = at;
    while (end < text_.size() && IsNameChar(text_[end])) ++end;
    return absl::StrCat("'", text_.substr(at, end - at), "'");
  }
  if (static_cast<uint8_t>(c) >= 0x20 && static_cast<uint8_t>(c) < 0x7F) {
    return absl::StrCat("'", std::string(1, c), "'");
  }
  const int len = Utf8CharLength(text_.substr(at));
  if (len > 1) return absl::StrCat("'", text_.substr(at, len), "'");
  return absl::StrFormat("byte 0x%02X", static_cast<uint8_t>(c));
}

absl::Status Parser::Unexpected(absl::string_view expected) const {
  if (LookingAt("::=")) {
    return Error(pos_, absl::StrCat("expected ", expected,
                                    ", found '::=': the rule before it is not "
                                    "finished (an open '(' or a trailing '|' "
                                    "continues it onto the next line)"));
  }
  if (Peek() == ')') {
    return Error(pos_, absl::StrCat("expected ", expected,
                                    ", found ')' with no '(' to close"));
  }
  return Error(pos_,
               absl::StrCat("expected ", expected, ", found ", Describe(pos_)));
}

}  // namespace

absl::StatusOr<Grammar> ParseGbnf(absl::string_view text,
                                  absl::string_view root_name) {
  return Parser(text).Parse(root_name);
}

}  // namespace paceline::engine::grammar
