#include "engine/sampling/grammar/regex.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

// Three steps. The parser turns the pattern into a small syntax tree (or
// the first error); in search mode EdgeTrimmer simplifies the tree's
// unanchored ends; the lowering turns it into grammar expressions.
//
// Anchors are exact, not special-cased. A subpattern's matches depend on
// two facts about where it is matched: whether it starts at the start of
// the text (s) and whether it ends at the end (e), since ^ holds only at
// position 0 and $ only at the end. So a subpattern that contains an
// anchor lowers to four expressions n[s,e], its non-empty matches in each
// context, plus four flags z[s,e], whether it can match the empty string
// there. Concatenation then reads
//   n[s,e](XY) = n[s,0](X) n[0,e](Y)
//              | n[s,e](Y)   where z[s,0](X)
//              | n[s,e](X)   where z[0,e](Y)
//   z[s,e](XY) = z[s,e](X) and z[s,e](Y)
// and the whole pattern is n[1,1] (whole-text mode) or, in search mode,
//   .* n[0,0] .* | n[1,0] .* | .* n[0,1] | n[1,1]   (plus the empty cases).
// Both anchors are positive, so a match in context (0,e) is also one in
// (1,e) (and likewise for e); that is why n[s,e] may also match the empty
// string where z[s,e] holds without breaking these formulas, and why an
// anchor-free subpattern needs one plain expression for all four contexts.

namespace paceline::engine::grammar {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

using Ranges = std::vector<CodepointRange>;

// Sorted, merged, clipped to kMaxCodepoint, surrogates removed.
Ranges Normalize(Ranges in) {
  std::sort(in.begin(), in.end(),
            [](CodepointRange a, CodepointRange b) { return a.lo < b.lo; });
  Ranges merged;
  for (CodepointRange r : in) {
    if (r.lo > r.hi || r.lo > kMaxCodepoint) continue;
    r.hi = std::min(r.hi, kMaxCodepoint);
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  Ranges out;
  for (CodepointRange r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

// Every code point (surrogates excluded) outside `in`.
Ranges Complement(Ranges in) {
  Ranges out;
  uint32_t next = 0;
  for (CodepointRange r : Normalize(std::move(in))) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) out.push_back({next, kMaxCodepoint});
  return Normalize(std::move(out));
}

// ECMAScript's class escapes (without the i flag).
Ranges Digits() { return {{'0', '9'}}; }
Ranges WordChars() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// WhiteSpace (tab, VT, FF, space, NBSP, ZWNBSP, category Zs) and
// LineTerminator (LF, CR, LS, PS).
Ranges Spaces() {
  return {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},
          {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
          {0xFEFF, 0xFEFF}};
}
Ranges LineTerminators() {
  return {{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}};
}

absl::Status SyntaxError(size_t at, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("regex: at byte %d: %s", at, what));
}

absl::Status Unsupported(size_t at, absl::string_view feature) {
  return absl::UnimplementedError(absl::StrFormat(
      "regex: at byte %d: %s is not supported (not a regular language or "
      "not implemented)",
      at, feature));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The syntax tree. kSeq with no children is the empty pattern.
enum class NodeKind : uint8_t { kClass, kSeq, kAlt, kRepeat, kStart, kEnd };

struct Node {
  NodeKind kind = NodeKind::kSeq;
  Ranges ranges;                  // kClass: normalized
  std::vector<int32_t> children;  // kSeq, kAlt; kRepeat: one
  int32_t min = 0;                // kRepeat
  int32_t max = 0;                // kRepeat; kUnbounded for no limit
};

Node MakeNode(NodeKind kind) {
  Node node;
  node.kind = kind;
  return node;
}

class Parser {
 public:
  Parser(absl::string_view pattern, int32_t max_repeat)
      : p_(pattern), max_repeat_(max_repeat) {}

  // The root's index into nodes().
  absl::StatusOr<int32_t> Parse();
  std::vector<Node>* nodes() { return &nodes_; }

 private:
  // A class atom or escape: one code point, or a set (\d, \w, ...).
  struct Atom {
    bool is_set = false;
    uint32_t cp = 0;
    Ranges set;
  };

  absl::StatusOr<int32_t> ParseDisjunction(int depth);
  absl::StatusOr<int32_t> ParseAlternative(int depth);
  absl::StatusOr<int32_t> ParseGroup(size_t open, int depth);
  absl::StatusOr<int32_t> ParseQuantifier(int32_t atom);
  absl::StatusOr<int32_t> ParseCount();
  absl::StatusOr<Ranges> ParseClass(size_t open);
  absl::StatusOr<Atom> ParseClassAtom();
  absl::StatusOr<Atom> ParseEscape(bool in_class);
  absl::StatusOr<uint32_t> ParseUnicodeEscape(size_t at);
  absl::StatusOr<uint32_t> ParseHex(int digits, size_t at);
  absl::StatusOr<uint32_t> NextCodepoint();

  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek() const { return AtEnd() ? '\0' : p_[pos_]; }
  bool Consume(char c) {
    if (Peek() != c || AtEnd()) return false;
    ++pos_;
    return true;
  }
  int32_t Add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
  }
  int32_t AddClass(Ranges ranges) {
    Node node = MakeNode(NodeKind::kClass);
    node.ranges = Normalize(std::move(ranges));
    return Add(std::move(node));
  }

  const absl::string_view p_;
  const int32_t max_repeat_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
};

absl::StatusOr<int32_t> Parser::Parse() {
  if (p_.size() > static_cast<size_t>(kMaxRegexBytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("regex: the pattern is %d bytes; the limit is %d",
                        p_.size(), kMaxRegexBytes));
  }
  ASSIGN_OR_RETURN(int32_t root, ParseDisjunction(0));
  if (!AtEnd()) return SyntaxError(pos_, "unmatched ')'");
  return root;
}

absl::StatusOr<int32_t> Parser::ParseDisjunction(int depth) {
  std::vector<int32_t> alternatives;
  do {
    ASSIGN_OR_RETURN(int32_t alternative, ParseAlternative(depth));
    alternatives.push_back(alternative);
  } while (Consume('|'));
  if (alternatives.size() == 1) return alternatives[0];
  Node node = MakeNode(NodeKind::kAlt);
  node.children = std::move(alternatives);
  return Add(std::move(node));
}

absl::StatusOr<int32_t> Parser::ParseAlternative(int depth) {
  Node seq = MakeNode(NodeKind::kSeq);
  while (!AtEnd() && Peek() != '|' && Peek() != ')') {
    const size_t at = pos_;
    const char c = Peek();
    int32_t atom = -1;
    bool quantifiable = true;
    switch (c) {
      case '^':
      case '$':
        ++pos_;
        atom = Add(MakeNode(c == '^' ? NodeKind::kStart : NodeKind::kEnd));
        quantifiable = false;
        break;
      case '(': {
        ++pos_;
        ASSIGN_OR_RETURN(atom, ParseGroup(at, depth + 1));
        break;
      }
      case '[': {
        ++pos_;
        ASSIGN_OR_RETURN(Ranges ranges, ParseClass(at));
        atom = AddClass(std::move(ranges));
        break;
      }
      case '.':
        ++pos_;
        atom = AddClass(Complement(LineTerminators()));
        break;
      case '\\': {
        ++pos_;
        ASSIGN_OR_RETURN(Atom escaped, ParseEscape(/*in_class=*/false));
        atom = escaped.is_set ? AddClass(std::move(escaped.set))
                              : AddClass({{escaped.cp, escaped.cp}});
        break;
      }
      case '*':
      case '+':
      case '?':
      case '{':
        return SyntaxError(
            at, absl::StrFormat("nothing to repeat before '%c' (write \\%c "
                                "for the character itself)",
                                c, c));
      case '}':
      case ']':
        return SyntaxError(at, absl::StrFormat("lone '%c' (write \\%c for "
                                               "the character itself)",
                                               c, c));
      default: {
        ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
        atom = AddClass({{cp, cp}});
        break;
      }
    }
    const char q = Peek();
    if (!AtEnd() && (q == '*' || q == '+' || q == '?' || q == '{')) {
      if (!quantifiable) {
        return SyntaxError(pos_, "an anchor cannot be repeated");
      }
      ASSIGN_OR_RETURN(atom, ParseQuantifier(atom));
    }
    seq.children.push_back(atom);
  }
  if (seq.children.size() == 1) return seq.children[0];
  return Add(std::move(seq));
}

absl::StatusOr<int32_t> Parser::ParseGroup(size_t open, int depth) {
  if (depth > kMaxRegexDepth) {
    return SyntaxError(
        open, absl::StrFormat("groups nested deeper than %d", kMaxRegexDepth));
  }
  if (Consume('?')) {
    const size_t at = pos_;
    const char c = Peek();
    if (Consume(':')) {
      // Non-capturing: nothing to record.
    } else if (c == '=') {
      return Unsupported(open, "lookahead (?=...)");
    } else if (c == '!') {
      return Unsupported(open, "negative lookahead (?!...)");
    } else if (Consume('<')) {
      if (Peek() == '=') return Unsupported(open, "lookbehind (?<=...)");
      if (Peek() == '!') {
        return Unsupported(open, "negative lookbehind (?<!...)");
      }
      // A group name: an identifier (its non-ASCII letters taken on trust).
      const size_t name = pos_;
      while (!AtEnd() && Peek() != '>') {
        const char n = Peek();
        const bool ok = IsAsciiLetter(n) || n == '_' || n == '$' ||
                        (IsDigit(n) && pos_ > name) ||
                        static_cast<uint8_t>(n) >= 0x80;
        if (!ok) break;
        ++pos_;
      }
      if (pos_ == name || !Consume('>')) {
        return SyntaxError(pos_, "expected a group name and '>' after '(?<'");
      }
    } else if (c == 'P') {
      return SyntaxError(at,
                         "(?P...) is Python syntax; ECMAScript names a group "
                         "(?<name>...)");
    } else if (c == 'i' || c == 'm' || c == 's' || c == 'x' || c == 'u' ||
               c == '-') {
      return Unsupported(open, "an inline modifier (?i) / (?i:...)");
    } else {
      return SyntaxError(at, "expected ':', '<', '=' or '!' after '(?'");
    }
  }
  ASSIGN_OR_RETURN(int32_t body, ParseDisjunction(depth));
  if (!Consume(')')) {
    return SyntaxError(pos_, absl::StrFormat("expected ')' to close the "
                                             "group opened at byte %d",
                                             open));
  }
  return body;
}

absl::StatusOr<int32_t> Parser::ParseQuantifier(int32_t atom) {
  const size_t at = pos_;
  int32_t min = 0;
  int32_t max = kUnbounded;
  if (Consume('*')) {
  } else if (Consume('+')) {
    min = 1;
  } else if (Consume('?')) {
    max = 1;
  } else {
    Consume('{');
    ASSIGN_OR_RETURN(min, ParseCount());
    max = min;
    if (Consume(',')) {
      max = kUnbounded;
      if (Peek() != '}') {
        ASSIGN_OR_RETURN(max, ParseCount());
      }
    }
    if (!Consume('}')) {
      return SyntaxError(pos_,
                         "expected '}' to end the quantifier {n}, {n,} or "
                         "{n,m} (write \\{ for the character itself)");
    }
    if (max != kUnbounded && max < min) {
      return SyntaxError(at, "numbers out of order in the {n,m} quantifier");
    }
  }
  Consume('?');  // lazy: the same language
  Node node = MakeNode(NodeKind::kRepeat);
  node.children = {atom};
  node.min = min;
  node.max = max;
  return Add(std::move(node));
}

absl::StatusOr<int32_t> Parser::ParseCount() {
  const size_t at = pos_;
  int64_t n = 0;
  while (!AtEnd() && IsDigit(Peek())) {
    n = std::min<int64_t>(n * 10 + (Peek() - '0'), int64_t{1} << 40);
    ++pos_;
  }
  if (pos_ == at) {
    return SyntaxError(at,
                       "expected a number in the quantifier {n}, {n,} or "
                       "{n,m} (write \\{ for the character itself)");
  }
  if (n > max_repeat_) {
    return SyntaxError(at,
                       absl::StrFormat("the repetition count %s exceeds "
                                       "the limit %d",
                                       p_.substr(at, pos_ - at), max_repeat_));
  }
  return static_cast<int32_t>(n);
}

absl::StatusOr<Ranges> Parser::ParseClass(size_t open) {
  const bool negate = Consume('^');
  Ranges ranges;
  while (true) {
    if (AtEnd()) {
      return SyntaxError(open, "expected ']' to close the class opened here");
    }
    if (Consume(']')) break;
    ASSIGN_OR_RETURN(Atom lo, ParseClassAtom());
    if (Peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
      const size_t dash = pos_++;
      ASSIGN_OR_RETURN(Atom hi, ParseClassAtom());
      if (lo.is_set || hi.is_set) {
        return SyntaxError(dash,
                           "a class escape (\\d, \\w, \\s ...) cannot "
                           "bound a range (write \\- for '-')");
      }
      if (lo.cp > hi.cp) {
        return SyntaxError(dash, "range out of order in the class");
      }
      ranges.push_back({lo.cp, hi.cp});
    } else if (lo.is_set) {
      ranges.insert(ranges.end(), lo.set.begin(), lo.set.end());
    } else {
      ranges.push_back({lo.cp, lo.cp});
    }
  }
  return negate ? Complement(std::move(ranges)) : Normalize(std::move(ranges));
}

absl::StatusOr<Parser::Atom> Parser::ParseClassAtom() {
  if (Consume('\\')) return ParseEscape(/*in_class=*/true);
  Atom atom;
  ASSIGN_OR_RETURN(atom.cp, NextCodepoint());
  return atom;
}

// After a '\'.
absl::StatusOr<Parser::Atom> Parser::ParseEscape(bool in_class) {
  const size_t at = pos_ - 1;
  if (AtEnd()) return SyntaxError(at, "the pattern ends with a lone '\\'");
  const char c = p_[pos_++];
  Atom atom;
  auto set = [&atom](Ranges ranges) {
    atom.is_set = true;
    atom.set = std::move(ranges);
    return atom;
  };
  auto code = [&atom](uint32_t cp) {
    atom.cp = cp;
    return atom;
  };
  switch (c) {
    case 't':
      return code('\t');
    case 'n':
      return code('\n');
    case 'v':
      return code('\v');
    case 'f':
      return code('\f');
    case 'r':
      return code('\r');
    case 'd':
      return set(Digits());
    case 'D':
      return set(Complement(Digits()));
    case 'w':
      return set(WordChars());
    case 'W':
      return set(Complement(WordChars()));
    case 's':
      return set(Spaces());
    case 'S':
      return set(Complement(Spaces()));
    case 'b':
      if (in_class) return code(0x08);
      return Unsupported(at, "a word boundary \\b");
    case 'B':
      if (in_class) return SyntaxError(at, "\\B inside a class");
      return Unsupported(at, "a non-word-boundary \\B");
    case '0':
      if (IsDigit(Peek())) {
        return SyntaxError(at, "an octal escape (\\0 followed by a digit)");
      }
      return code(0);
    case 'c': {
      const char letter = Peek();
      if (!IsAsciiLetter(letter)) {
        return SyntaxError(pos_, "expected a letter after \\c");
      }
      ++pos_;
      return code(static_cast<uint32_t>(letter) % 32);
    }
    case 'x': {
      ASSIGN_OR_RETURN(uint32_t cp, ParseHex(2, at));
      return code(cp);
    }
    case 'u': {
      ASSIGN_OR_RETURN(uint32_t cp, ParseUnicodeEscape(at));
      return code(cp);
    }
    case 'k':
      return Unsupported(at, "a backreference \\k<name>");
    case 'p':
    case 'P':
      return Unsupported(at, "a Unicode property escape \\p{...}");
    default:
      break;
  }
  if (IsDigit(c)) {
    if (in_class) {
      return SyntaxError(at, "an octal escape (a digit after '\\' in a class)");
    }
    return Unsupported(at, absl::StrFormat("a backreference \\%c", c));
  }
  if (IsAsciiLetter(c)) {
    return SyntaxError(at, absl::StrFormat("unknown escape \\%c", c));
  }
  // Any other character stands for itself (\. \* \/ \- \@ ...).
  --pos_;
  ASSIGN_OR_RETURN(uint32_t cp, NextCodepoint());
  return code(cp);
}

// After "\u": HHHH (a surrogate pair of them is one character) or {H...}.
absl::StatusOr<uint32_t> Parser::ParseUnicodeEscape(size_t at) {
  if (Consume('{')) {
    const size_t digits = pos_;
    uint32_t cp = 0;
    while (!AtEnd() && HexValue(Peek()) >= 0) {
      cp = cp * 16 + HexValue(Peek());
      if (cp > kMaxCodepoint) {
        return SyntaxError(at, "\\u{...} beyond U+10FFFF");
      }
      ++pos_;
    }
    if (pos_ == digits || !Consume('}')) {
      return SyntaxError(pos_, "expected hex digits and '}' in \\u{...}");
    }
    return cp;
  }
  ASSIGN_OR_RETURN(uint32_t cp, ParseHex(4, at));
  if (cp >= 0xD800 && cp <= 0xDBFF && p_.substr(pos_, 2) == "\\u" &&
      pos_ + 6 <= p_.size()) {
    uint32_t low = 0;
    bool hex = true;
    for (size_t i = pos_ + 2; i < pos_ + 6; ++i) {
      hex = hex && HexValue(p_[i]) >= 0;
      low = low * 16 + (hex ? HexValue(p_[i]) : 0);
    }
    if (hex && low >= 0xDC00 && low <= 0xDFFF) {
      pos_ += 6;
      return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
  }
  return cp;
}

absl::StatusOr<uint32_t> Parser::ParseHex(int digits, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const int h = HexValue(Peek());
    if (AtEnd() || h < 0) {
      return SyntaxError(at, absl::StrFormat("expected %d hex digits after "
                                             "\\%c",
                                             digits, p_[at + 1]));
    }
    value = value * 16 + h;
    ++pos_;
  }
  return value;
}

// Decodes one UTF-8 character (strictly: no overlong forms, surrogates or
// values past U+10FFFF).
absl::StatusOr<uint32_t> Parser::NextCodepoint() {
  const size_t at = pos_;
  const uint8_t lead = static_cast<uint8_t>(p_[pos_++]);
  if (lead < 0x80) return lead;
  int extra = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    extra = 1, cp = lead & 0x1F, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    extra = 2, cp = lead & 0x0F, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    extra = 3, cp = lead & 0x07, min = 0x10000;
  } else {
    return SyntaxError(at, "invalid UTF-8");
  }
  for (int i = 0; i < extra; ++i) {
    const uint8_t b = static_cast<uint8_t>(Peek());
    if (AtEnd() || (b & 0xC0) != 0x80) {
      return SyntaxError(at, "invalid UTF-8");
    }
    cp = (cp << 6) | (b & 0x3F);
    ++pos_;
  }
  if (cp < min || cp > kMaxCodepoint ||
      (cp >= kSurrogateLo && cp <= kSurrogateHi)) {
    return SyntaxError(at, "invalid UTF-8");
  }
  return cp;
}

// Search mode lets any text follow the match, so a trailing part Q of the
// pattern without anchors can give way to a Q' with Q'.* = Q.* (a nullable
// Q to nothing, X{n,m} to X{n}), and likewise at the front, without
// changing the language; the automaton gets smaller (\w{1,1000} becomes
// \w). The context of the rest (whether it ends at the end of the text)
// is unchanged: it does exactly when Q and Q' both match empty there.
class EdgeTrimmer {
 public:
  explicit EdgeTrimmer(std::vector<Node>* nodes) : nodes_(*nodes) {}

  // The pattern `id` trimmed at its right (or left) edge.
  int32_t Trim(int32_t id, bool right) {
    Node node = nodes_[id];
    switch (node.kind) {
      case NodeKind::kClass:
      case NodeKind::kStart:
      case NodeKind::kEnd:
        return id;
      case NodeKind::kRepeat:
        if (Anchored(id) || node.min == node.max) return id;
        node.max = node.min;
        return node.min == 0 ? Add(MakeNode(NodeKind::kSeq))
                             : Add(std::move(node));
      case NodeKind::kAlt:
        for (int32_t& c : node.children) c = Trim(c, right);
        return Add(std::move(node));
      case NodeKind::kSeq: {
        std::vector<int32_t>& items = node.children;
        if (!right) std::reverse(items.begin(), items.end());
        while (!items.empty() && !Anchored(items.back()) &&
               Nullable(items.back())) {
          items.pop_back();
        }
        if (!items.empty()) items.back() = Trim(items.back(), right);
        if (!right) std::reverse(items.begin(), items.end());
        return Add(std::move(node));
      }
    }
    return id;
  }

 private:
  int32_t Add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
  }

  bool Anchored(int32_t id) const {
    const Node& node = nodes_[id];
    if (node.kind == NodeKind::kStart || node.kind == NodeKind::kEnd) {
      return true;
    }
    for (int32_t c : node.children) {
      if (Anchored(c)) return true;
    }
    return false;
  }

  bool Nullable(int32_t id) const {
    const Node& node = nodes_[id];
    switch (node.kind) {
      case NodeKind::kClass:
        return false;
      case NodeKind::kStart:
      case NodeKind::kEnd:
        return true;
      case NodeKind::kRepeat:
        return node.min == 0 || Nullable(node.children[0]);
      case NodeKind::kAlt:
        for (int32_t c : node.children) {
          if (Nullable(c)) return true;
        }
        return false;
      case NodeKind::kSeq:
        for (int32_t c : node.children) {
          if (!Nullable(c)) return false;
        }
        return true;
    }
    return false;
  }

  std::vector<Node>& nodes_;
};

// The lowering (see the note at the top).
class Lowerer {
 public:
  Lowerer(Grammar* g, const std::vector<Node>& nodes,
          const RegexOptions& options)
      : g_(g), nodes_(nodes), options_(options), start_(g->num_exprs()) {}

  absl::StatusOr<ExprId> Lower(int32_t root);

 private:
  // Index of the context (s, e): s = starts at the start of the text,
  // e = ends at its end.
  static int Ctx(int s, int e) { return s * 2 + e; }

  struct Lowered {
    bool anchored = false;
    std::array<ExprId, 4> n{};  // non-empty matches (see the note at top)
    std::array<bool, 4> z{};    // matches the empty string
  };

  Lowered Plain(ExprId e, bool nullable) {
    Lowered out;
    out.n.fill(e);
    out.z.fill(nullable);
    return out;
  }

  absl::StatusOr<Lowered> LowerNode(int32_t id);
  Lowered Concat(const Lowered& x, const Lowered& y);
  Lowered RepeatOf(const Lowered& x, int32_t min, int32_t max);
  absl::StatusOr<ExprId> Emit(const Ranges& ranges);
  ExprId Seq(std::vector<ExprId> items);
  ExprId Alt(std::vector<ExprId> items);
  absl::Status CheckNodes() const;
  absl::Status CheckTreeSize(ExprId root) const;

  Grammar* const g_;
  const std::vector<Node>& nodes_;
  const RegexOptions& options_;
  const int32_t start_;  // g_->num_exprs() before this pattern
  ExprId empty_ = -1;
  ExprId nothing_ = -1;
  // Shared expressions: one per distinct class, sequence and alternation.
  std::map<std::vector<uint32_t>, ExprId> emitted_;
  std::map<std::pair<bool, std::vector<ExprId>>, ExprId> combined_;
};

absl::StatusOr<ExprId> Lowerer::Lower(int32_t root) {
  empty_ = g_->Empty();
  nothing_ = g_->Nothing();
  ASSIGN_OR_RETURN(Lowered r, LowerNode(root));
  ExprId result = -1;
  if (!options_.search) {
    result = r.anchored
                 ? Alt({r.n[Ctx(1, 1)], r.z[Ctx(1, 1)] ? empty_ : nothing_})
                 : r.n[Ctx(1, 1)];
  } else {
    ASSIGN_OR_RETURN(ExprId any, Emit(Complement({})));
    const ExprId star = g_->Star(any);
    if (!r.anchored) {
      result = Seq({star, r.n[0], star});
    } else {
      std::vector<ExprId> terms = {Seq({star, r.n[Ctx(0, 0)], star}),
                                   Seq({r.n[Ctx(1, 0)], star}),
                                   Seq({star, r.n[Ctx(0, 1)]}), r.n[Ctx(1, 1)]};
      // An empty match inside a non-empty text (at its start, its end or
      // between) makes every text match; one only in the empty text adds
      // just that.
      if (r.z[Ctx(0, 0)] || r.z[Ctx(1, 0)] || r.z[Ctx(0, 1)]) {
        terms.push_back(star);
      } else if (r.z[Ctx(1, 1)]) {
        terms.push_back(empty_);
      }
      result = Alt(std::move(terms));
    }
  }
  RETURN_IF_ERROR(CheckNodes());
  RETURN_IF_ERROR(CheckTreeSize(result));
  return result;
}

absl::StatusOr<Lowerer::Lowered> Lowerer::LowerNode(int32_t id) {
  const Node& node = nodes_[id];
  switch (node.kind) {
    case NodeKind::kClass: {
      ASSIGN_OR_RETURN(ExprId e, Emit(node.ranges));
      return Plain(e, false);
    }
    case NodeKind::kStart:
    case NodeKind::kEnd: {
      Lowered out = Plain(nothing_, false);
      out.anchored = true;
      for (int s = 0; s < 2; ++s) {
        for (int e = 0; e < 2; ++e) {
          out.z[Ctx(s, e)] = node.kind == NodeKind::kStart ? s : e;
        }
      }
      return out;
    }
    case NodeKind::kSeq: {
      // Runs of anchor-free items become one plain sequence each.
      Lowered out = Plain(empty_, true);
      std::vector<ExprId> run;
      bool run_nullable = true;
      auto flush = [&]() {
        if (run.empty()) return;
        out = Concat(out, Plain(Seq(std::move(run)), run_nullable));
        run.clear();
        run_nullable = true;
      };
      for (int32_t child : node.children) {
        ASSIGN_OR_RETURN(Lowered c, LowerNode(child));
        if (c.anchored) {
          flush();
          out = Concat(out, c);
        } else {
          run.push_back(c.n[0]);
          run_nullable = run_nullable && c.z[0];
        }
      }
      flush();
      RETURN_IF_ERROR(CheckNodes());
      return out;
    }
    case NodeKind::kAlt: {
      std::vector<Lowered> children;
      bool anchored = false;
      for (int32_t child : node.children) {
        ASSIGN_OR_RETURN(Lowered c, LowerNode(child));
        anchored = anchored || c.anchored;
        children.push_back(std::move(c));
      }
      Lowered out;
      out.anchored = anchored;
      for (int i = 0; i < 4; ++i) {
        std::vector<ExprId> items;
        out.z[i] = false;
        for (const Lowered& c : children) {
          items.push_back(c.n[i]);
          out.z[i] = out.z[i] || c.z[i];
        }
        out.n[i] = anchored || i == 0 ? Alt(std::move(items)) : out.n[0];
      }
      RETURN_IF_ERROR(CheckNodes());
      return out;
    }
    case NodeKind::kRepeat: {
      ASSIGN_OR_RETURN(Lowered c, LowerNode(node.children[0]));
      return RepeatOf(c, node.min, node.max);
    }
  }
  return absl::InternalError("regex: unknown syntax node");
}

Lowerer::Lowered Lowerer::Concat(const Lowered& x, const Lowered& y) {
  if (!x.anchored && !y.anchored) {
    return Plain(Seq({x.n[0], y.n[0]}), x.z[0] && y.z[0]);
  }
  Lowered out;
  out.anchored = true;
  for (int s = 0; s < 2; ++s) {
    for (int e = 0; e < 2; ++e) {
      std::vector<ExprId> terms = {Seq({x.n[Ctx(s, 0)], y.n[Ctx(0, e)]})};
      if (x.z[Ctx(s, 0)]) terms.push_back(y.n[Ctx(s, e)]);
      if (y.z[Ctx(0, e)]) terms.push_back(x.n[Ctx(s, e)]);
      out.n[Ctx(s, e)] = Alt(std::move(terms));
      out.z[Ctx(s, e)] = x.z[Ctx(s, e)] && y.z[Ctx(s, e)];
    }
  }
  return out;
}

// A non-empty match of X{min,max} is k >= 1 non-empty iterations, the
// first in context (s,0), the middle ones in (0,0), the last in (0,e) (one
// alone: (s,e)); empty iterations make up the count to min when X can
// match empty at the first's start or the last's end.
Lowerer::Lowered Lowerer::RepeatOf(const Lowered& x, int32_t min, int32_t max) {
  if (max == 0) return Plain(empty_, true);
  if (!x.anchored) {
    return Plain(g_->Repeat(x.n[0], min, max), min == 0 || x.z[0]);
  }
  Lowered out;
  out.anchored = true;
  for (int s = 0; s < 2; ++s) {
    for (int e = 0; e < 2; ++e) {
      const bool fill = x.z[Ctx(s, 0)] || x.z[Ctx(0, e)];
      const int32_t kmin = fill ? 1 : std::max(min, 1);
      std::vector<ExprId> terms;
      if (kmin <= 1) terms.push_back(x.n[Ctx(s, e)]);
      if (max == kUnbounded || max >= 2) {
        const ExprId middle =
            g_->Repeat(x.n[Ctx(0, 0)], std::max(kmin, 2) - 2,
                       max == kUnbounded ? kUnbounded : max - 2);
        terms.push_back(Seq({x.n[Ctx(s, 0)], middle, x.n[Ctx(0, e)]}));
      }
      out.n[Ctx(s, e)] = Alt(std::move(terms));
      out.z[Ctx(s, e)] = min == 0 || x.z[Ctx(s, e)];
    }
  }
  return out;
}

absl::StatusOr<ExprId> Lowerer::Emit(const Ranges& ranges) {
  if (ranges.empty()) return nothing_;
  std::vector<uint32_t> key;
  for (CodepointRange r : ranges) {
    key.push_back(r.lo);
    key.push_back(r.hi);
  }
  auto it = emitted_.find(key);
  if (it != emitted_.end()) return it->second;
  const ExprId e =
      options_.emit ? options_.emit(g_, ranges) : g_->Codepoints(ranges);
  emitted_.emplace(std::move(key), e);
  RETURN_IF_ERROR(CheckNodes());
  return e;
}

ExprId Lowerer::Seq(std::vector<ExprId> items) {
  auto key = std::make_pair(false, items);
  auto it = combined_.find(key);
  if (it != combined_.end()) return it->second;
  const ExprId e = g_->Seq(std::move(items));
  combined_.emplace(std::move(key), e);
  return e;
}

ExprId Lowerer::Alt(std::vector<ExprId> items) {
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
  auto key = std::make_pair(true, items);
  auto it = combined_.find(key);
  if (it != combined_.end()) return it->second;
  const ExprId e = g_->Alt(std::move(items));
  combined_.emplace(std::move(key), e);
  return e;
}

absl::Status Lowerer::CheckNodes() const {
  if (g_->num_exprs() - start_ > options_.max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("regex: the pattern needs more than %d grammar nodes",
                        options_.max_nodes));
  }
  return absl::OkStatus();
}

// The size of `root` as a tree with every repetition unrolled (kUnbounded:
// min + 1 copies), capped just past the limit.
absl::Status Lowerer::CheckTreeSize(ExprId root) const {
  const int64_t cap = int64_t{options_.max_nodes} + 1;
  // Keyed by id, not a vector over g_: the grammar may already be large.
  std::unordered_map<ExprId, int64_t> size;
  auto known = [&size](ExprId id) { return size.count(id) != 0; };
  // Post-order over the DAG without recursion.
  std::vector<std::pair<ExprId, bool>> stack = {{root, false}};
  while (!stack.empty()) {
    auto [id, expanded] = stack.back();
    stack.pop_back();
    if (known(id)) continue;
    const Expr& e = g_->expr(id);
    if (!expanded) {
      stack.push_back({id, true});
      for (ExprId c : e.children) {
        if (!known(c)) stack.push_back({c, false});
      }
      continue;
    }
    int64_t total = 1;
    for (ExprId c : e.children) total = std::min(cap, total + size[c]);
    if (e.kind == ExprKind::kRepeat) {
      const int64_t copies = e.max == kUnbounded ? e.min + 1 : e.max;
      total = std::min(cap, 1 + size[e.children[0]] * copies);
    }
    size[id] = total;
  }
  if (size[root] > options_.max_nodes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "regex: the pattern expands to more than %d grammar nodes (nested "
        "or large repetitions)",
        options_.max_nodes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExprId> AddRegex(Grammar* g, absl::string_view pattern,
                                const RegexOptions& options) {
  Parser parser(pattern, options.max_repeat);
  ASSIGN_OR_RETURN(int32_t root, parser.Parse());
  if (options.search) {
    EdgeTrimmer trimmer(parser.nodes());
    root = trimmer.Trim(trimmer.Trim(root, /*right=*/true), /*right=*/false);
  }
  Lowerer lowerer(g, *parser.nodes(), options);
  return lowerer.Lower(root);
}

}  // namespace paceline::engine::grammar
